use super::*;
use serde_json::json;

const PROGRAM: &str = "/usr/local/bin/handoff";
const COMMAND: &str = "/usr/local/bin/handoff hook claude-code";

/// A user's settings.json: other settings, someone else's `Stop` hook, and a `PreCompact`
/// group with a matcher.
const SETTINGS: &str = r#"{
  "permissions": {"allow": ["Bash(git diff:*)"], "deny": []},
  "env": {"FOO": "1"},
  "model": "opus",
  "hooks": {
    "Stop": [
      {"hooks": [{"type": "command", "command": "say done", "timeout": 5}]}
    ],
    "PreCompact": [
      {"matcher": "manual", "hooks": [{"type": "command", "command": "./check.sh"}]}
    ]
  }
}"#;

/// A user's config.toml: comments, a `model` line, a profile table.
const CONFIG: &str = r#"# Codex settings
model = "o4-mini"   # the default model
approval_policy = "on-request"

# Profiles
[profiles.x]
model = "gpt-5"  # for big jobs
"#;

fn parse(text: &str) -> Value {
    serde_json::from_str(text).unwrap()
}

/// How many handlers of `settings`'s `event` run exactly `command`.
fn count(settings: &Value, event: &str, command: &str) -> usize {
    let Some(groups) = settings["hooks"][event].as_array() else { return 0 };
    groups
        .iter()
        .flat_map(|group| group["hooks"].as_array().cloned().unwrap_or_default())
        .filter(|handler| handler["command"] == command)
        .count()
}

/// How many handlers of `settings`'s `event` there are, ours or not.
fn handlers(settings: &Value, event: &str) -> usize {
    let Some(groups) = settings["hooks"][event].as_array() else { return 0 };
    groups.iter().map(|group| group["hooks"].as_array().map_or(0, Vec::len)).sum()
}

fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
    move |name| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string())
}

// ---- settings_path ----

#[test]
fn claude_code_settings_are_in_the_project_then_claude_config_dir_then_home() {
    let home = Path::new("/home/u");
    let env = env_of(&[("CLAUDE_CONFIG_DIR", "/cfg/claude"), ("CODEX_HOME", "/cfg/codex")]);
    let none = env_of(&[]);
    let project = Some(Path::new("/work/p"));
    assert_eq!(settings_path(Runtime::ClaudeCode, project, home, &env), PathBuf::from("/work/p/.claude/settings.json"));
    assert_eq!(settings_path(Runtime::ClaudeCode, None, home, &env), PathBuf::from("/cfg/claude/settings.json"));
    assert_eq!(settings_path(Runtime::ClaudeCode, None, home, &none), PathBuf::from("/home/u/.claude/settings.json"));
}

#[test]
fn codex_config_is_in_the_project_then_codex_home_then_home() {
    let home = Path::new("/home/u");
    let env = env_of(&[("CLAUDE_CONFIG_DIR", "/cfg/claude"), ("CODEX_HOME", "/cfg/codex")]);
    let none = env_of(&[]);
    let project = Some(Path::new("/work/p"));
    assert_eq!(settings_path(Runtime::Codex, project, home, &env), PathBuf::from("/work/p/.codex/config.toml"));
    assert_eq!(settings_path(Runtime::Codex, None, home, &env), PathBuf::from("/cfg/codex/config.toml"));
    assert_eq!(settings_path(Runtime::Codex, None, home, &none), PathBuf::from("/home/u/.codex/config.toml"));
}

#[test]
fn an_empty_config_directory_variable_counts_as_unset() {
    let home = Path::new("/home/u");
    let env = env_of(&[("CLAUDE_CONFIG_DIR", ""), ("CODEX_HOME", "")]);
    assert_eq!(settings_path(Runtime::ClaudeCode, None, home, &env), PathBuf::from("/home/u/.claude/settings.json"));
    assert_eq!(settings_path(Runtime::Codex, None, home, &env), PathBuf::from("/home/u/.codex/config.toml"));
}

// ---- Claude Code ----

