//! The working tree's changes as paths with line counts, and nothing else: the workspace
//! route refuses contents, and this module reads none but to count an untracked file's lines.

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

/// The commit a session starts from: `HEAD`, or git's empty tree in a repository with no
/// commit yet (so that every file it then makes counts as touched).
pub fn base(dir: &Path) -> Result<String, String> {
    let head = git(dir, &["rev-parse", "--verify", "-q", "HEAD"])?;
    if let Some(head) = head {
        return Ok(head.trim().to_string());
    }
    let empty = git(dir, &["hash-object", "-t", "tree", "/dev/null"])?;
    empty
        .map(|e| e.trim().to_string())
        .ok_or_else(|| format!("git found no commit and no empty tree in {}", dir.display()))
}

/// What changed in `dir` since `base` (a commit or a tree): tracked files as `git diff
/// --numstat` counts them, then the untracked files git does not ignore, each counted by its
/// lines (none for a binary file). At most `max` files, paths that are one line only.
pub fn changed_since(dir: &Path, base: &str, max: usize) -> Result<Vec<FileInput>, String> {
    let diff = git_bytes(dir, &["diff", "--numstat", "-z", "--no-renames", base, "--"])?
        .ok_or_else(|| format!("git diff --numstat {base} failed in {}", dir.display()))?;
    let mut files = parse_numstat(&diff)?;
    let untracked = git_bytes(dir, &["ls-files", "--others", "--exclude-standard", "-z"])?.unwrap_or_default();
    for path in untracked.split(|b| *b == 0).filter(|p| !p.is_empty()) {
        let Ok(path) = std::str::from_utf8(path) else { continue };
        // Only to count its lines: nothing of a file's contents leaves this function.
        let bytes = std::fs::read(dir.join(path)).unwrap_or_default();
        let lines = if bytes.contains(&0) { 0 } else { bytes.iter().filter(|b| **b == b'\n').count() as u32 };
        files.push(FileInput { path: path.to_string(), insertions: lines, deletions: 0 });
    }
    files.retain(|f| !f.path.chars().any(char::is_control) && f.path.len() <= handoff_core::limits::PATH_BYTES_MAX);
    files.truncate(max);
    Ok(files)
}

/// `git ARGS` in `dir`: its output, `None` when git said no; an error when git cannot run.
fn git_bytes(dir: &Path, args: &[&str]) -> Result<Option<Vec<u8>>, String> {
    let output = Command::new("git").current_dir(dir).args(args).output().map_err(|e| format!("git: {e}"))?;
    Ok(output.status.success().then_some(output.stdout))
}

fn git(dir: &Path, args: &[&str]) -> Result<Option<String>, String> {
    Ok(git_bytes(dir, args)?.map(|b| String::from_utf8_lossy(&b).into_owned()))
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

    #[test]
    fn files_touched_since_the_base_include_untracked_ones_git_does_not_ignore() {
        let dir = std::env::temp_dir().join(format!("handoff-git-base-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let run = |args: &[&str]| {
            let ok = Command::new("git")
                .current_dir(&dir)
                .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "commit.gpgsign=false"])
                .args(args)
                .output()
                .unwrap();
            assert!(ok.status.success(), "{args:?}");
        };
        run(&["init", "-q"]);
        let empty = base(&dir).unwrap();
        std::fs::write(dir.join("a.txt"), "1\n2\n").unwrap();
        std::fs::write(dir.join(".gitignore"), "ignored.txt\n").unwrap();
        std::fs::write(dir.join("ignored.txt"), "x\n").unwrap();
        let mut files = changed_since(&dir, &empty, 100).unwrap();
        files.sort_by(|a, b| a.path.cmp(&b.path));
        let seen: Vec<(&str, u32)> = files.iter().map(|f| (f.path.as_str(), f.insertions)).collect();
        assert_eq!(seen, [(".gitignore", 1), ("a.txt", 2)], "no commit yet: every file made counts, none ignored");
        run(&["add", "."]);
        run(&["commit", "-q", "-m", "start"]);
        let head = base(&dir).unwrap();
        assert_ne!(head, empty);
        std::fs::write(dir.join("a.txt"), "1\n3\n4\n").unwrap();
        std::fs::write(dir.join("new.rs"), "fn main() {}\n").unwrap();
        let mut files = changed_since(&dir, &head, 100).unwrap();
        files.sort_by(|a, b| a.path.cmp(&b.path));
        let seen: Vec<(&str, u32, u32)> = files.iter().map(|f| (f.path.as_str(), f.insertions, f.deletions)).collect();
        assert_eq!(seen, [("a.txt", 2, 1), ("new.rs", 1, 0)]);
        assert_eq!(changed_since(&dir, &head, 1).unwrap().len(), 1, "within the cap");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
