//! echo
