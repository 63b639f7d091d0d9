//! The workspace a served turn runs in is the model's to write, so nothing in it decides for the
//! owner:
//! - the harness's `PATH` keeps only absolute entries ([`harness_path`]), as program lookups do
//!   ([`crate::detect::find`]): an empty or relative entry would find a `claude` or a `python3`
//!   planted in the workspace;
//! - serve refuses to start when its own program (which the hooks and the MCP server run) or its
//!   state folder (the token file, the state record) lies inside the workspace
//!   ([`refuse_inside`]);
//! - the harness settings a workspace carries (its permission rules, hooks and `env`) are not
//!   applied to a served turn, and serve names them ([`own_settings`], [`settings_note`]).

use std::path::{Path, PathBuf};

/// The files of a project that set a harness's permissions, hooks, environment or approvals:
/// Claude Code's project and local settings, and Codex's project config.
pub const OWN_SETTINGS_FILES: [&str; 3] =
    [".claude/settings.json", ".claude/settings.local.json", ".codex/config.toml"];

/// The harness's `PATH`: `first` (this program's folder, so that `handoff` in the session is
/// this one), then the absolute entries of `path_var` in order; `None` when it cannot be joined.
pub fn harness_path(first: Option<&Path>, path_var: Option<&str>) -> Option<String> {
    let rest = path_var.map(|p| crate::detect::absolute_dirs(p).collect::<Vec<_>>()).unwrap_or_default();
    let first = first.filter(|dir| dir.is_absolute()).map(Path::to_path_buf);
    let joined = std::env::join_paths(first.into_iter().chain(rest)).ok()?;
    Some(joined.to_string_lossy().into_owned())
}

/// `path` made absolute and with its links resolved as far as it exists (a state folder not
/// made yet is read through its nearest existing parent).
fn resolved(path: &Path) -> PathBuf {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut existing = absolute.as_path();
    let mut rest: Vec<&std::ffi::OsStr> = Vec::new();
    loop {
        if let Ok(real) = existing.canonicalize() {
            return rest.iter().rev().fold(real, |p, part| p.join(part));
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name);
                existing = parent;
            }
            _ => return absolute,
        }
    }
}

/// Why serve must not run from `workspace`: `program` (this program, run by the hooks and the
/// MCP server outside any sandbox) or `state_dir` (the token file, the state record) lies
/// inside it, where the model can replace or rewrite it.
pub fn refuse_inside(workspace: &Path, program: &Path, state_dir: &Path) -> Result<(), String> {
    let root = resolved(workspace);
    let inside = |p: &Path| resolved(p).starts_with(&root);
    if inside(program) {
        return Err(format!(
            "this program ({}) lies inside the workspace ({}), where the model can replace it, and the hooks and the \
             MCP server run it outside any sandbox: install handoff outside the workspace (cargo install --path cli)",
            program.display(),
            root.display()
        ));
    }
    if inside(state_dir) {
        return Err(format!(
            "the state folder ({}) lies inside the workspace ({}), where the model can read the token file and \
             rewrite the state record: set HANDOFF_STATE_DIR to a folder outside it",
            state_dir.display(),
            root.display()
        ));
    }
    Ok(())
}

/// [`refuse_inside`] for this process: this program, `state_dir`, and the current folder (the
/// workspace serve runs its turns in).
pub fn serve_may_run(state_dir: &Path) -> Result<(), String> {
    let workspace = std::env::current_dir().map_err(|e| format!("the current folder: {e}"))?;
    let program = std::env::current_exe().map_err(|e| format!("where is this program? {e}"))?;
    refuse_inside(&workspace, &program, state_dir)
}

/// [`settings_note`] of the current folder, the workspace a served turn runs in.
pub fn served_turn_note() -> Option<String> {
    settings_note(&own_settings(&std::env::current_dir().ok()?))
}