#[test]
fn claude_code_install_adds_our_handler_once_to_each_event_and_keeps_everything_else() {
    let before = parse(SETTINGS);
    let after = parse(&install_claude_code(SETTINGS, PROGRAM).unwrap());
    for event in CLAUDE_CODE_EVENTS {
        assert_eq!(count(&after, event, COMMAND), 1, "{event}");
    }
    // Stop keeps someone else's group first, and gains ours as a group of its own.
    assert_eq!(after["hooks"]["Stop"].as_array().unwrap().len(), 2);
    assert_eq!(after["hooks"]["Stop"][0], before["hooks"]["Stop"][0]);
    assert_eq!(handlers(&after, "Stop"), 2);
    // Everything that is not one of our events is untouched.
    assert_eq!(after["hooks"]["PreCompact"], before["hooks"]["PreCompact"]);
    for key in ["permissions", "env", "model"] {
        assert_eq!(after[key], before[key], "{key}");
    }
    assert_eq!(after.as_object().unwrap().len(), 4);
    assert_eq!(
        after["hooks"].as_object().unwrap().len(),
        CLAUDE_CODE_EVENTS.len() + 2,
        "our events, PermissionRequest and PreCompact"
    );
}

#[test]
fn claude_code_handler_is_a_group_with_one_command_and_the_timeout() {
    let after = parse(&install_claude_code("", PROGRAM).unwrap());
    for event in CLAUDE_CODE_EVENTS {
        assert_eq!(
            after["hooks"][event],
            json!([{"hooks": [{"type": "command", "command": COMMAND, "timeout": HOOK_TIMEOUT_S}]}]),
            "{event}"
        );
    }
    assert_eq!(HOOK_TIMEOUT_S, 10);
}

#[test]
fn the_permission_request_handler_waits_longer_than_the_answer_wait() {
    for wait_s in [5, crate::ask::ANSWER_WAIT_S_DEFAULT, 600] {
        let after = parse(&install_claude_code_waiting("", PROGRAM, wait_s).unwrap());
        let timeout = after["hooks"][PERMISSION_EVENT][0]["hooks"][0]["timeout"].as_u64().unwrap();
        assert!(timeout > wait_s + crate::hook::HOOK_BUDGET_MS / 1000, "{wait_s}: {timeout}");
        assert_eq!(after["hooks"][PERMISSION_EVENT][0]["hooks"][0]["command"], COMMAND);
    }
}

#[test]
fn codex_hooks_json_gets_our_permission_request_and_tool_handlers_and_uninstall_removes_only_them() {
    let theirs = r#"{"hooks": {"PreToolUse": [{"matcher": "^Bash$", "hooks": [{"type": "command", "command": "./check.sh"}]}]}}"#;
    let installed = install_codex_hooks(theirs, PROGRAM, 60).unwrap();
    let after = parse(&installed);
    assert_eq!(
        after["hooks"][PERMISSION_EVENT],
        json!([{"hooks": [{"type": "command", "command": "/usr/local/bin/handoff hook codex", "timeout": permission_timeout_s(60)}]}])
    );
    let ours = json!({"hooks": [{"type": "command", "command": "/usr/local/bin/handoff hook codex", "timeout": HOOK_TIMEOUT_S}]});
    assert_eq!(after["hooks"]["PostToolUse"], json!([ours]));
    assert_eq!(
        after["hooks"]["PreToolUse"],
        json!([parse(theirs)["hooks"]["PreToolUse"][0], ours]),
        "theirs first, ours a group of its own"
    );
    assert_eq!(install_codex_hooks(&installed, PROGRAM, 60).unwrap(), installed, "installed once");
    assert_eq!(parse(&uninstall_codex_hooks(&installed).unwrap()), parse(theirs));
    assert_eq!(uninstall_codex_hooks(&install_codex_hooks("", PROGRAM, 60).unwrap()).unwrap(), "{}\n");
    // A Claude Code handler is not Codex's, and the other way round.
    assert_eq!(uninstall_claude_code(&installed).unwrap(), installed);
}

