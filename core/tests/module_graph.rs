//! The house's two drawing rules (ARCHITECTURE.md, "Invariants"), read off the sources:
//!
//! - the crates depend one way, coordinator -> worker -> infra -> core, with the spaCy
//!   port (nlp) beside core on the float kernels (kernels); `core`, `kernels` and `nlp`
//!   do no network, database or async I/O (none of those crates among their
//!   dependencies);
//! - inside every crate the top-level modules import each other without a circle.
//!
//! An import is a path through `crate::NAME` or `super::...` that lands on another
//! top-level module of the same crate, in code that is not test-only (`#[cfg(test)]`
//! items and the files of `#[cfg(test)] mod NAME;` are skipped). A circle is reported
//! with the modules on it and one file:line of each import.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The crates, lowest first, with the credence crates each may depend on.
const CRATES: [(&str, &str, &[&str]); 6] = [
    ("core", "credence-core", &[]),
    ("kernels", "credence-kernels", &[]),
    ("nlp", "credence-nlp", &["credence-kernels"]),
    ("infra", "credence-infra", &["credence-core"]),
    (
        "worker",
        "credence-worker",
        &[
            "credence-core",
            "credence-infra",
            "credence-kernels",
            "credence-nlp",
        ],
    ),
    (
        "coordinator",
        "credence",
        &[
            "credence-core",
            "credence-infra",
            "credence-nlp",
            "credence-worker",
        ],
    ),
];

/// Crates that do I/O beyond reading files (or run the async runtime that does).
const IO_CRATES: [&str; 9] = [
    "sqlx",
    "tokio",
    "lapin",
    "axum",
    "prometheus",
    "reqwest",
    "futures",
    "async-trait",
    "hyper",
];

/// The dependency names of each `[dependencies]`-like table of a manifest.
fn dependency_tables(manifest: &str) -> BTreeMap<String, Vec<String>> {
    let mut tables: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in manifest.lines() {
        let line = line.trim();
        if let Some(header) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            current = header.ends_with("dependencies").then(|| header.to_string());
            continue;
        }
        if let (Some(table), Some((name, _))) = (&current, line.split_once('=')) {
            if !line.starts_with('#') {
                let name = name.trim().trim_end_matches(".workspace").to_string();
                tables.entry(table.clone()).or_default().push(name);
            }
        }
    }
    tables
}

#[test]
fn crates_depend_one_way_and_the_ground_does_no_io() {
    let workspace_manifest = std::fs::read_to_string(workspace().join("Cargo.toml")).unwrap();
    for (_, package, _) in CRATES {
        assert!(
            workspace_manifest.contains(&format!("{package} = {{ path")) || package == "credence",
            "{package} is not a workspace dependency"
        );
    }
    for (dir, package, allowed) in CRATES {
        let path = workspace().join(dir).join("Cargo.toml");
        let manifest = std::fs::read_to_string(&path).unwrap();
        assert!(
            manifest.contains(&format!("name = \"{package}\"")),
            "{}: not the manifest of {package}",
            path.display()
        );
        let tables = dependency_tables(&manifest);
        assert!(tables.contains_key("dependencies"), "{}", path.display());
        for (table, names) in &tables {
            for name in names.iter().filter(|n| n.starts_with("credence")) {
                assert!(
                    allowed.contains(&name.as_str()),
                    "{}: [{table}] names {name}, which is not below {package} \
                     (allowed: {allowed:?})",
                    path.display()
                );
            }
            if matches!(dir, "core" | "kernels" | "nlp") && table == "dependencies" {
                for name in names {
                    assert!(
                        !IO_CRATES.contains(&name.as_str()) && !name.starts_with("candle"),
                        "{}: {package} depends on {name}; the ground does no I/O and \
                         loads no model",
                        path.display()
                    );
                }
            }
        }
    }
}