/// The built-in tools a served Claude Code turn has: those 2.1.328 offers a print-mode session
/// by default (Bash and the other code-running ones among them, which `--restricted` takes away
/// unless they are named), the file and search tools, and the web's.
pub const CLAUDE_CODE_TOOLS: &str = "Agent,Bash,Edit,Glob,Grep,ListAgents,NotebookEdit,Read,ReportFindings,\
ScheduleWakeup,Skill,ToolSearch,WebFetch,WebSearch,Workflow,Write";

/// Claude Code's arguments for a served turn that leave every settings file unapplied: the
/// workspace's project and local settings and the user's `~/.claude/settings.json`, all of which
/// the model can write. 2.1.328's `--restricted` reads only managed settings and `--settings`
/// (serve's hooks); it also drops the project's CLAUDE.md, skills, commands and agents, confines
/// the file tools to the workspace, refuses `bypassPermissions`, and leaves a write to settings,
/// git or tool configuration to the person. `--tools` names [`CLAUDE_CODE_TOOLS`], so Bash stays
/// and the owner is asked for it; it takes the words after it, so a flag must follow.
pub const CLAUDE_CODE_RESTRICTED: [&str; 3] = ["--restricted", "--tools", CLAUDE_CODE_TOOLS];

/// Codex's `-c` settings that leave a workspace's own `.codex/` unapplied: its folder and its
/// repository's root named untrusted, which is what makes Codex 0.169.0 disable a project's
/// `.codex/config.toml` (its approval reviewer, MCP servers, `notify`, sandbox and environment
/// settings). The person's own `~/.codex/config.toml` trusting the workspace stays as it is.
pub fn codex_untrusted(workspace: &Path) -> [String; 2] {
    let root = resolved(workspace);
    let repository = root.ancestors().find(|dir| dir.join(".git").exists()).map(Path::to_path_buf);
    let mut untrusted = toml_edit::InlineTable::new();
    untrusted.insert("trust_level", "untrusted".into());
    let mut projects = toml_edit::InlineTable::new();
    for dir in std::iter::once(root.clone()).chain(repository) {
        projects.insert(dir.to_string_lossy().as_ref(), toml_edit::Value::InlineTable(untrusted.clone()));
    }
    ["-c".to_string(), format!("projects={}", toml_edit::Value::InlineTable(projects))]
}

/// The project settings files of `workspace` and of each folder above it up to its repository's
/// root (the folder holding `.git`), which a harness would otherwise read, in that order.
pub fn own_settings(workspace: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for dir in resolved(workspace).ancestors() {
        found.extend(OWN_SETTINGS_FILES.iter().map(|f| dir.join(f)).filter(|p| p.is_file()));
        if dir.join(".git").exists() {
            break;
        }
    }
    found
}

