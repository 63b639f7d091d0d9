//! The runtimes installed here and the models each reaches, as the daemon's presence reports
//! them. Codex: app-server's `model/list`, over its stdio as serve drives it. Claude Code,
//! which has no command that lists models: its documented aliases and the full names the
//! person at the machine allows (`--model-allow`).

use super::rules::{claude_code_models, shape_models};
use crate::client::RuntimeModels;
use crate::machine::Runtime;
use crate::serve::codex::{AppServer, Config};
use std::path::{Path, PathBuf};

/// The runtimes found on `path_var` (absolute entries only) with the models each reaches;
/// each line of `say` says what was found, or why Codex's list is empty.
pub fn reachable(path_var: Option<&str>, allowed: &[String], cwd: &Path, say: &dyn Fn(&str)) -> Vec<RuntimeModels> {
    let mut found = Vec::new();
    for runtime in Runtime::ALL {
        let Some(program) = crate::detect::find(runtime.program(), path_var) else { continue };
        let models = match runtime {
            Runtime::ClaudeCode => claude_code_models(allowed),
            Runtime::Codex => match codex_models(&program, cwd) {
                Ok(models) => shape_models(models),
                Err(why) => {
                    say(&format!("codex's model/list: {why}; reporting codex with no models"));
                    Vec::new()
                }
            },
        };
        say(&format!("{} ({}): {} models: {}", runtime.name(), program.display(), models.len(), models.join(", ")));
        found.push(RuntimeModels { name: runtime.name().to_string(), models });
    }
    found
}

/// Codex's `model/list`, from an app-server of its own started in `cwd` and stopped after.
fn codex_models(program: &Path, cwd: &Path) -> Result<Vec<String>, String> {
    let config = Config {
        program: PathBuf::from(program),
        args: Vec::new(),
        env: Vec::new(),
        env_remove: crate::machine::turn::REMOVED_VARS.map(String::from).to_vec(),
        cwd: cwd.to_path_buf(),
        approval_policy: "untrusted".into(),
    };
    let mut server = AppServer::start(&config).map_err(|e| e.to_string())?;
    let listed = server.model_list().map_err(|e| e.to_string());
    server.stop();
    listed
}
