//! The daemon's pure rules: its workspaces and where a session runs, which sessions start and
//! which wait under the cap, a session's worktree, the model lists it reports, its unit, its
//! follow of the list, and which refusal is a revocation.
//! No I/O here; `super` carries them out.

use handoff_core::ids::check_name;
use handoff_core::limits::{
    MACHINE_MODELS_PER_RUNTIME_MAX, MACHINE_WORKSPACES_MAX, MODEL_BYTES_MAX, WORKSPACE_BYTES_MAX,
};
use std::path::{Path, PathBuf};

/// The aliases Claude Code 2.1.328 takes for `--model` that the API's name rule admits: its
/// `--help` names `fable`, `opus` and `sonnet`, its model-configuration page `default`,
/// `haiku` and `opusplan`, and its own alias list adds `best` (`sonnet[1m]`, `opus[1m]` and
/// `fable[1m]` carry brackets, which no reported name may).
pub const CLAUDE_CODE_ALIASES: [&str; 7] = ["default", "best", "sonnet", "opus", "haiku", "fable", "opusplan"];

/// The machine's workspaces: name and folder, the default first.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Workspaces {
    pub list: Vec<(String, PathBuf)>,
}

/// One `NAME=PATH`: a name of `[A-Za-z0-9._:-]` within the limit and a folder, made absolute
/// against `cwd`.
pub fn parse_workspace(word: &str, cwd: &Path) -> Result<(String, PathBuf), String> {
    let Some((name, path)) = word.split_once('=') else {
        return Err(format!("{word}: a workspace is NAME=PATH"));
    };
    let (name, path) = (name.trim(), path.trim());
    check_name("workspace", name, WORKSPACE_BYTES_MAX).map_err(|r| format!("{word}: {}", r.message))?;
    if path.is_empty() {
        return Err(format!("{word}: a workspace names its folder"));
    }
    Ok((name.to_string(), cwd.join(path)))
}

/// A workspaces file: one `NAME=PATH` a line; blank lines and lines starting with `#` are
/// skipped; a relative path is read against the file's folder.
pub fn parse_workspaces_file(text: &str, dir: &Path) -> Result<Vec<(String, PathBuf)>, String> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .map(|(n, l)| parse_workspace(l, dir).map_err(|e| format!("line {}: {e}", n + 1)))
        .collect()
}

impl Workspaces {
    /// The command line's, then the file's: at least one, each name once, within the limit.
    pub fn of(given: Vec<(String, PathBuf)>) -> Result<Workspaces, String> {
        if given.is_empty() {
            return Err(
                "name a workspace: --workspace NAME=PATH (the first is the default) or --workspaces-file PATH".into()
            );
        }
        if given.len() > MACHINE_WORKSPACES_MAX {
            return Err(format!("at most {MACHINE_WORKSPACES_MAX} workspaces (MACHINE_WORKSPACES_MAX)"));
        }
        for (i, (name, _)) in given.iter().enumerate() {
            if given[..i].iter().any(|(n, _)| n == name) {
                return Err(format!("the workspace {name} is named twice"));
            }
        }
        Ok(Workspaces { list: given })
    }

    pub fn names(&self) -> Vec<String> {
        self.list.iter().map(|(n, _)| n.clone()).collect()
    }

    /// Where a session runs: the workspace its record names, else the default. One this
    /// machine does not have is never guessed: the reason, for the owner.
    pub fn place(&self, asked: Option<&str>) -> Result<(&str, &Path), String> {
        let found = match asked {
            None => self.list.first(),
            Some(name) => self.list.iter().find(|(n, _)| n == name),
        };
        found.map(|(n, p)| (n.as_str(), p.as_path())).ok_or_else(|| {
            format!(
                "this machine has no workspace {}: it serves {}",
                asked.unwrap_or_default(),
                self.names().join(", ")
            )
        })
    }
}

/// How the daemon stands with a listed hand-off, for [`to_examine`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Met {
    /// Never looked at since this daemon started.
    Not,
    /// Its serve ended while it may be open; `due` once its backoff is over.
    Again { due: bool },
    /// Ready or running: nothing to look at.
    Held,
}