#[test]
fn claude_code_install_twice_gives_the_same_text() {
    let once = install_claude_code(SETTINGS, PROGRAM).unwrap();
    let twice = install_claude_code(&once, PROGRAM).unwrap();
    assert_eq!(twice, once);
    for event in CLAUDE_CODE_EVENTS {
        assert_eq!(count(&parse(&twice), event, COMMAND), 1, "{event}");
    }
}

#[test]
fn claude_code_install_with_ours_on_every_event_answers_the_text_as_it_was() {
    // Written by hand, compact, keys unsorted: not rewritten when there is nothing to add.
    let groups = json!([{"hooks": [{"type": "command", "command": "/opt/handoff hook claude-code"}]}]);
    let hooks: Map<String, Value> =
        CLAUDE_CODE_EVENTS.iter().chain([&PERMISSION_EVENT]).map(|event| (event.to_string(), groups.clone())).collect();
    let text = format!("{{\"zz\": 1, \"hooks\": {}}}", Value::Object(hooks));
    assert_eq!(install_claude_code(&text, PROGRAM).unwrap(), text);
}

#[test]
fn claude_code_answer_is_pretty_json_with_a_final_newline() {
    let text = install_claude_code(SETTINGS, PROGRAM).unwrap();
    assert_eq!(text, format!("{}\n", serde_json::to_string_pretty(&parse(&text)).unwrap()));
    let text = uninstall_claude_code(&text).unwrap();
    assert_eq!(text, format!("{}\n", serde_json::to_string_pretty(&parse(&text)).unwrap()));
}

#[test]
fn claude_code_uninstall_after_installing_twice_gives_back_the_original() {
    let once = install_claude_code(SETTINGS, PROGRAM).unwrap();
    let twice = install_claude_code(&once, PROGRAM).unwrap();
    let removed = uninstall_claude_code(&twice).unwrap();
    assert_eq!(parse(&removed), parse(SETTINGS));
}

#[test]
fn claude_code_install_into_no_file_then_uninstall_gives_an_empty_object() {
    for empty in ["", "  \n"] {
        let installed = install_claude_code(empty, PROGRAM).unwrap();
        assert_eq!(parse(&installed)["hooks"].as_object().unwrap().len(), CLAUDE_CODE_EVENTS.len() + 1);
        let removed = uninstall_claude_code(&installed).unwrap();
        assert_eq!(removed, "{}\n");
    }
}

#[test]
fn claude_code_install_adds_only_to_events_that_lack_ours() {
    // An older install reached Stop only, from a binary that has since moved.
    let old = r#"{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "/old/handoff hook claude-code"}]}]}}"#;
    let after = parse(&install_claude_code(old, PROGRAM).unwrap());
    assert_eq!(after["hooks"]["Stop"], parse(old)["hooks"]["Stop"], "ours at another path is kept, not doubled");
    for event in ["SessionStart", "UserPromptSubmit", "Notification", "StopFailure"] {
        assert_eq!(count(&after, event, COMMAND), 1, "{event}");
    }
}

#[test]
fn claude_code_uninstall_finds_ours_at_any_path_to_handoff() {
    let installed = install_claude_code("{}", "/usr/local/bin/handoff").unwrap();
    assert_eq!(uninstall_claude_code(&installed).unwrap(), "{}\n");

    let settings = json!({"hooks": {
        "Stop": [{"hooks": [{"type": "command", "command": "/opt/old/handoff hook claude-code"}]}],
        "Notification": [{"hooks": [{"type": "command", "command": "\"/Users/a b/handoff\" hook claude-code"}]}],
        "SessionStart": [{"hooks": [{"type": "command", "command": "'C:\\tools\\handoff.exe' hook claude-code"}]}],
        "UserPromptSubmit": [{"hooks": [{"type": "command", "command": "handoff hook claude-code"}]}]
    }});
    assert_eq!(uninstall_claude_code(&settings.to_string()).unwrap(), "{}\n");
}

