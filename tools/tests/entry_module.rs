//! `src/entry.mjs`, the Worker's entry, has no logic (issues 28 and 40): it stays under
//! [`LINES_MAX`] lines, and outside its comments, imports and exports it is:
//! - the edge: one-expression arrow functions that read the request's method, URL and headers
//!   for `rs.Edge.route`, and carry out the step it answers by indexing a table of them, with a
//!   `fetch` that is one line of `run(route(…))`;
//! - class declarations whose constructor makes the Rust object and whose every method is a
//!   one-line forward to the Rust method of the same name with the same arguments.
//!
//! A branch, a loop, a `try`, a conditional, a comparison, or a method that does anything else
//! fails here.

use std::path::PathBuf;

/// The issue's bound on the JavaScript the runtime needs.
const LINES_MAX: usize = 60;

fn entry() -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../src/entry.mjs");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `name(args) { return this.rs.name(args); }`, the same name and arguments on both sides.
fn is_forward(line: &str) -> bool {
    let Some((head, body)) = line.split_once(") { return this.rs.") else {
        return false;
    };
    let Some((name, args)) = head.split_once('(') else {
        return false;
    };
    let plain = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    let args_ok = args.is_empty() || args.split(", ").all(plain);
    plain(name) && args_ok && body == format!("{name}({args}); }}")
}

/// What the JavaScript may never hold: a branch, a loop, a `try`, a conditional (`?`, `??`,
/// `&&`, `||`), a comparison, an assignment outside a declaration.
const DECIDES: &[&str] = &[
    "if ", "if(", "else", "for ", "for(", "while", "switch", "try", "throw", "?", "&&", "||", "==", "!=", "<=", ">=",
    " < ", " > ", "+=", "++",
];

/// A line of the edge: one declared arrow function of one expression, one entry of the steps
/// table, its brackets, or the default export's `fetch`, which runs the route's step.
fn is_edge(line: &str) -> bool {
    if DECIDES.iter().any(|d| line.contains(d)) {
        return false;
    }
    let arrow = |l: &str| l.starts_with('(') && l.contains(") => ");
    let declared = line.strip_prefix("const ").and_then(|rest| rest.split_once(" = ")).is_some_and(|(name, value)| {
        name.chars().all(|c| c.is_ascii_alphanumeric())
            && (arrow(value) || value == "[")
            && (value == "[" || value.ends_with(';'))
    });
    declared
        || (arrow(line) && line.ends_with("),"))
        || line == "];"
        || line == "export default {"
        || line == "fetch(request, env) { return run(route(request, env, request.headers), request, env, request.headers); },"
        || line == "};"
}

/// Every line that is not a comment, an import, an export of the default, a blank, a class's
/// opening or closing line, or its constructor, is a one-line forward.
fn problems(text: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if text.lines().count() >= LINES_MAX {
        problems.push(format!("{} lines; the bound is under {LINES_MAX}", text.lines().count()));
    }
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        let allowed = trimmed.is_empty()
            || trimmed.starts_with("// ")
            || trimmed == "//"
            || (trimmed.starts_with("import ") && trimmed.ends_with(';') && !trimmed.contains('('))
            || trimmed == r#"export { default } from "../index.js";"#
            || (trimmed.starts_with("export class ") && trimmed.ends_with(" extends DurableObject {"))
            || trimmed == "}"
            || (trimmed.starts_with("constructor(ctx, env) { super(ctx, env); this.rs = new rs.")
                && (trimmed.ends_with("(ctx, env); }") || trimmed.ends_with("(ctx, env, createHash); }")))
            || is_forward(trimmed)
            || is_edge(trimmed);
        if !allowed {
            problems.push(format!("line {}: {line}", i + 1));
        }
    }
    problems
}

#[test]
fn the_entry_module_is_under_its_line_bound_and_every_method_is_a_one_line_forward() {
    let text = entry();
    let problems = problems(&text);
    assert!(problems.is_empty(), "src/entry.mjs has logic or grew past its bound:\n{}", problems.join("\n"));
    for method in ["fetch(request)", "handle(ask, body)", "alarm()", "webSocketMessage(ws, message)"] {
        assert!(text.contains(&format!("  {method} {{ return this.rs.{method}; }}")), "{method} is not forwarded");
    }
}

#[test]
fn a_branch_a_guard_or_a_method_that_does_more_is_caught() {
    let ok = "export class A extends DurableObject {\n  fetch(request) { return this.rs.fetch(request); }\n}\n";
    assert!(problems(ok).is_empty(), "{:?}", problems(ok));
    for bad in [
        "  fetch(request) { if (x) return 1; return this.rs.fetch(request); }",
        "  fetch(request) { return this.rs.fetch(request) ?? 1; }",
        "  fetch(request) { return this.rs.handle(request); }",
        "  fetch(request) { return this.rs.fetch(request, 1); }",
        "  fetch(request) { try { return this.rs.fetch(request); } catch (e) { } }",
        "  if (broken) reset();",
        "  x = 1;",
        "import { x } from (y);",
        "const run = (step, env) => step[0] === 1 ? a : b;",
        "const run = (step, env) => step && steps[step[0]](step, env);",
        "const run = (step) => { if (step) return 1; };",
        "  (step) => respond(step[1]) ?? fallback,",
        "  fetch(request, env) { return run(route(request, env, request.headers), request, env, request.headers) || other; },",
        "  fetch(request, env) { console.log(request); return run(route(request, env, request.headers), request, env, request.headers); },",
        "let state = 1;",
    ] {
        let text = format!("export class A extends DurableObject {{\n{bad}\n}}\n");
        assert!(!problems(&text).is_empty(), "not caught: {bad}");
    }
    let long = "//\n".repeat(LINES_MAX);
    assert!(!problems(&long).is_empty(), "{LINES_MAX} lines were not caught");
}