/// Which listed hand-offs (newest first, as the service lists them) to look at now, oldest
/// first: those never met and those due again, never one done with (closed, erased, refused).
/// Only what the credential lists is ever taken: a hand-off for another machine never is.
pub fn to_examine(listed_newest_first: &[String], finished: &[String], met: impl Fn(&str) -> Met) -> Vec<String> {
    listed_newest_first
        .iter()
        .rev()
        .filter(|id| !finished.contains(id))
        .filter(|id| matches!(met(id), Met::Not | Met::Again { due: true }))
        .cloned()
        .collect()
}

/// What becomes of each session not yet running, oldest first, with `running` already
/// running and `max` at once: the first free places start, the rest wait.
pub fn admit<'a>(ready_oldest_first: &[&'a str], running: usize, max: usize) -> (Vec<&'a str>, Vec<&'a str>) {
    let free = max.saturating_sub(running).min(ready_oldest_first.len());
    (ready_oldest_first[..free].to_vec(), ready_oldest_first[free..].to_vec())
}

/// The note a waiting session's timeline carries, once.
pub fn waiting_note(max: usize) -> String {
    format!(
        "Waiting: this machine runs at most {max} sessions at once (--max-sessions {max}), all busy; \
         this session starts when one ends."
    )
}

/// The branch of a session's worktree: named after the session's hand-off.
pub fn worktree_branch(id: &str) -> String {
    format!("handoff/{id}")
}

/// Where a session's worktree goes: beside the workspace, in `NAME.worktrees/ID`, so neither
/// tree holds the other.
pub fn worktree_dir(workspace: &Path, id: &str) -> PathBuf {
    let name = workspace.file_name().map_or_else(|| "workspace".into(), |n| n.to_string_lossy().into_owned());
    let parent = workspace.parent().unwrap_or(workspace);
    parent.join(format!("{name}.worktrees")).join(id)
}

/// A runtime's models as presence reports them: each a name the API takes, each once, in
/// the order given, at most [`MACHINE_MODELS_PER_RUNTIME_MAX`].
pub fn shape_models(models: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut kept: Vec<String> = Vec::new();
    for m in models {
        let m = m.trim().to_string();
        if kept.len() < MACHINE_MODELS_PER_RUNTIME_MAX
            && check_name("model", &m, MODEL_BYTES_MAX).is_ok()
            && !kept.contains(&m)
        {
            kept.push(m);
        }
    }
    kept
}

/// Whether `runtime` reaches the `model` a record names, among the `models` this machine
/// reported for it: one it does not reach is refused, never replaced (nothing is billed to
/// another model than the owner chose). A runtime whose list could not be read refuses none.
pub fn model_reachable(model: Option<&str>, runtime: &str, models: &[String]) -> Result<(), String> {
    match model {
        Some(m) if !models.is_empty() && !models.iter().any(|r| r == m) => {
            Err(format!("{runtime} does not reach the model {m} on this machine (it reaches: {})", models.join(", ")))
        }
        _ => Ok(()),
    }
}

/// Claude Code's models: its documented aliases, then the full names the person at the
/// machine allows (`--model-allow`).
pub fn claude_code_models(allowed: &[String]) -> Vec<String> {
    shape_models(CLAUDE_CODE_ALIASES.iter().map(|a| (*a).to_string()).chain(allowed.iter().cloned()))
}

/// The systemd unit `serve --machine --print-unit` prints: restarted on failure but not after
/// a revocation (exit `revoked_exit`), every process of its group ended on a stop.
pub fn unit(program: &str, args: &[String], state_dir: &str, revoked_exit: i32) -> String {
    let quoted: Vec<String> = args.iter().map(|a| systemd_word(a)).collect();
    format!(
        "[Unit]\n\
         Description=handoff serve --machine: every session created for this machine\n\
         After=network-online.target\n\
         Wants=network-online.target\n\n\
         [Service]\n\
         Type=simple\n\
         Environment=HANDOFF_STATE_DIR={state_dir}\n\
         ExecStart={program} serve --machine {}\n\
         Restart=on-failure\n\
         RestartSec=5\n\
         # Revoked by its owner: enrol again rather than restart.\n\
         RestartPreventExitStatus={revoked_exit}\n\
         KillMode=control-group\n\
         TimeoutStopSec=30\n\n\
         [Install]\n\
         WantedBy=default.target\n",
        quoted.join(" ")
    )
}

