//! No module of a crate imports one that imports it back, directly or around a loop: each
//! crate's modules read top-down, the way its crates do (cargo already refuses a loop between
//! crates). A reference is a `crate::a::b` path, a `super::x` path, or a child module a
//! parent's `use` names; a child naming its own parent, and a parent its child, are not loops.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every module of a crate's `src`, by path (`""` for the root, `config::layer`), with its
/// text up to its tests and without comments.
fn modules(src: &Path) -> BTreeMap<String, String> {
    let mut found = BTreeMap::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().is_none_or(|ext| ext != "rs") {
                continue;
            }
            let relative: PathBuf = path.strip_prefix(src).unwrap().with_extension("");
            let mut parts: Vec<String> = relative
                .components()
                .map(|part| part.as_os_str().to_string_lossy().into_owned())
                .collect();
            if matches!(
                parts.last().map(String::as_str),
                Some("mod" | "lib" | "main")
            ) {
                parts.pop();
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let code = text.split("#[cfg(test)]").next().unwrap_or_default();
            let code: String = code
                .lines()
                .map(|line| line.split("//").next().unwrap_or_default())
                .collect::<Vec<_>>()
                .join("\n");
            found.insert(parts.join("::"), code);
        }
    }
    found
}

/// The identifiers of a path that starts right after `prefix` wherever it occurs.
fn paths_after<'t>(code: &'t str, prefix: &str) -> Vec<Vec<&'t str>> {
    code.match_indices(prefix)
        .filter(|(at, _)| {
            !code[..*at]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_alphanumeric() || c == '_')
        })
        .map(|(at, _)| {
            code[at + prefix.len()..]
                .split("::")
                .map_while(|segment| {
                    let name: &str = segment
                        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                        .next()
                        .unwrap_or_default();
                    (!name.is_empty() && name.starts_with(|c: char| c.is_ascii_lowercase()))
                        .then_some(name)
                })
                .collect()
        })
        .collect()
}

/// Which modules each module refers to.
fn edges(modules: &BTreeMap<String, String>) -> BTreeMap<&str, BTreeSet<&str>> {
    let join = |parent: &str, name: &str| {
        if parent.is_empty() {
            name.to_owned()
        } else {
            format!("{parent}::{name}")
        }
    };
    let mut edges = BTreeMap::new();
    for (module, code) in modules {
        let parent = module.rsplit_once("::").map_or("", |(parent, _)| parent);
        let mut targets = BTreeSet::new();
        let mut add = |target: String| {
            if let Some((known, _)) = modules.get_key_value(&target)
                && known != module
                && !module.starts_with(&format!("{known}::"))
                && !known.starts_with(&format!("{module}::"))
            {
                targets.insert(known.as_str());
            }
        };
        for path in paths_after(code, "crate::") {
            // The longest prefix of the path that is a module.
            if let Some(target) = (1..=path.len())
                .rev()
                .map(|length| path[..length].join("::"))
                .find(|target| modules.contains_key(target))
            {
                add(target);
            }
        }
        for path in paths_after(code, "super::") {
            if let Some(first) = path.first() {
                add(join(parent, first));
            }
        }
        edges.insert(module.as_str(), targets);
    }
    edges
}

/// A loop through `start`, if there is one: the modules along it.
fn loop_through<'m>(
    start: &'m str,
    edges: &BTreeMap<&'m str, BTreeSet<&'m str>>,
) -> Option<Vec<&'m str>> {
    let mut stack = vec![(start, vec![start])];
    let mut seen = BTreeSet::new();
    while let Some((at, path)) = stack.pop() {
        for next in edges.get(at).into_iter().flatten() {
            if *next == start {
                return Some(path);
            }
            if seen.insert(*next) {
                let mut longer = path.clone();
                longer.push(next);
                stack.push((next, longer));
            }
        }
    }
    None
}

#[test]
fn no_module_imports_one_that_imports_it_back() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates");
    let mut loops = Vec::new();
    let mut read = 0;
    for entry in std::fs::read_dir(&crates).unwrap() {
        let src = entry.unwrap().path().join("src");
        if !src.is_dir() {
            continue;
        }
        let modules = modules(&src);
        read += modules.len();
        let edges = edges(&modules);
        for module in modules.keys() {
            if let Some(found) = loop_through(module, &edges) {
                loops.push(format!("{}: {}", src.display(), found.join(" -> ")));
            }
        }
    }
    assert!(
        read > 100,
        "only {read} modules found under {}",
        crates.display()
    );
    assert!(loops.is_empty(), "import loops:\n{}", loops.join("\n"));
}

#[test]
fn a_loop_is_found() {
    let modules: BTreeMap<String, String> = [
        ("".to_owned(), "mod a; mod b;".to_owned()),
        ("a".to_owned(), "use crate::b::thing;".to_owned()),
        ("b".to_owned(), "fn f() { crate::a::other(); }".to_owned()),
        ("b::c".to_owned(), "use super::super::a;".to_owned()),
    ]
    .into();
    let edges = edges(&modules);
    assert_eq!(loop_through("a", &edges), Some(vec!["a", "b"]));
    // A child naming its parent's parent's module is no loop of its own.
    assert_eq!(loop_through("b::c", &edges), None);
}
