//! `cargo xtask ci` runs what CI runs; `cargo xtask bench` runs the benchmarks whose figures go in
//! BENCHMARKS.md. Kept in Rust so a fresh machine needs nothing but cargo.

use std::process::Command;

use anyhow::{Context, Result, bail};

fn main() -> Result<()> {
    let task = std::env::args().nth(1).unwrap_or_default();
    match task.as_str() {
        "ci" => ci(),
        "bench" => cargo(&["bench", "--workspace"]),
        _ => {
            eprintln!("usage: cargo xtask <ci|bench>");
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