/// What serve's log and the turn's running report say of a workspace that carries its own
/// settings; `None` when it carries none.
pub fn settings_note(found: &[PathBuf]) -> Option<String> {
    if found.is_empty() {
        return None;
    }
    let names: Vec<String> = found.iter().map(|p| p.display().to_string()).collect();
    Some(format!(
        "The workspace carries its own harness settings, not applied to this served turn: {}. Their rules, hooks \
         and env are not the owner's: a person at the machine applies them deliberately (see docs/cloud-machine.md).",
        names.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("handoff-workspace-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn the_harness_path_keeps_only_absolute_entries_after_this_programs_folder() {
        let path = harness_path(Some(Path::new("/opt/handoff/bin")), Some(":/usr/bin:.:bin::/bin:"));
        assert_eq!(path.as_deref(), Some("/opt/handoff/bin:/usr/bin:/bin"));
        assert_eq!(harness_path(Some(Path::new("rel")), Some("/usr/bin")).as_deref(), Some("/usr/bin"));
        assert_eq!(harness_path(None, None).as_deref(), Some(""));
    }

    #[test]
    fn a_served_claude_code_turn_reads_no_settings_file_and_keeps_its_tools_bash_included() {
        assert_eq!(CLAUDE_CODE_RESTRICTED[..2], ["--restricted", "--tools"]);
        let tools: Vec<&str> = CLAUDE_CODE_RESTRICTED[2].split(',').collect();
        for kept in ["Bash", "Edit", "Write", "Read", "WebFetch", "Agent", "Skill"] {
            assert!(tools.contains(&kept), "{kept} in {tools:?}");
        }
        assert!(!tools.contains(&"default"), "\"default\" among names is read as a tool's name");
    }

    #[test]
    fn serve_refuses_to_run_from_inside_the_workspace_or_keep_its_state_there() {
        let work = temp("refuse");
        let outside = temp("refuse-outside");
        assert_eq!(refuse_inside(&work, &outside.join("handoff"), &outside.join("state")), Ok(()));
        let program = refuse_inside(&work, &work.join("target/debug/handoff"), &outside).unwrap_err();
        assert!(program.contains("this program") && program.contains("inside the workspace"), "{program}");
        let state = refuse_inside(&work, &outside.join("handoff"), &work.join(".state/not-made-yet")).unwrap_err();
        assert!(state.contains("the state folder") && state.contains("HANDOFF_STATE_DIR"), "{state}");
        let sneaky = work.join("sub/../.state");
        assert!(
            refuse_inside(&work, &outside.join("handoff"), &sneaky).is_err(),
            "a path through .. is read as it resolves"
        );
        #[cfg(unix)]
        {
            let link = outside.join("link-to-work");
            std::os::unix::fs::symlink(&work, &link).unwrap();
            assert!(refuse_inside(&work, &link.join("handoff"), &outside).is_err(), "a link is read as it resolves");
        }
        let _ = std::fs::remove_dir_all(&work);
        let _ = std::fs::remove_dir_all(&outside);
    }

    #[test]
    fn codex_is_told_the_workspace_and_its_repository_are_untrusted() {
        let root = temp("codex-trust");
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::create_dir_all(root.join("app \"x\"")).unwrap();
        let [flag, setting] = codex_untrusted(&root.join("app \"x\""));
        assert_eq!(flag, "-c");
        let value = setting.strip_prefix("projects=").unwrap();
        let doc: toml_edit::DocumentMut = format!("projects = {value}").parse().unwrap();
        let projects = doc["projects"].as_inline_table().unwrap();
        let real = resolved(&root);
        for dir in [real.join("app \"x\""), real.clone()] {
            let entry = projects.get(&dir.to_string_lossy()).and_then(|t| t.as_inline_table()).unwrap();
            assert_eq!(entry.get("trust_level").and_then(|v| v.as_str()), Some("untrusted"), "{setting}");
        }
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn a_workspace_carrying_its_own_settings_is_named_up_to_its_repository_root() {
        let root = temp("settings");
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::create_dir_all(root.join(".codex")).unwrap();
        std::fs::create_dir_all(root.join("app/.claude")).unwrap();
        std::fs::write(root.join(".codex/config.toml"), "approval_policy = \"never\"\n").unwrap();
        std::fs::write(root.join("app/.claude/settings.json"), r#"{"permissions": {"allow": ["Bash"]}}"#).unwrap();
        let found = own_settings(&root.join("app"));
        let names: Vec<String> =
            found.iter().map(|p| p.strip_prefix(resolved(&root)).unwrap().display().to_string()).collect();
        assert_eq!(names, ["app/.claude/settings.json", ".codex/config.toml"]);
        let note = settings_note(&found).unwrap();
        assert!(note.contains("app/.claude/settings.json") && note.contains("not applied"), "{note}");
        assert_eq!(settings_note(&[]), None);
        let bare = temp("settings-bare");
        std::fs::create_dir_all(bare.join(".git")).unwrap();
        assert!(own_settings(&bare).is_empty());
        let _ = std::fs::remove_dir_all(&root);
        let _ = std::fs::remove_dir_all(&bare);
    }
}
