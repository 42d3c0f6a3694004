//! The Python binding's own tests (pytest, `crates/condense-python/tests`), run by the test
//! command like every other: `.ci/run` builds the wheel with `scripts/python-binding.sh`,
//! installs it into a virtualenv with pytest and LangChain, and sets
//! `CONDENSE_BINDING_PYTHON` to that virtualenv's python; elsewhere the test says it was
//! skipped. The binding's results are compared with this CLI's, byte for byte.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::path::Path;
use std::process::Command;

#[test]
fn the_python_binding_passes_its_tests() {
    let Some(python) = condense_core::testing::required_url(
        "the_python_binding_passes_its_tests",
        "CONDENSE_BINDING_PYTHON",
        "CONDENSE_REQUIRE_BINDING",
    ) else {
        return;
    };
    let tests = Path::new(env!("CARGO_MANIFEST_DIR")).join("../condense-python/tests");
    let output = Command::new(&python)
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider"])
        .arg(&tests)
        .env("CONDENSE_CLI", env!("CARGO_BIN_EXE_condense"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    eprintln!("{stdout}");
    assert!(output.status.success(), "{stdout}\n{stderr}");
    // pytest's closing line names how many passed; none passing is a failure too.
    assert!(
        stdout
            .lines()
            .any(|line| line.contains(" passed") && !line.contains(" failed")),
        "{stdout}"
    );
}