/// `src` with comments, string and char literals blanked (newlines kept, so lines
/// still count), so that braces and paths are only code's.
fn code_only(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    let blank = |out: &mut String, s: &[u8]| {
        for &c in s {
            out.push(if c == b'\n' { '\n' } else { ' ' });
        }
    };
    while i < b.len() {
        let rest = &b[i..];
        if rest.starts_with(b"//") {
            let end = rest.iter().position(|&c| c == b'\n').unwrap_or(rest.len());
            blank(&mut out, &rest[..end]);
            i += end;
        } else if rest.starts_with(b"/*") {
            let end = src[i + 2..].find("*/").map_or(rest.len(), |e| e + 4);
            blank(&mut out, &rest[..end]);
            i += end;
        } else if rest[0] == b'r' && (rest.starts_with(b"r\"") || rest.starts_with(b"r#")) {
            let hashes = rest[1..].iter().take_while(|&&c| c == b'#').count();
            if rest.get(1 + hashes) != Some(&b'"') {
                out.push('r');
                i += 1;
                continue;
            }
            let close = format!("\"{}", "#".repeat(hashes));
            let body = 2 + hashes;
            let end = src[i + body..]
                .find(&close)
                .map_or(rest.len(), |e| body + e + close.len());
            blank(&mut out, &rest[..end]);
            i += end;
        } else if rest[0] == b'"' {
            let mut j = 1;
            while j < rest.len() && rest[j] != b'"' {
                j += if rest[j] == b'\\' { 2 } else { 1 };
            }
            let end = (j + 1).min(rest.len());
            blank(&mut out, &rest[..end]);
            i += end;
        } else if rest[0] == b'\'' {
            // A char literal ('x', '\n', '\u{..}'), not a lifetime ('a).
            let len = if rest.get(1) == Some(&b'\\') {
                rest[2..].iter().position(|&c| c == b'\'').map(|p| p + 3)
            } else {
                src[i + 1..]
                    .chars()
                    .next()
                    .map(|c| 1 + c.len_utf8())
                    .filter(|&n| rest.get(n) == Some(&b'\''))
                    .map(|n| n + 1)
            };
            match len {
                Some(n) => {
                    blank(&mut out, &rest[..n]);
                    i += n;
                }
                None => {
                    out.push('\'');
                    i += 1;
                }
            }
        } else {
            let c = src[i..].chars().next().unwrap();
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// `code` with each `#[cfg(test)]` item blanked; the names of `#[cfg(test)] mod NAME;`
/// declarations (test-only files) are returned beside it.
fn without_test_items(code: &str) -> (String, Vec<String>) {
    let mut out = code.to_string();
    let mut test_files = Vec::new();
    let mut from = 0;
    while let Some(at) = out[from..].find("#[cfg(test)]").map(|p| p + from) {
        let after = at + "#[cfg(test)]".len();
        let semi = out[after..].find(';').map(|p| p + after);
        let brace = out[after..].find('{').map(|p| p + after);
        let end = match (semi, brace) {
            (Some(s), b) if b.is_none_or(|b| s < b) => {
                let item = out[after..s].trim();
                if let Some(name) = item.strip_prefix("mod ") {
                    test_files.push(name.trim().to_string());
                }
                s + 1
            }
            (_, Some(b)) => {
                let mut depth = 0usize;
                let mut end = out.len();
                for (k, c) in out[b..].char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = b + k + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                end
            }
            _ => out.len(),
        };
        let blanked: String = out[at..end]
            .chars()
            .map(|c| if c == '\n' { '\n' } else { ' ' })
            .collect();
        out.replace_range(at..end, &blanked);
        from = end;
    }
    (out, test_files)
}

/// One import of a top-level module by another: where it is written.
#[derive(Debug, Clone)]
struct Import {
    file: PathBuf,
    line: usize,
}

/// The module path of a source file under `src`: `a.rs` and `a/mod.rs` are `[a]`,
/// `a/b.rs` is `[a, b]`; the crate root is `[]`.
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap();
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap();
    let stem = last.trim_end_matches(".rs");
    if !matches!(stem, "mod" | "lib" | "main") {
        parts.push(stem.to_string());
    }
    parts
}

/// Every top-level module's imports of other top-level modules, by file and line.
fn top_level_imports(krate: &Path) -> BTreeMap<String, BTreeMap<String, Import>> {
    let src = krate.join("src");
    let mut files = Vec::new();
    collect_rs(&src, &mut files);
    files.sort();
    let mut tops = BTreeSet::new();
    for f in &files {
        if let Some(first) = module_path(&src, f).first() {
            tops.insert(first.clone());
        }
    }
    // Pass 1: which files are test-only modules.
    let mut test_only: BTreeSet<PathBuf> = BTreeSet::new();
    let mut cleaned = Vec::new();
    for f in &files {
        let (code, test_mods) =
            without_test_items(&code_only(&std::fs::read_to_string(f).unwrap()));
        let dir = if f
            .file_name()
            .is_some_and(|n| n == "mod.rs" || n == "lib.rs" || n == "main.rs")
        {
            f.parent().unwrap().to_path_buf()
        } else {
            f.with_extension("")
        };
        for m in test_mods {
            test_only.insert(dir.join(format!("{m}.rs")));
            test_only.insert(dir.join(&m).join("mod.rs"));
        }
        cleaned.push((f.clone(), code));
    }
    let mut edges: BTreeMap<String, BTreeMap<String, Import>> = BTreeMap::new();
    for (f, code) in cleaned {
        if test_only
            .iter()
            .any(|t| f.starts_with(t.with_extension("")) || &f == t)
        {
            continue;
        }
        let path = module_path(&src, &f);
        let Some(me) = path.first().cloned() else {
            continue;
        };
        for (n, line) in code.lines().enumerate() {
            for target in imported_tops(line, &path) {
                if target != me && tops.contains(&target) {
                    edges
                        .entry(me.clone())
                        .or_default()
                        .entry(target)
                        .or_insert(Import {
                            file: f.clone(),
                            line: n + 1,
                        });
                }
            }
        }
    }
    edges
}

/// The top-level modules a line names through `crate::` or `super::`, from a file whose
/// module path is `path`. `use crate::{a::X, b}` names both.
fn imported_tops(line: &str, path: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let mut rest = line;
    while let Some(at) = rest.find("crate::") {
        let preceded = rest[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_');
        let after = &rest[at + "crate::".len()..];
        if !preceded {
            if let Some(group) = after.strip_prefix('{') {
                let group = group.split('}').next().unwrap_or("");
                out.extend(group.split(',').map(|g| ident(g.trim())));
            } else {
                out.push(ident(after));
            }
        }
        rest = after;
    }
    let mut rest = line;
    while let Some(at) = rest.find("super::") {
        let preceded = rest[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':');
        let mut after = &rest[at + "super::".len()..];
        if !preceded {
            let mut up = 1;
            while let Some(next) = after.strip_prefix("super::") {
                up += 1;
                after = next;
            }
            // `super` from a module at depth d names a module at depth d - up + 1.
            if path.len() == up {
                out.push(ident(after));
            }
        }
        rest = &rest[at + "super::".len()..];
    }
    out
}

fn collect_rs(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect_rs(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// A circle in `edges`, if any, as the modules on it in order.
fn find_circle(edges: &BTreeMap<String, BTreeMap<String, Import>>) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    fn visit(
        v: &str,
        edges: &BTreeMap<String, BTreeMap<String, Import>>,
        marks: &mut BTreeMap<String, Mark>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        match marks.get(v) {
            Some(Mark::Done) => return None,
            Some(Mark::Open) => {
                let from = stack.iter().position(|s| s == v).unwrap();
                return Some(stack[from..].to_vec());
            }
            None => {}
        }
        marks.insert(v.to_string(), Mark::Open);
        stack.push(v.to_string());
        for w in edges.get(v).into_iter().flat_map(|e| e.keys()) {
            if let Some(circle) = visit(w, edges, marks, stack) {
                return Some(circle);
            }
        }
        stack.pop();
        marks.insert(v.to_string(), Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    for v in edges.keys() {
        if let Some(circle) = visit(v, edges, &mut marks, &mut Vec::new()) {
            return Some(circle);
        }
    }
    None
}

#[test]
fn no_crate_has_an_import_circle_between_its_modules() {
    for (dir, package, _) in CRATES {
        let edges = top_level_imports(&workspace().join(dir));
        if let Some(circle) = find_circle(&edges) {
            let mut arrows = Vec::new();
            for (k, a) in circle.iter().enumerate() {
                let b = &circle[(k + 1) % circle.len()];
                let at = &edges[a][b];
                arrows.push(format!("{a} -> {b} ({}:{})", at.file.display(), at.line));
            }
            panic!("{package}: import circle:\n  {}", arrows.join("\n  "));
        }
    }
    // The checker sees imports at all: infra's store reads core-free modules of its own.
    let infra = top_level_imports(&workspace().join("infra"));
    assert!(infra["store"].contains_key("cache"), "{infra:?}");
}

/// The spaCy port is Rust all the way down: spaCy is only the oracle of the `bench/`
/// scripts.
#[test]
fn the_spacy_port_runs_no_python() {
    let manifest = std::fs::read_to_string(workspace().join("nlp/Cargo.toml")).unwrap();
    for (table, names) in dependency_tables(&manifest) {
        for name in names {
            assert!(
                !name.contains("pyo3") && !name.contains("python") && !name.contains("cpython"),
                "nlp/Cargo.toml [{table}]: {name} binds Python"
            );
        }
    }
    let mut files = Vec::new();
    collect_rs(&workspace().join("nlp/src"), &mut files);
    assert!(files.len() > 10, "{files:?}");
    for f in files {
        let code = code_only(&std::fs::read_to_string(&f).unwrap());
        for call in ["process::Command", "Command::new", "pyo3::"] {
            assert!(
                !code.contains(call),
                "{}: {call}: the port must not call out to Python",
                f.display()
            );
        }
    }
}

#[test]
fn the_checker_finds_a_circle_and_reads_past_tests_strings_and_comments() {
    let src = "use crate::a::X; // crate::c::Y\nlet s = \"crate::d\";\n#[cfg(test)]\nmod tests { use crate::e::Z; }\nfn f() { super::b::g() }\n";
    let (code, test_files) = without_test_items(&code_only(src));
    assert!(test_files.is_empty());
    let names: Vec<String> = code
        .lines()
        .flat_map(|l| imported_tops(l, &["m".to_string()]))
        .collect();
    assert_eq!(names, ["a", "b"]);
    let (_, test_files) = without_test_items("#[cfg(test)]\nmod tests;\n");
    assert_eq!(test_files, ["tests"]);

    let import = |m: &str| {
        (
            m.to_string(),
            Import {
                file: PathBuf::from("x.rs"),
                line: 1,
            },
        )
    };
    let mut edges: BTreeMap<String, BTreeMap<String, Import>> = BTreeMap::new();
    edges.insert("a".into(), [import("b")].into());
    edges.insert("b".into(), [import("c")].into());
    assert_eq!(find_circle(&edges), None);
    edges.insert("c".into(), [import("a")].into());
    assert_eq!(
        find_circle(&edges),
        Some(vec!["a".into(), "b".into(), "c".into()])
    );
}