#[test]
fn claude_code_uninstall_keeps_commands_that_are_not_ours() {
    let foreign = [
        "/usr/bin/nothandoff hook claude-code",
        "handoff hook codex",
        "handoff hook claude-code --verbose",
        "echo handoff hook claude-code",
        "handoffhook claude-code",
        "hook claude-code",
    ];
    let groups: Vec<Value> = foreign.iter().map(|c| json!({"hooks": [{"type": "command", "command": c}]})).collect();
    let settings = json!({"hooks": {"Stop": groups}}).to_string();
    assert_eq!(uninstall_claude_code(&settings).unwrap(), settings, "nothing of ours: the text as it was");

    let installed = install_claude_code(&settings, PROGRAM).unwrap();
    let removed = parse(&uninstall_claude_code(&installed).unwrap());
    assert_eq!(removed, parse(&settings));
    assert_eq!(handlers(&removed, "Stop"), foreign.len());
}

#[test]
fn claude_code_uninstall_keeps_a_group_that_still_has_other_handlers() {
    let settings = json!({"hooks": {"Stop": [{"matcher": "", "hooks": [
        {"type": "command", "command": "say done"},
        {"type": "command", "command": "handoff hook claude-code", "timeout": 10}
    ]}]}});
    let removed = parse(&uninstall_claude_code(&settings.to_string()).unwrap());
    assert_eq!(
        removed,
        json!({"hooks": {"Stop": [{"matcher": "", "hooks": [{"type": "command", "command": "say done"}]}]}})
    );
}

#[test]
fn claude_code_uninstall_keeps_groups_and_events_that_were_empty_before() {
    let settings = json!({"hooks": {
        "Stop": [{"hooks": []}, {"hooks": [{"type": "command", "command": "handoff hook claude-code"}]}],
        "PreToolUse": []
    }});
    let removed = parse(&uninstall_claude_code(&settings.to_string()).unwrap());
    assert_eq!(removed, json!({"hooks": {"Stop": [{"hooks": []}], "PreToolUse": []}}));
}

