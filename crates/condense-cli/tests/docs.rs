//! Every `condense` command the README and the guides in `docs/` show is run, so none can rot:
//! each line of their `sh` blocks that starts with `condense` is taken as written (its line
//! continuations joined, its comment dropped) and run in a directory that holds what it names.
//! The placeholders a reader replaces with their own are given real things: `session.jsonl`
//! is the example Claude Code session, `session.json` a shared Chat Completions body, a
//! directory of sessions holds the example, a handle is one the example's compaction stored,
//! and a Redis URL is the test's own Redis (the commands that need one are skipped without
//! it). `serve` is started on a free port, asked `/healthz`, and stopped.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{command, example, handles, transcripts};

/// The `condense` commands of the README and `docs/*.md`, with where each is.
fn documented_commands() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut pages: Vec<PathBuf> = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    let mut found = Vec::new();
    for page in pages {
        let text = std::fs::read_to_string(&page).unwrap();
        let name = page.file_name().unwrap().to_string_lossy().into_owned();
        let mut in_sh = false;
        let mut pending = String::new();
        for line in text.lines() {
            if line.starts_with("```") {
                in_sh = line.trim() == "```sh";
                continue;
            }
            if !in_sh {
                continue;
            }
            let line = line.split(" # ").next().unwrap().trim_end();
            if let Some(continued) = line.strip_suffix('\\') {
                pending.push_str(continued.trim());
                pending.push(' ');
                continue;
            }
            let whole = format!("{pending}{}", line.trim());
            pending.clear();
            if whole.starts_with("condense ") {
                found.push((name.clone(), whole));
            }
        }
    }
    found
}

/// A free port on the loopback address.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn every_documented_command_runs() {
    let commands = documented_commands();
    assert!(commands.len() >= 15, "{commands:?}");
    let dir = tempfile::tempdir().unwrap();
    let here = dir.path();
    // What the commands name.
    std::fs::copy(example(), here.join("session.jsonl")).unwrap();
    std::fs::copy(
        transcripts().join("openai/mini-swe-agent-django__django-11138.json"),
        here.join("session.json"),
    )
    .unwrap();
    std::fs::create_dir(here.join("myrepo")).unwrap();
    std::fs::copy(example(), here.join("myrepo/session.jsonl")).unwrap();
    std::fs::write(
        here.join("aggressive.toml"),
        "[prune]\nprotect_tokens = 10000\n",
    )
    .unwrap();
    std::fs::create_dir_all(here.join("shared-originals")).unwrap();
    // A handle the example's compaction stored, for `condense recall`.
    let store = here.join("originals");
    let made = command(
        here,
        &[
            "compact",
            "session.jsonl",
            "--context-window",
            "32000",
            "--max-output-tokens",
            "4096",
            "--store",
            store.to_str().unwrap(),
            "-o",
            "stored.jsonl",
            "-q",
        ],
    )
    .output()
    .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let handle = handles(&here.join("stored.jsonl"))
        .into_iter()
        .next()
        .unwrap();
    let redis = std::env::var("CONDENSE_REDIS_URL").ok();
    // The same originals in the test's Redis, for the commands that name one.
    if let Some(url) = &redis {
        let made = command(
            here,
            &[
                "compact",
                "session.jsonl",
                "--context-window",
                "32000",
                "--max-output-tokens",
                "4096",
                "--store",
                url,
                "-o",
                "stored-redis.jsonl",
                "-q",
            ],
        )
        .output()
        .unwrap();
        assert!(
            made.status.success(),
            "{}",
            String::from_utf8_lossy(&made.stderr)
        );
    }

    let mut ran = 0;
    for (page, documented) in &commands {
        let mut line = documented
            .replace("~/.claude/projects/myrepo", "myrepo")
            .replace("/shared/condense/originals", "shared-originals");
        if line.contains("redis://") {
            let Some(url) = &redis else {
                eprintln!("SKIPPED (no CONDENSE_REDIS_URL) {page}: {documented}");
                continue;
            };
            line = line.replace("redis://10.0.0.5:6379/0", url);
        }
        let mut words: Vec<String> = line.split_whitespace().skip(1).map(str::to_owned).collect();
        for word in &mut words {
            if word == "HANDLE" || (word.len() == 32 && word.chars().all(|c| c.is_ascii_hexdigit()))
            {
                *word = handle.clone();
            }
        }
        let args: Vec<&str> = words.iter().map(String::as_str).collect();
        let mut run = command(here, &args);
        run.env("CONDENSE_STORE_DIR", &store);
        if args.first() == Some(&"serve") {
            let port = free_port();
            let mut args: Vec<String> = words.clone();
            match args.iter().position(|word| word == "--listen") {
                Some(at) => args[at + 1] = format!("127.0.0.1:{port}"),
                None => args.extend(["--listen".to_owned(), format!("127.0.0.1:{port}")]),
            }
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let mut run = command(here, &args);
            run.env("CONDENSE_STORE_DIR", &store)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped());
            let mut child = run.spawn().unwrap();
            let started = Instant::now();
            let healthy = loop {
                let answer =
                    std::net::TcpStream::connect(("127.0.0.1", port))
                        .ok()
                        .and_then(|mut stream| {
                            use std::io::{Read, Write};
                            stream
                        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                        .ok()?;
                            let mut reply = String::new();
                            stream.read_to_string(&mut reply).ok()?;
                            Some(reply)
                        });
                if answer.is_some_and(|reply| reply.starts_with("HTTP/1.1 200")) {
                    break true;
                }
                if started.elapsed() > Duration::from_secs(30)
                    || child.try_wait().unwrap().is_some()
                {
                    break false;
                }
                std::thread::sleep(Duration::from_millis(50));
            };
            child.kill().ok();
            let output = child.wait_with_output().unwrap();
            assert!(
                healthy,
                "{page}: `{documented}` did not come up: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        } else {
            let output = run.output().unwrap();
            assert!(
                output.status.success(),
                "{page}: `{documented}` failed: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        ran += 1;
    }
    assert!(ran >= 12, "{ran} commands ran");
}
