//! ARCHITECTURE.md is the map: every file and folder it names exists, and every test it names as
//! the one that checks an invariant is a test of the repository. A map that names what is gone
//! fails here instead of misleading a reader.

use std::path::{Path, PathBuf};

fn top() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The backticked spans of `text`, line by line.
fn spans(text: &str) -> Vec<(usize, Vec<String>)> {
    text.lines()
        .enumerate()
        .map(|(i, line)| (i + 1, line.split('`').skip(1).step_by(2).map(str::to_string).collect()))
        .collect()
}

/// `a/{b,c}.rs` as `a/b.rs` and `a/c.rs`.
fn expand(span: &str) -> Vec<String> {
    let (Some(open), Some(close)) = (span.find('{'), span.find('}')) else {
        return vec![span.to_string()];
    };
    span[open + 1..close].split(',').map(|part| format!("{}{part}{}", &span[..open], &span[close + 1..])).collect()
}

const EXTENSIONS: [&str; 8] = [".rs", ".md", ".json", ".yaml", ".toml", ".ts", ".py", ".txt"];

/// Whether a span names a file or folder of the repository (not a route, a type or a header).
fn is_path(span: &str) -> bool {
    let plain = span.chars().all(|c| c.is_ascii_alphanumeric() || "._/{},-".contains(c));
    let shaped = span.contains('/') || EXTENSIONS.iter().any(|e| span.ends_with(e));
    plain && shaped && !span.starts_with('/') && !span.starts_with('.') && !span.contains("//")
}

/// Whether a span is a test's name: a snake_case phrase of at least four words.
fn is_test_name(span: &str) -> bool {
    span.split('_').count() >= 4 && span.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

fn rust_sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if path.is_dir() {
            if !matches!(name.to_str(), Some("target" | "node_modules" | ".git" | "build")) {
                rust_sources(&path, out);
            }
        } else if path.extension().is_some_and(|e| e == "rs" || e == "py") {
            out.push(path);
        }
    }
}

#[test]
fn every_file_the_map_names_exists_and_every_test_it_names_is_one() {
    let top = top();
    let map = std::fs::read_to_string(top.join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let mut sources = Vec::new();
    rust_sources(&top, &mut sources);
    let code: String = sources.iter().filter_map(|p| std::fs::read_to_string(p).ok()).collect();
    let mut missing = Vec::new();
    let (mut files, mut tests) = (0, 0);
    // A bare file name is at the top, or in the folder of the last path named before it in its
    // section.
    let mut folder = String::new();
    let headings: Vec<bool> = map.lines().map(|l| l.starts_with('#')).collect();
    for (line, spans) in spans(&map) {
        if headings[line - 1] {
            folder.clear();
        }
        for span in spans {
            if is_path(&span) {
                for path in expand(&span) {
                    let bare_at_top = !path.contains('/') && top.join(&path).exists();
                    let full = if path.contains('/') || bare_at_top { path.clone() } else { format!("{folder}{path}") };
                    if let Some(slash) = full.rfind('/') {
                        folder = full[..=slash].to_string();
                    }
                    files += 1;
                    if !top.join(&full).exists() {
                        missing.push(format!("line {line}: {full}"));
                    }
                }
            } else if is_test_name(&span) {
                tests += 1;
                if !code.contains(&format!("fn {span}")) {
                    missing.push(format!("line {line}: no test named {span}"));
                }
            }
        }
    }
    assert!(files > 40 && tests > 10, "the map's names were not found ({files} files, {tests} tests)");
    assert!(missing.is_empty(), "ARCHITECTURE.md names what is not there:\n{}", missing.join("\n"));
}

#[test]
fn a_path_is_told_from_a_route_a_type_and_a_test() {
    assert!(is_path("core/src/session.rs") && is_path("cli/") && is_path("ARCHITECTURE.md") && is_path("src/{a,b}.rs"));
    for not in ["/v1/handoffs", "GET …/watch", "Action::sender", "{\"handoff\": …}", "HANDOFF_ENV", ".wasm"] {
        assert!(!is_path(not), "{not}");
    }
    assert_eq!(expand("src/x/{a,b}.rs"), ["src/x/a.rs", "src/x/b.rs"]);
    assert!(is_test_name("every_read_is_a_plan_with_nothing_to_await") && !is_test_name("STORED_VALUE_BYTES_MAX") && !is_test_name("next_read"));
}
