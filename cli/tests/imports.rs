//! The CLI's files import in one direction: no two files of `cli/src` name each other's items,
//! and no file of one command's module (`launch`, `serve`, `mcp`) names an item of another's:
//! what they share is the machine side's vocabulary, `cli/src/machine`.
//! Read from the sources as text (no Worker needed): a file names another through `crate::`,
//! `super::`, `self::` or a child module's name, in a `use` or in a path; a re-export counts.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

#[test]
fn no_two_files_of_the_cli_import_each_other() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let files = sources(&root, &root);
    let modules: BTreeMap<Vec<String>, String> =
        files.keys().filter(|f| *f != "main.rs").map(|f| (module_of(f), f.clone())).collect();
    let mut edges = BTreeSet::new();
    for (file, text) in &files {
        for target in named_files(file, text, &modules) {
            if target != *file && !(file == "main.rs" && target == "lib.rs") {
                edges.insert((file.clone(), target));
            }
        }
    }
    let pairs: BTreeSet<(String, String)> =
        edges.iter().filter(|(a, b)| a < b && edges.contains(&(b.clone(), a.clone()))).cloned().collect();
    assert!(pairs.is_empty(), "these files of cli/src import each other: {pairs:?}");
    assert!(edges.len() > 50, "the reader found the imports: {}", edges.len());
}

/// The modules of the commands that run a harness or serve one; `command/` only dispatches to
/// them.
const COMMANDS: [&str; 3] = ["launch", "serve", "mcp"];

/// The command module `file` belongs to, if any.
fn command_of(file: &str) -> Option<&'static str> {
    let first = module_of(file).into_iter().next()?;
    COMMANDS.into_iter().find(|c| *c == first)
}

/// The imports of `file` that reach into another command's module.
fn crossings(file: &str, targets: &BTreeSet<String>) -> Vec<String> {
    let Some(from) = command_of(file) else { return Vec::new() };
    targets.iter().filter(|t| command_of(t).is_some_and(|to| to != from)).cloned().collect()
}

#[test]
fn no_file_of_one_commands_module_imports_from_another_commands_module() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let files = sources(&root, &root);
    let modules: BTreeMap<Vec<String>, String> =
        files.keys().filter(|f| *f != "main.rs").map(|f| (module_of(f), f.clone())).collect();
    let mut crossing = Vec::new();
    for (file, text) in &files {
        for target in crossings(file, &named_files(file, text, &modules)) {
            crossing.push(format!("{file} -> {target}"));
        }
    }
    assert!(crossing.is_empty(), "these files reach into another command's module: {crossing:?}");
    assert!(files.keys().any(|f| f.starts_with("machine")), "the shared vocabulary is there to import instead");
}

#[test]
fn the_reader_catches_an_import_from_one_commands_module_into_anothers() {
    let modules: BTreeMap<Vec<String>, String> = [
        (vec!["launch".to_string()], "launch.rs".to_string()),
        (vec!["launch".into(), "run".into()], "launch/run.rs".into()),
        (vec!["serve".into()], "serve/mod.rs".into()),
        (vec!["serve".into(), "state".into()], "serve/state.rs".into()),
        (vec!["mcp".into()], "mcp.rs".into()),
        (vec!["machine".into(), "paths".into()], "machine/paths.rs".into()),
    ]
    .into();
    let text = "use super::*;\nfn f() { let _lock = crate::serve::state::lock(&d, &id); crate::mcp::served_since(&d, &id); }\n";
    let named = named_files("launch/run.rs", text, &modules);
    assert_eq!(crossings("launch/run.rs", &named), ["mcp.rs".to_string(), "serve/state.rs".to_string()]);
    let shared = named_files("launch/run.rs", "use crate::machine::paths::{lock, served_since};\n", &modules);
    assert_eq!(crossings("launch/run.rs", &shared), Vec::<String>::new(), "the machine module is shared");
    let within = named_files("serve/mod.rs", "pub mod state;\nuse state::load;\n", &modules);
    assert_eq!(crossings("serve/mod.rs", &within), Vec::<String>::new(), "a command's own files are its own");
}

