//! ARCHITECTURE.md is the map of the code, so it names nothing the code does not have: every path
//! it writes in backticks exists, every test it names is a `fn` of the repository, every
//! `Type::name` is defined, a name written right after a file is in that file, every other name is
//! in the sources, and the page stays under 200 lines. A map that names what is gone fails here
//! instead of misleading a reader. It reads files only: no Worker is needed.

use handoff_it::repo_top;
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// The page has fewer lines than this: a map is read whole.
const MAP_LINES_MAX: usize = 200;
/// What a file path the map names may end in.
const EXTENSIONS: [&str; 7] = [".rs", ".md", ".mjs", ".toml", ".json", ".yaml", ".ts"];
/// Where a test the map names may be defined.
const TEST_DIRS: [&str; 10] = ["core", "api", "src", "test", "cli", "notify", "bench", "tools", "clients", "console"];
/// The files whose text a name may come from (and `scripts/`, whose files have no extension).
const SOURCE_EXTENSIONS: [&str; 10] = ["rs", "ts", "mjs", "js", "toml", "yaml", "json", "py", "sh", "lock"];
/// Folders that hold no source of the repository: build output, installed packages, dot-folders.
const SKIPPED: [&str; 4] = ["target", "node_modules", "build", "dist"];
/// This file, whose tests name what is not there on purpose.
const THIS_FILE: &str = "test/tests/architecture.rs";

/// Every source file of the repository: its path from the top, and its text.
struct Sources {
    files: Vec<(String, String)>,
    /// Every identifier-shaped word in any of them.
    words: HashSet<String>,
}

impl Sources {
    fn load(top: &Path) -> Sources {
        let mut paths = Vec::new();
        walk(top, &mut paths);
        let mut files = Vec::new();
        for path in paths {
            let Ok(text) = std::fs::read_to_string(&path) else { continue };
            let relative = path.strip_prefix(top).unwrap_or(&path).to_string_lossy().replace('\\', "/");
            if relative != THIS_FILE {
                files.push((relative, text));
            }
        }
        let words = files.iter().flat_map(|(_, text)| words_of(text)).map(str::to_string).collect();
        Sources { files, words }
    }

    fn rust(&self) -> impl Iterator<Item = &(String, String)> {
        self.files.iter().filter(|(path, _)| path.ends_with(".rs"))
    }

    fn text_of(&self, path: &str) -> Option<&str> {
        self.files.iter().find(|(p, _)| p == path).map(|(_, text)| text.as_str())
    }

    fn contains(&self, text: &str) -> bool {
        self.files.iter().any(|(_, t)| t.contains(text))
    }
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().to_string();
        if name.starts_with('.') || SKIPPED.contains(&name.as_str()) {
            continue;
        }
        if path.is_dir() {
            walk(&path, out);
        } else {
            let in_scripts = path.parent().and_then(Path::file_name).is_some_and(|p| p == "scripts");
            let source = path.extension().and_then(|e| e.to_str()).is_some_and(|e| SOURCE_EXTENSIONS.contains(&e));
            if source || in_scripts {
                out.push(path);
            }
        }
    }
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

fn words_of(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !is_ident_char(c)).filter(|w| !w.is_empty())
}

/// Whether `word` occurs in `text` as a whole identifier.
fn has_word(text: &str, word: &str) -> bool {
    text.match_indices(word).any(|(at, _)| {
        let before = text[..at].chars().next_back().is_none_or(|c| !is_ident_char(c));
        let after = text[at + word.len()..].chars().next().is_none_or(|c| !is_ident_char(c));
        before && after
    })
}

/// The backticked spans of a line with where each starts and ends, or `None` when a span is
/// left open at the end of the line.
fn spans(line: &str) -> Option<Vec<(usize, usize, &str)>> {
    let ticks: Vec<usize> = line.match_indices('`').map(|(i, _)| i).collect();
    if ticks.len() % 2 == 1 {
        return None;
    }
    Some(ticks.chunks(2).map(|pair| (pair[0], pair[1] + 1, &line[pair[0] + 1..pair[1]])).collect())
}

/// `a/{b,c}.rs` as `a/b.rs` and `a/c.rs`.
fn expand(span: &str) -> Vec<String> {
    let (Some(open), Some(close)) = (span.find('{'), span.find('}')) else {
        return vec![span.to_string()];
    };
    span[open + 1..close].split(',').map(|part| format!("{}{part}{}", &span[..open], &span[close + 1..])).collect()
}

/// Whether a span names a file or folder of the repository (not a route, a type or a package).
fn is_path(span: &str) -> bool {
    let plain = span.chars().all(|c| c.is_ascii_alphanumeric() || "._/{},-".contains(c));
    let shaped = span.contains('/') || EXTENSIONS.iter().any(|e| span.ends_with(e));
    plain && shaped && !span.starts_with('/') && !span.starts_with('.') && !span.contains("//")
}