/// One word of `ExecStart`, quoted when it holds a space, a quote or a backslash.
fn systemd_word(word: &str) -> String {
    if word.chars().any(|c| c.is_whitespace() || c == '"' || c == '\\' || c == '\'') {
        format!("\"{}\"", word.replace('\\', "\\\\").replace('"', "\\\""))
    } else {
        word.replace('%', "%%")
    }
}

/// How often the list of hand-offs is read from a service that does not hold it.
pub const LIST_POLL_MS: u64 = 2_000;
/// The follower's backoff after a failed read of the list: from this…
pub const FOLLOW_BACKOFF_MS_BASE: u64 = 500;
/// …doubling up to this.
pub const FOLLOW_BACKOFF_MS_MAX: u64 = 30_000;

/// The follow of the list of hand-offs: held (`?after=V`) while the service answers a
/// version, else read every [`LIST_POLL_MS`]; after a failure, a backoff that doubles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Follow {
    after: Option<u64>,
    held: bool,
    backoff_ms: u64,
}

impl Default for Follow {
    fn default() -> Follow {
        Follow { after: None, held: true, backoff_ms: FOLLOW_BACKOFF_MS_BASE }
    }
}

impl Follow {
    /// The `after` of the next read: the version last listed, while the service holds reads.
    pub fn after(&self) -> Option<u64> {
        self.after.filter(|_| self.held)
    }

    /// The list was read, at `version` if the service gave one: how long to wait before the
    /// next read (none for a held one, which waited at the service).
    pub fn listed(&mut self, version: Option<u64>) -> u64 {
        self.backoff_ms = FOLLOW_BACKOFF_MS_BASE;
        self.after = version;
        if version.is_some() && self.held {
            0
        } else {
            LIST_POLL_MS
        }
    }

    /// A read failed (not for a revoked credential, which ends the follow), refused with
    /// `status` if the service answered: a 400 to `after` is a service that does not hold the
    /// list, read every [`LIST_POLL_MS`] from then on at once (`None`); any other failure waits
    /// its backoff, which doubles up to [`FOLLOW_BACKOFF_MS_MAX`].
    pub fn failed(&mut self, status: Option<u16>) -> Option<u64> {
        if self.after().is_some() && status == Some(400) {
            self.held = false;
            return None;
        }
        let wait_ms = self.backoff_ms;
        self.backoff_ms = (self.backoff_ms * 2).min(FOLLOW_BACKOFF_MS_MAX);
        Some(wait_ms)
    }
}

