//! What the two binaries' command lines share: `--flag value` or `--flag=value`, `--help`, a
//! usage error (exit 2), and reading a small input file no larger than its named limit.

use std::path::Path;
use std::process::ExitCode;

/// `--flag=value` as (`--flag`, Some(`value`)); anything else as itself with no inline value.
pub fn split_flag(arg: &str) -> (String, Option<String>) {
    match arg.split_once('=') {
        Some((flag, value)) if flag.starts_with("--") => (flag.to_string(), Some(value.to_string())),
        _ => (arg.to_string(), None),
    }
}

/// The parsed arguments, or the exit: usage on stdout and success for `--help` (`Ok(None)`),
/// the error and usage on stderr and 2 for a bad command line.
pub fn args_or_exit<A>(name: &str, usage: &str, parsed: Result<Option<A>, String>) -> Result<A, ExitCode> {
    match parsed {
        Ok(Some(args)) => Ok(args),
        Ok(None) => {
            println!("{usage}");
            Err(ExitCode::SUCCESS)
        }
        Err(message) => {
            eprintln!("{name}: {message}\n\n{usage}");
            Err(ExitCode::from(2))
        }
    }
}

/// The text of `path`, refused when it is larger than `max` bytes.
pub fn read_bounded(path: &Path, max: u64) -> Result<String, String> {
    let size = std::fs::metadata(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?.len();
    if size > max {
        return Err(format!("{} is {size} bytes, more than {max}", path.display()));
    }
    std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_inline_value_is_split_only_from_a_long_flag() {
        assert_eq!(split_flag("--routes=a=b"), ("--routes".to_string(), Some("a=b".to_string())));
        assert_eq!(split_flag("--check"), ("--check".to_string(), None));
        assert_eq!(split_flag("http://h/?a=b"), ("http://h/?a=b".to_string(), None));
    }

    #[test]
    fn a_file_over_its_limit_is_refused_by_size() {
        let path = std::env::temp_dir().join(format!("handoff-tools-cli-{}", std::process::id()));
        std::fs::write(&path, "12345").unwrap();
        assert_eq!(read_bounded(&path, 5).unwrap(), "12345");
        assert!(read_bounded(&path, 4).unwrap_err().ends_with("is 5 bytes, more than 4"));
        std::fs::remove_file(&path).unwrap();
        assert!(read_bounded(&path, 4).unwrap_err().starts_with("cannot read"));
    }
}