/// Whether a span is a test's name: a snake_case phrase with at least four underscores.
fn is_test_name(span: &str) -> bool {
    span.matches('_').count() >= 4 && span.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// An identifier, or a macro's name (`listed_enum!`).
fn is_ident(span: &str) -> bool {
    let name = span.strip_suffix('!').unwrap_or(span);
    name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_') && name.chars().all(is_ident_char)
}

/// A path of identifiers: `Session::confirm`, `handoff_core::notice::owed_chain`.
fn is_item_path(span: &str) -> bool {
    span.contains("::") && span.split("::").all(|s| !s.is_empty() && s.chars().all(is_ident_char))
}

/// Anything else written as code (a crate, a code, a header, a command), but an elided route
/// (`GET …/watch`) and a number.
fn is_literal(span: &str) -> bool {
    !span.contains('…') && !span.chars().all(|c| c.is_ascii_digit())
}

/// Whether a line of Rust defines `name`: a function, a constant, a type, a module, a field or
/// an enum variant.
fn defines(line: &str, name: &str) -> bool {
    let line = line.trim_start();
    let line = line
        .strip_prefix("pub(crate) ")
        .or_else(|| line.strip_prefix("pub(super) "))
        .or_else(|| line.strip_prefix("pub "))
        .unwrap_or(line);
    let keyword = ["fn ", "const ", "static ", "struct ", "enum ", "trait ", "type ", "mod ", "const fn ", "async fn "]
        .iter()
        .any(|k| {
            line.strip_prefix(k).is_some_and(|rest| {
                rest.starts_with(name) && rest[name.len()..].chars().next().is_none_or(|c| !is_ident_char(c))
            })
        });
    let member = line
        .strip_prefix(name)
        .is_some_and(|rest| rest.is_empty() || [" {", "(", ",", ":", " ="].iter().any(|p| rest.starts_with(p)));
    keyword || member
}

/// Whether `parent::name` is defined: written so somewhere, or `name` defined in a file that is
/// module `parent` or that declares or implements a type `parent`.
fn item_exists(sources: &Sources, span: &str) -> bool {
    if sources.contains(span) {
        return true;
    }
    let parts: Vec<&str> = span.split("::").collect();
    let (parent, name) = (parts[parts.len() - 2], parts[parts.len() - 1]);
    sources.rust().any(|(path, text)| {
        let module = path.ends_with(&format!("/{parent}.rs")) || path.ends_with(&format!("/{parent}/mod.rs"));
        let owner = module
            || text.lines().any(|l| {
                let l = l.trim_start();
                let declares = ["struct ", "enum ", "trait "]
                    .iter()
                    .any(|k| l.contains(&format!("{k}{parent}")) && has_word(l, parent));
                declares || (l.starts_with("impl") && has_word(l, parent))
            });
        owner && text.lines().any(|l| defines(l, name))
    })
}

/// Whether a Rust file under the test folders defines `fn name`.
fn test_exists(sources: &Sources, name: &str) -> bool {
    let under = |path: &str| TEST_DIRS.iter().any(|d| path.starts_with(&format!("{d}/")));
    sources
        .rust()
        .filter(|(path, _)| under(path))
        .any(|(_, text)| text.lines().any(|l| defines(l, name) && l.contains("fn ")))
}

/// What the map names that the repository does not have, and how many names of each kind it
/// checked (paths, tests, items).
fn problems(map: &str, top: &Path, sources: &Sources) -> (Vec<String>, [usize; 3]) {
    let mut found = Vec::new();
    let mut checked = [0; 3];
    let lines: Vec<&str> = map.lines().collect();
    if lines.len() >= MAP_LINES_MAX {
        found.push(format!("the map has {} lines: keep it under {MAP_LINES_MAX}", lines.len()));
    }
    let mut fenced = false;
    // A bare file name is in the folder of the last path named before it in its paragraph.
    let mut folder = String::new();
    for (i, line) in lines.iter().enumerate() {
        let n = i + 1;
        if line.starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        if line.trim().is_empty() || line.starts_with('#') || line.starts_with("- ") {
            folder.clear();
        }
        let Some(spans) = spans(line) else {
            found.push(format!("line {n}: a backtick span is not closed on its line"));
            continue;
        };
        // The spans already checked as the name of the file before them.
        let mut paired = HashSet::new();
        for (k, &(_, end, span)) in spans.iter().enumerate() {
            let span = span.trim();
            if span.is_empty() || paired.contains(&k) {
                continue;
            }
            if is_path(span) {
                for path in expand(span) {
                    checked[0] += 1;
                    let full = if path.contains('/') || top.join(&path).exists() {
                        path.clone()
                    } else {
                        format!("{folder}{path}")
                    };
                    if !top.join(&full).exists() {
                        found.push(format!("line {n}: `{full}` does not exist"));
                        continue;
                    }
                    folder = if full.ends_with('/') {
                        full.clone()
                    } else {
                        full.rfind('/').map_or(String::new(), |s| full[..=s].to_string())
                    };
                    // `file` `Name`: the name is in that file.
                    let Some(&(start, _, next)) = spans.get(k + 1) else { continue };
                    let adjacent = line[end..start].trim().is_empty();
                    let named =
                        if is_item_path(next) { next.rsplit("::").next() } else { is_ident(next).then_some(next) };
                    if let (true, Some(name), Some(text)) = (adjacent, named, sources.text_of(&full)) {
                        paired.insert(k + 1);
                        checked[2] += 1;
                        if !has_word(text, name.trim_end_matches('!')) {
                            found.push(format!("line {n}: `{next}` is not in `{full}`"));
                        }
                    }
                }
            } else if is_test_name(span) {
                checked[1] += 1;
                if !test_exists(sources, span) {
                    found.push(format!(
                        "line {n}: no `fn {span}` under {}",
                        TEST_DIRS.map(|d| format!("{d}/")).join(", ")
                    ));
                }
            } else if is_item_path(span) {
                checked[2] += 1;
                if !item_exists(sources, span) {
                    found.push(format!("line {n}: `{span}` is defined nowhere in the sources"));
                }
            } else if is_ident(span) {
                checked[2] += 1;
                if !sources.words.contains(span.trim_end_matches('!')) {
                    found.push(format!("line {n}: `{span}` is in no source file"));
                }
            } else if is_literal(span) {
                checked[2] += 1;
                if !sources.contains(span) {
                    found.push(format!("line {n}: `{span}` is in no source file"));
                }
            }
        }
    }
    (found, checked)
}

#[test]
fn every_path_test_and_name_the_map_gives_is_in_the_repository_and_the_map_is_under_200_lines() {
    let top = repo_top();
    let map = std::fs::read_to_string(top.join("ARCHITECTURE.md")).expect("ARCHITECTURE.md at the top");
    let sources = Sources::load(&top);
    let (found, [paths, tests, items]) = problems(&map, &top, &sources);
    assert!(found.is_empty(), "ARCHITECTURE.md names what is not there:\n{}", found.join("\n"));
    assert!(
        paths > 60 && tests > 30 && items > 60,
        "the map's names were not found ({paths} paths, {tests} tests, {items} names)"
    );
}

#[test]
fn a_map_that_names_what_is_gone_fails_naming_each_missing_item() {
    let top = repo_top();
    let sources = Sources::load(&top);
    let wrong = [
        ("`core/src/sessions.rs`", "`core/src/sessions.rs` does not exist"),
        ("`core/src/owners/`", "`core/src/owners/` does not exist"),
        ("`src/handoff_object/store.rs` then `stores.rs`", "`src/handoff_object/stores.rs` does not exist"),
        ("`every_read_is_a_plan_with_nothing_to_wait_for`", "no `fn every_read_is_a_plan_with_nothing_to_wait_for`"),
        ("`Decider::confirms`", "`Decider::confirms` is defined nowhere"),
        ("`notice::owed_chains`", "`notice::owed_chains` is defined nowhere"),
        ("`core/src/decider.rs` `Deliverance`", "`Deliverance` is not in `core/src/decider.rs`"),
        ("`PROTOCOL_VERSIONS`", "`PROTOCOL_VERSIONS` is in no source file"),
        ("an open `span", "a backtick span is not closed"),
        ("`handoff-kore`", "`handoff-kore` is in no source file"),
    ];
    for (text, problem) in wrong {
        let (found, _) = problems(&format!("# Map\n\n{text}\n"), &top, &sources);
        assert!(found.len() == 1 && found[0].contains(problem), "{text}: {found:?}");
    }
    let right = "`core/src/decider.rs` `RowSend`, `Decider::confirm`, `Caller::reaches`, `Record::incarnation`, \
                 `Op::Change`, `listed_enum!`, `src/owner_index/send.rs` and `store.rs`, `core/src/{turn,work}.rs`, \
                 `every_read_is_a_plan_with_nothing_to_await`, `GET …/watch`, `503`, `@handoff/client`, `store.unavailable`";
    let (found, checked) = problems(&format!("# Map\n\n{right}\n"), &top, &sources);
    assert!(found.is_empty(), "{found:?}");
    assert_eq!(checked, [5, 1, 8], "paths, tests and names checked");
    let long = "line\n".repeat(MAP_LINES_MAX);
    let (found, _) = problems(&long, &top, &sources);
    assert!(found.iter().any(|p| p.contains("keep it under 200")), "{found:?}");
}

#[test]
fn a_path_is_told_from_a_route_a_type_a_package_and_a_test() {
    assert!(is_path("core/src/decider.rs") && is_path("cli/") && is_path("ARCHITECTURE.md") && is_path("src/{a,b}.rs"));
    for not in
        ["/v1/handoffs", "GET …/watch", "Action::sender", "{\"handoff\": …}", "HANDOFF_ENV", ".wasm", "@handoff/client"]
    {
        assert!(!is_path(not), "{not}");
    }
    assert_eq!(expand("src/x/{a,b}.rs"), ["src/x/a.rs", "src/x/b.rs"]);
    assert!(is_test_name("every_read_is_a_plan_with_nothing_to_await") && is_test_name("the_outbox_keeps_its_rules"));
    assert!(!is_test_name("STORED_VALUE_BYTES_MAX") && !is_test_name("next_read") && !is_test_name("a_b_c_d"));
    assert!(
        is_item_path("handoff_core::notice::owed_chain")
            && !is_item_path("a::")
            && !is_item_path("IndexAsk::Put {row}")
    );
}
