//! The working tree's changes against HEAD as paths with line counts, and nothing else: the
//! workspace route refuses contents, and this module never reads any.

use crate::client::FileInput;
use std::path::Path;
use std::process::Command;

/// Runs `git diff --numstat -z --no-renames HEAD` in `dir` and reads its answer.
/// `-z` keeps unusual paths verbatim; `--no-renames` lists a rename as the deletion of one
/// path and the addition of another, which is all the package needs.
pub fn numstat(dir: &Path) -> Result<Vec<FileInput>, String> {
    let output = Command::new("git")
        .current_dir(dir)
        .args(["diff", "--numstat", "-z", "--no-renames", "HEAD", "--"])
        .output()
        .map_err(|e| format!("git: {e}"))?;
    if !output.status.success() {
        // git's first line says why (not a repository, no HEAD yet); the rest is its usage.
        let stderr = String::from_utf8_lossy(&output.stderr);
        let why = stderr.lines().next().unwrap_or("no reason given").trim();
        return Err(format!("git diff --numstat HEAD failed in {}: {why}", dir.display()));
    }
    parse_numstat(&output.stdout)
}

/// Reads `git diff --numstat -z --no-renames` output: records of `INS\tDEL\tPATH\0`.
/// A binary file's counts are `-`; it is listed with zero lines.
pub fn parse_numstat(out: &[u8]) -> Result<Vec<FileInput>, String> {
    let mut files = Vec::new();
    for record in out.split(|b| *b == 0).filter(|r| !r.is_empty()) {
        let text = std::str::from_utf8(record).map_err(|_| "git: a path that is not UTF-8".to_string())?;
        let mut fields = text.splitn(3, '\t');
        let (Some(ins), Some(del), Some(path)) = (fields.next(), fields.next(), fields.next()) else {
            return Err(format!("git: an unreadable numstat line: {text:?}"));
        };
        let count =
            |s: &str| if s == "-" { Ok(0) } else { s.parse::<u32>().map_err(|_| format!("git: not a count: {s:?}")) };
        let path = path.trim_start_matches('\n');
        files.push(FileInput { path: path.to_string(), insertions: count(ins)?, deletions: count(del)? });
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numstat_becomes_paths_with_counts_binary_files_counting_zero() {
        let out = b"3\t1\tsrc/a.rs\x0010\t0\tdocs/with space.md\x00-\t-\tlogo.png\x00";
        let files = parse_numstat(out).unwrap();
        let want = [("src/a.rs", 3, 1), ("docs/with space.md", 10, 0), ("logo.png", 0, 0)];
        assert_eq!(files.len(), want.len());
        for (f, (path, ins, del)) in files.iter().zip(want) {
            assert_eq!((f.path.as_str(), f.insertions, f.deletions), (path, ins, del));
        }
        assert!(parse_numstat(b"").unwrap().is_empty());
        assert!(parse_numstat(b"x\t1\tp\x00").is_err());
    }
}