#[test]
fn claude_code_uninstall_with_nothing_of_ours_answers_the_text_as_it_was() {
    for text in ["", "{ \"model\":\"opus\" }", SETTINGS, "[1, 2]", r#"{"hooks": "none"}"#, r#"{"hooks": {"Stop": 3}}"#]
    {
        assert_eq!(uninstall_claude_code(text).unwrap(), text);
    }
}

#[test]
fn claude_code_install_refuses_a_file_that_is_not_an_object() {
    for text in ["[]", "\"x\"", "3", "null"] {
        let err = install_claude_code(text, PROGRAM).unwrap_err();
        assert!(
            matches!(&err, InstallError::Shape { at, expected: "an object", .. } if at == "top level"),
            "{text}: {err:?}"
        );
    }
    let err = install_claude_code("[]", PROGRAM).unwrap_err();
    assert_eq!(err.to_string(), "the settings file's top level is an array, not an object: hooks are only installed into a file of the documented shape, so it was left as it is");
}

#[test]
fn claude_code_install_refuses_hooks_that_are_not_an_object() {
    let err = install_claude_code(r#"{"hooks": []}"#, PROGRAM).unwrap_err();
    assert_eq!(err, InstallError::Shape { at: "`hooks`".into(), expected: "an object", found: "an array" });
}

#[test]
fn claude_code_install_refuses_an_event_that_is_not_an_array() {
    let err = install_claude_code(r#"{"hooks": {"Stop": {"hooks": []}}}"#, PROGRAM).unwrap_err();
    assert_eq!(err, InstallError::Shape { at: "`hooks.Stop`".into(), expected: "an array", found: "an object" });
    assert!(err.to_string().contains("`hooks.Stop` is an object, not an array"), "{err}");
}

#[test]
fn claude_code_refuses_a_file_that_is_not_json() {
    for result in [install_claude_code("{\"hooks\": ", PROGRAM), uninstall_claude_code("{,}")] {
        let err = result.unwrap_err();
        assert!(matches!(err, InstallError::Unreadable { format: "JSON", .. }), "{err:?}");
        assert!(err.to_string().starts_with("the settings file is not valid JSON"), "{err}");
    }
}

#[test]
fn claude_code_quotes_a_program_path_with_spaces() {
    let program = "/Users/a b/bin/handoff";
    let installed = install_claude_code(SETTINGS, program).unwrap();
    for event in CLAUDE_CODE_EVENTS {
        assert_eq!(count(&parse(&installed), event, "\"/Users/a b/bin/handoff\" hook claude-code"), 1, "{event}");
    }
    assert_eq!(install_claude_code(&installed, program).unwrap(), installed);
    assert_eq!(parse(&uninstall_claude_code(&installed).unwrap()), parse(SETTINGS));
}

#[test]
fn claude_code_quotes_a_program_path_a_shell_would_rewrite() {
    let installed = parse(&install_claude_code("", "C:\\tools\\handoff.exe").unwrap());
    assert_eq!(count(&installed, "Stop", "\"C:\\tools\\handoff.exe\" hook claude-code"), 1);
    let plain = parse(&install_claude_code("", "~/bin/handoff").unwrap());
    assert_eq!(count(&plain, "Stop", "~/bin/handoff hook claude-code"), 1);
}

#[test]
fn claude_code_install_refuses_a_program_a_shell_reads_inside_double_quotes() {
    for program in ["/a\"b/handoff", "/$HOME/handoff", "/a`b`/handoff"] {
        let err = install_claude_code("", program).unwrap_err();
        assert!(matches!(err, InstallError::Program { .. }), "{program}: {err:?}");
    }
}

// ---- both ----

#[test]
fn install_refuses_a_program_not_named_handoff_since_uninstall_could_not_find_it() {
    for program in ["/usr/bin/handoff-dev", "", "/usr/bin/nothandoff", "handoff/"] {
        for harness in [Runtime::ClaudeCode, Runtime::Codex] {
            let err = apply(harness, "", program, false).unwrap_err();
            assert!(matches!(&err, InstallError::Program { program: p, .. } if p == program), "{program}: {err:?}");
        }
    }
    assert!(install_codex("", "C:\\bin\\handoff.exe").is_ok());
}

#[test]
fn apply_dispatches_to_the_harness_and_direction() {
    assert_eq!(apply(Runtime::ClaudeCode, SETTINGS, PROGRAM, false), install_claude_code(SETTINGS, PROGRAM));
    let installed = install_claude_code(SETTINGS, PROGRAM).unwrap();
    assert_eq!(apply(Runtime::ClaudeCode, &installed, "", true), uninstall_claude_code(&installed));
    assert_eq!(apply(Runtime::Codex, CONFIG, PROGRAM, false), install_codex(CONFIG, PROGRAM));
    let installed = install_codex(CONFIG, PROGRAM).unwrap();
    assert_eq!(apply(Runtime::Codex, &installed, "", true), uninstall_codex(&installed));
    assert_ne!(apply(Runtime::Codex, &installed, "", true).unwrap(), installed);
}

#[test]
fn install_error_is_a_std_error() {
    let err: Box<dyn std::error::Error> = Box::new(InstallError::ForeignNotify { existing: "[\"x\"]".into() });
    assert!(err.to_string().contains("[\"x\"]"));
}

// ---- Codex ----

const NOTIFY_LINE: &str = "notify = [\"/usr/local/bin/handoff\", \"hook\", \"codex\"]\n";

#[test]
fn codex_install_adds_a_top_level_notify_and_keeps_every_other_byte() {
    let installed = install_codex(CONFIG, PROGRAM).unwrap();
    assert_eq!(installed.matches(NOTIFY_LINE).count(), 1, "{installed}");
    assert_eq!(installed.replacen(NOTIFY_LINE, "", 1), CONFIG);
    // Top level: before the first table, so Codex does not read it as the profile's.
    assert!(installed.find(NOTIFY_LINE).unwrap() < installed.find("[profiles.x]").unwrap());
    let config: DocumentMut = installed.parse().unwrap();
    let argv: Vec<&str> = config["notify"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    assert_eq!(argv, [PROGRAM, "hook", "codex"]);
}

#[test]
fn codex_install_twice_gives_the_same_text() {
    let once = install_codex(CONFIG, PROGRAM).unwrap();
    assert_eq!(install_codex(&once, PROGRAM).unwrap(), once);
    assert_eq!(install_codex(&once, "/elsewhere/handoff").unwrap(), once, "ours at another path is ours");
}

#[test]
fn codex_uninstall_after_installing_twice_gives_back_every_byte() {
    let twice = install_codex(&install_codex(CONFIG, PROGRAM).unwrap(), PROGRAM).unwrap();
    assert_eq!(uninstall_codex(&twice).unwrap(), CONFIG);
}

#[test]
fn codex_install_into_no_file_then_uninstall_gives_no_content() {
    let installed = install_codex("", PROGRAM).unwrap();
    assert_eq!(installed, NOTIFY_LINE);
    assert_eq!(uninstall_codex(&installed).unwrap(), "");
}

#[test]
fn codex_install_refuses_a_foreign_notify_and_uninstall_leaves_it() {
    let config = CONFIG.replacen("approval_policy", "notify = [\"notify-send\"]  # desktop\napproval_policy", 1);
    let err = install_codex(&config, PROGRAM).unwrap_err();
    assert_eq!(err, InstallError::ForeignNotify { existing: "[\"notify-send\"]".into() });
    let message = err.to_string();
    assert!(message.contains("only one notify program") && message.contains("notify-send"), "{message}");
    assert_eq!(uninstall_codex(&config).unwrap(), config);
}

#[test]
fn codex_notify_is_ours_only_as_handoff_hook_codex() {
    for notify in [
        r#"["/usr/bin/nothandoff", "hook", "codex"]"#,
        r#"["handoff", "hook", "claude-code"]"#,
        r#"["handoff", "hook", "codex", "--verbose"]"#,
        r#"["handoff", "hook"]"#,
        r#"["handoff"]"#,
        r#"[]"#,
        r#""handoff hook codex""#,
    ] {
        let config = format!("notify = {notify}\n");
        assert_eq!(uninstall_codex(&config).unwrap(), config, "{notify}");
        assert!(matches!(install_codex(&config, PROGRAM), Err(InstallError::ForeignNotify { .. })), "{notify}");
    }
    let table = "[notify]\nprogram = \"x\"\n";
    assert_eq!(install_codex(table, PROGRAM).unwrap_err(), InstallError::ForeignNotify { existing: "a table".into() });
}

#[test]
fn codex_uninstall_finds_ours_at_any_path_to_handoff() {
    for program in ["/old/place/handoff", "C:\\bin\\handoff.exe", "handoff", "/Users/a b/handoff"] {
        let config = format!("{NOTIFY_LINE}{CONFIG}").replace("/usr/local/bin/handoff", &program.replace('\\', "\\\\"));
        assert_eq!(uninstall_codex(&config).unwrap(), CONFIG, "{program}");
    }
}

#[test]
fn codex_writes_a_program_path_with_spaces_as_one_argument() {
    let program = "/Users/a b/bin/handoff";
    let installed = install_codex(CONFIG, program).unwrap();
    let line = "notify = [\"/Users/a b/bin/handoff\", \"hook\", \"codex\"]\n";
    assert_eq!(installed.replacen(line, "", 1), CONFIG);
    assert_eq!(install_codex(&installed, program).unwrap(), installed);
    assert_eq!(uninstall_codex(&installed).unwrap(), CONFIG);
}

#[test]
fn codex_keeps_crlf_line_breaks_and_a_missing_final_one() {
    let crlf = CONFIG.replace('\n', "\r\n");
    let installed = install_codex(&crlf, PROGRAM).unwrap();
    assert_eq!(installed.replacen(&NOTIFY_LINE.replace('\n', "\r\n"), "", 1), crlf);
    assert_eq!(install_codex(&installed, PROGRAM).unwrap(), installed);
    assert_eq!(uninstall_codex(&installed).unwrap(), crlf);

    for unterminated in ["model = \"o3\"", "[profiles.x]\nmodel = \"o3\""] {
        let installed = install_codex(unterminated, PROGRAM).unwrap();
        assert!(!installed.ends_with('\n'), "{installed:?}");
        assert_eq!(install_codex(&installed, PROGRAM).unwrap(), installed);
        assert_eq!(uninstall_codex(&installed).unwrap(), unterminated);
    }
}

#[test]
fn codex_refuses_a_file_that_is_not_toml() {
    for result in [install_codex("model = ", PROGRAM), uninstall_codex("[profiles")] {
        let err = result.unwrap_err();
        assert!(matches!(err, InstallError::Unreadable { format: "TOML", .. }), "{err:?}");
        assert!(err.to_string().starts_with("the settings file is not valid TOML"), "{err}");
    }
}

#[test]
fn codexs_trust_of_our_hook_is_the_key_and_hash_codex_itself_writes() {
    // What Codex 0.169.0 wrote to config.toml when the person trusted this hooks.json.
    let hooks = r#"{"hooks":{"PermissionRequest":[{"hooks":[{"command":"/work/main/target/debug/handoff hook codex","timeout":105,"type":"command"}]}]}}"#;
    let trust = codex_trust("/tmp/tr/codex/hooks.json", hooks);
    assert_eq!(
        trust,
        [(
            "/tmp/tr/codex/hooks.json:permission_request:0:0".to_string(),
            "sha256:9fe5ca528d19018a468428d3988b6ef0fd349523a2ffa3d75db7e32feb64ca17".to_string()
        )]
    );
    let others = r#"{"hooks":{"PermissionRequest":[{"hooks":[{"command":"audit","type":"command"}]},{"hooks":[{"command":"/usr/bin/handoff hook codex","timeout":30,"type":"command"}]}]}}"#;
    assert!(codex_trust("/h/hooks.json", others)[0].0.ends_with(":permission_request:1:0"), "our handler's own place");
    assert_eq!(codex_trust("/h/hooks.json", r#"{"hooks":{}}"#), []);
    let all = codex_trust("/h/hooks.json", &install_codex_hooks("", PROGRAM, 60).unwrap());
    let keys: Vec<&str> = all.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        keys,
        ["/h/hooks.json:permission_request:0:0", "/h/hooks.json:pre_tool_use:0:0", "/h/hooks.json:post_tool_use:0:0"],
        "each handler of ours, keyed by its event in snake case"
    );
}

#[test]
fn trusting_our_hook_and_taking_the_trust_back_gives_config_toml_back_byte_for_byte() {
    let before = "model = \"o4\"\nnotify = [\"/usr/bin/handoff\", \"hook\", \"codex\"]\n";
    let trusted = trust_codex_hook(before, "/h/hooks.json:permission_request:0:0", "sha256:ab").unwrap();
    let doc: toml_edit::DocumentMut = trusted.parse().unwrap();
    assert_eq!(
        doc["hooks"]["state"]["/h/hooks.json:permission_request:0:0"]["trusted_hash"].as_str(),
        Some("sha256:ab")
    );
    assert_eq!(
        trust_codex_hook(&trusted, "/h/hooks.json:permission_request:0:0", "sha256:ab").unwrap(),
        trusted,
        "a second install changes nothing"
    );
    assert_eq!(untrust_codex_hook(&trusted, "/h/hooks.json:permission_request:0:0").unwrap(), before);
    let codexs_own = "[hooks.state]\n\n[hooks.state.\"/h/other:stop:0:0\"]\ntrusted_hash = \"sha256:cd\"\n";
    let both = trust_codex_hook(codexs_own, "/h/hooks.json:permission_request:0:0", "sha256:ab").unwrap();
    assert_eq!(
        untrust_codex_hook(&both, "/h/hooks.json:permission_request:0:0").unwrap(),
        codexs_own,
        "the person's other trust stays"
    );
}