#[test]
fn the_reader_sees_a_pair_that_imports_each_other() {
    let modules: BTreeMap<Vec<String>, String> =
        [(vec!["a".to_string()], "a.rs".to_string()), (vec!["a".into(), "b".into()], "a/b.rs".into())].into();
    assert_eq!(named_files("a.rs", "mod b;\nuse b::{self, Thing};\n", &modules), ["a/b.rs".to_string()].into());
    assert_eq!(named_files("a/b.rs", "fn f() { super::g() }\n", &modules), ["a.rs".to_string()].into());
    assert_eq!(
        named_files("a/b.rs", "// super::g()\n#[cfg(test)]\nmod tests {\n    use super::*;\n}\n", &modules),
        BTreeSet::new()
    );
}

/// Every `.rs` file under `dir`, by its path from `root`.
fn sources(root: &Path, dir: &Path) -> BTreeMap<String, String> {
    let mut files = BTreeMap::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(sources(root, &path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            let name = path.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/");
            files.insert(name, std::fs::read_to_string(&path).unwrap());
        }
    }
    files
}

/// `hook/install.rs` is `hook::install`; `serve/mod.rs`, `serve`; `lib.rs`, the crate.
fn module_of(file: &str) -> Vec<String> {
    if file == "lib.rs" || file == "main.rs" {
        return Vec::new();
    }
    let mut parts: Vec<String> = file.trim_end_matches(".rs").split('/').map(str::to_string).collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

/// The files whose items `text`, the file `file`, names (its own inline tests left out: their
/// `super::` is the file itself).
fn named_files(file: &str, text: &str, modules: &BTreeMap<Vec<String>, String>) -> BTreeSet<String> {
    let me = module_of(file);
    let text = match text.find("mod tests {").and_then(|at| text[..at].rfind("#[cfg(")) {
        Some(cut) => &text[..cut],
        None => text,
    };
    let code: String = text.lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n");
    let children: BTreeSet<&str> = words(&code).windows(2).filter(|w| w[0] == "mod").map(|w| w[1]).collect();
    let mut paths = Vec::new();
    for statement in code.split(';') {
        let statement = statement.trim_start();
        let tree = statement.strip_prefix("pub use ").or_else(|| statement.strip_prefix("use "));
        match tree {
            Some(tree) => paths.extend(expand(tree)),
            None => paths.extend(
                statement
                    .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                    .filter(|p| p.contains("::"))
                    .map(str::to_string),
            ),
        }
    }
    let mut named = BTreeSet::new();
    for path in paths {
        let segments: Vec<&str> = path.split("::").map(str::trim).filter(|s| !s.is_empty()).collect();
        let Some((head, rest)) = segments.split_first() else { continue };
        let rest: Vec<String> = rest.iter().map(|s| s.to_string()).collect();
        let full = match *head {
            "crate" | "handoff_cli" => rest,
            "super" => me[..me.len().saturating_sub(1)].iter().cloned().chain(rest).collect(),
            "self" => me.iter().cloned().chain(rest).collect(),
            child if children.contains(child) => {
                me.iter().cloned().chain(std::iter::once(child.to_string())).chain(rest).collect()
            }
            _ => continue,
        };
        // The longest prefix that is a file: `crate::hook::install::Harness` is hook/install.rs.
        if let Some(target) = (0..=full.len()).rev().find_map(|n| modules.get(&full[..n])) {
            named.insert(target.clone());
        }
    }
    named
}

/// `a::{b, c::{d, self}}` as `a::b`, `a::c::d`, `a::c`.
fn expand(tree: &str) -> Vec<String> {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        return vec![tree.split(" as ").next().unwrap_or("").trim().to_string()];
    };
    let (prefix, inner) = (&tree[..open], &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())]);
    let (mut parts, mut depth, mut start) = (Vec::new(), 0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    let expanded = parts.into_iter().filter(|p| !p.trim().is_empty()).flat_map(expand);
    expanded
        .map(|p| if p == "self" { prefix.trim_end_matches("::").to_string() } else { format!("{prefix}{p}") })
        .collect()
}

fn words(code: &str) -> Vec<&str> {
    code.split(|c: char| !(c.is_alphanumeric() || c == '_')).filter(|w| !w.is_empty()).collect()
}