/// Whether a refusal of the machine's credential, with `status`, `code` and `message`, is for
/// good: a 401 is (the owner revoked the machine, or it was enrolled again elsewhere), and says
/// why; any other refusal (one hand-off's 403 or 404, a 429, a 5xx) is tried again.
pub fn revocation(status: u16, code: &str, message: &str) -> Option<String> {
    (status == 401).then(|| format!("{message} ({code})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_401_ends_the_daemon_as_a_revocation_and_says_why() {
        assert_eq!(
            revocation(401, "auth.revoked", "this machine was revoked"),
            Some("this machine was revoked (auth.revoked)".into())
        );
        assert!(revocation(401, "auth.invalid", "enrolled again").is_some());
        for status in [400, 403, 404, 409, 429, 500, 503] {
            assert_eq!(revocation(status, "any.code", "m"), None, "{status}");
        }
    }

    #[test]
    fn the_follow_is_held_after_the_version_listed_and_falls_back_to_reading_every_two_seconds() {
        let mut f = Follow::default();
        assert_eq!(f.after(), None, "the first read asks for the list at once");
        assert_eq!(f.listed(Some(7)), 0, "a held read waited at the service");
        assert_eq!(f.after(), Some(7));
        assert_eq!(f.listed(None), LIST_POLL_MS, "a service that answers no version is read every 2 s");
        assert_eq!(f.after(), None);
        f.listed(Some(8));
        assert_eq!(f.failed(Some(400)), None, "an older service's 400 to `after`: read again at once, without it");
        assert_eq!(f.after(), None, "and never held again");
        assert_eq!(f.listed(Some(9)), LIST_POLL_MS);
        assert_eq!(f.after(), None);
    }

    #[test]
    fn a_failed_read_waits_a_backoff_that_doubles_to_its_cap_and_a_read_resets_it() {
        let mut f = Follow::default();
        assert_eq!(f.failed(Some(400)), Some(FOLLOW_BACKOFF_MS_BASE), "a 400 with no `after` is no fallback");
        let waits: Vec<u64> = (0..10).filter_map(|_| f.failed(Some(429))).collect();
        assert_eq!(waits[0], FOLLOW_BACKOFF_MS_BASE * 2);
        assert!(waits.windows(2).all(|w| w[1] == (w[0] * 2).min(FOLLOW_BACKOFF_MS_MAX)), "{waits:?}");
        assert_eq!(waits.last(), Some(&FOLLOW_BACKOFF_MS_MAX));
        f.listed(Some(3));
        assert_eq!(f.failed(None), Some(FOLLOW_BACKOFF_MS_BASE), "a read resets it; a lost connection backs off too");
        assert_eq!(f.after(), Some(3), "and the follow stays held");
    }

    fn ws(pairs: &[(&str, &str)]) -> Workspaces {
        Workspaces::of(pairs.iter().map(|(n, p)| ((*n).to_string(), PathBuf::from(p))).collect()).unwrap()
    }

    #[test]
    fn a_workspace_is_name_equals_path_and_a_file_holds_one_a_line() {
        let cwd = Path::new("/home/u");
        assert_eq!(parse_workspace("api=src/api", cwd), Ok(("api".into(), PathBuf::from("/home/u/src/api"))));
        assert_eq!(parse_workspace("web=/srv/web", cwd).unwrap().1, PathBuf::from("/srv/web"));
        assert!(parse_workspace("api", cwd).unwrap_err().contains("NAME=PATH"));
        assert!(parse_workspace("a b=/x", cwd).is_err());
        assert!(parse_workspace("api=", cwd).is_err());
        let file = "# the machine's folders\napi=/srv/api\n\n  web = web\n";
        let read = parse_workspaces_file(file, Path::new("/etc/handoff")).unwrap();
        assert_eq!(read, vec![("api".into(), "/srv/api".into()), ("web".into(), "/etc/handoff/web".into())]);
        assert!(parse_workspaces_file("ok=/a\nbad\n", cwd).unwrap_err().starts_with("line 2"));
        assert!(Workspaces::of(Vec::new()).is_err());
        assert!(Workspaces::of(vec![("a".into(), "/1".into()), ("a".into(), "/2".into())]).is_err());
    }

    #[test]
    fn a_session_runs_in_the_workspace_its_record_names_else_the_first_and_an_unknown_one_is_never_guessed() {
        let w = ws(&[("api", "/srv/api"), ("web", "/srv/web")]);
        assert_eq!(w.place(None), Ok(("api", Path::new("/srv/api"))));
        assert_eq!(w.place(Some("web")), Ok(("web", Path::new("/srv/web"))));
        let why = w.place(Some("mobile")).unwrap_err();
        assert!(why.contains("no workspace mobile") && why.contains("api, web"), "{why}");
    }

    #[test]
    fn the_listed_hand_offs_never_met_or_due_again_are_looked_at_oldest_first_and_one_done_with_never() {
        let listed: Vec<String> =
            ["ho_new", "ho_again", "ho_later", "ho_held", "ho_done", "ho_old"].map(String::from).to_vec();
        let finished = vec!["ho_done".to_string()];
        let met = |id: &str| match id {
            "ho_again" => Met::Again { due: true },
            "ho_later" => Met::Again { due: false },
            "ho_held" => Met::Held,
            _ => Met::Not,
        };
        assert_eq!(to_examine(&listed, &finished, met), ["ho_old", "ho_again", "ho_new"]);
        assert!(to_examine(&[], &finished, met).is_empty(), "nothing listed for this machine: nothing taken");
    }

    #[test]
    fn past_the_cap_a_session_waits_and_the_oldest_start_first() {
        assert_eq!(admit(&["a", "b", "c"], 0, 2), (vec!["a", "b"], vec!["c"]));
        assert_eq!(admit(&["a", "b"], 2, 2), (vec![], vec!["a", "b"]));
        assert_eq!(admit(&["a"], 3, 2), (vec![], vec!["a"]), "over the cap already: nothing starts");
        assert_eq!(admit(&[], 0, 4), (vec![], vec![]));
        assert!(waiting_note(2).contains("--max-sessions 2"));
    }

    #[test]
    fn a_sessions_worktree_is_beside_its_workspace_on_a_branch_named_after_the_session() {
        assert_eq!(worktree_branch("ho_ab12"), "handoff/ho_ab12");
        assert_eq!(worktree_dir(Path::new("/srv/api"), "ho_ab12"), PathBuf::from("/srv/api.worktrees/ho_ab12"));
        let dir = worktree_dir(Path::new("/srv/api"), "ho_1");
        assert!(!dir.starts_with("/srv/api/"), "the worktree is not inside the workspace");
    }

    #[test]
    fn a_model_the_runtime_does_not_reach_is_refused_and_never_replaced() {
        let models = vec!["opus".to_string(), "sonnet".into()];
        assert_eq!(model_reachable(Some("opus"), "claude-code", &models), Ok(()));
        assert_eq!(model_reachable(None, "claude-code", &models), Ok(()), "none named: the harness's default");
        let why = model_reachable(Some("gpt-6"), "claude-code", &models).unwrap_err();
        assert!(why.contains("gpt-6") && why.contains("opus, sonnet"), "{why}");
        assert_eq!(model_reachable(Some("gpt-6"), "codex", &[]), Ok(()), "an unread list refuses none");
    }

    #[test]
    fn model_lists_keep_names_the_api_takes_once_each_within_the_cap() {
        let shaped = shape_models(["gpt-6".into(), "gpt-6".into(), "sonnet[1m]".into(), " o4 ".into(), String::new()]);
        assert_eq!(shaped, vec!["gpt-6".to_string(), "o4".into()]);
        assert_eq!(shape_models((0..100).map(|n| format!("m{n}"))).len(), MACHINE_MODELS_PER_RUNTIME_MAX);
        let claude = claude_code_models(&["claude-opus-4-1-20250805".into(), "opus".into()]);
        assert_eq!(&claude[..3], ["default", "best", "sonnet"]);
        assert_eq!(claude.last().map(String::as_str), Some("claude-opus-4-1-20250805"));
        assert_eq!(claude.iter().filter(|m| *m == "opus").count(), 1);
    }

    #[test]
    fn the_unit_restarts_on_failure_but_not_after_a_revocation_and_quotes_its_words() {
        let args = vec!["--workspace".to_string(), "api=/srv/my api".into(), "--max-sessions".into(), "4".into()];
        let u = unit("/usr/bin/handoff", &args, "/var/lib/handoff", 5);
        assert!(
            u.contains("ExecStart=/usr/bin/handoff serve --machine --workspace \"api=/srv/my api\" --max-sessions 4\n"),
            "{u}"
        );
        assert!(u.contains("Restart=on-failure") && u.contains("RestartPreventExitStatus=5"));
        assert!(u.contains("KillMode=control-group") && u.contains("Environment=HANDOFF_STATE_DIR=/var/lib/handoff"));
    }
}
