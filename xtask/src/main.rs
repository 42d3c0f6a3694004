//! `cargo xtask ci` runs what CI runs; `cargo xtask bench` runs the benchmarks whose figures go in
//! BENCHMARKS.md; `cargo xtask frontier` makes BENCHMARKS.md's table of every policy's cost and
//! keeps on the shared sessions again; `cargo xtask build-plugins` builds the example plugins in
//! release mode. Kept in Rust so a fresh machine needs nothing but cargo.
// Printing is this tool's job.
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod frontier;

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map_or("", String::as_str) {
        "ci" => ci(),
        "bench" => cargo(&["bench", "--workspace"]),
        "frontier" => frontier::run(&args[1..]),
        "build-plugins" => build_plugins(),
        _ => {
            eprintln!("usage: cargo xtask <ci|bench|frontier|build-plugins>");
            std::process::exit(2);
        }
    }
}

fn ci() -> Result<()> {
    cargo(&["fmt", "--all", "--check"])?;
    cargo(&[
        "clippy",
        "--workspace",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ])?;
    cargo(&["test", "--workspace"])
}

/// The plugins a user can load, built as shared libraries under `target/release`.
const PLUGINS: [&str; 2] = [
    "condense-plugin-memory-store",
    "condense-plugin-team-template",
];

fn build_plugins() -> Result<()> {
    let mut args = vec!["build", "--release"];
    for plugin in PLUGINS {
        args.extend(["-p", plugin]);
    }
    cargo(&args)?;
    for plugin in PLUGINS {
        let file = format!(
            "{}{}{}",
            std::env::consts::DLL_PREFIX,
            plugin.replace('-', "_"),
            std::env::consts::DLL_SUFFIX
        );
        println!("target/release/{file}");
    }
    Ok(())
}

/// The workspace's root, where `cargo xtask` is run from.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

fn cargo(args: &[&str]) -> Result<()> {
    eprintln!("$ cargo {}", args.join(" "));
    let status = Command::new(env!("CARGO"))
        .args(args)
        .env("INSTA_UPDATE", "no")
        .status()
        .with_context(|| format!("could not run cargo {}", args.join(" ")))?;
    if !status.success() {
        bail!("cargo {} failed ({status})", args.join(" "));
    }
    Ok(())
}
