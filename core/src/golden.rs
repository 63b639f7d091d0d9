//! Golden files for tests (here and in the CLI, through the `golden` feature): a committed
//! fixture must equal what the code produces now. Test support only; the Worker never links it.

use std::path::Path;

/// The fixture at `path` equals `actual`; `UPDATE_GOLDEN=1` writes it instead, on purpose, so
/// that a changed byte arrives as a diff somebody reads.
pub fn check(path: &Path, actual: &str) {
    if std::env::var("UPDATE_GOLDEN").as_deref() == Ok("1") {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(path)
        .unwrap_or_else(|_| panic!("{} is missing; create it on purpose with UPDATE_GOLDEN=1", path.display()));
    assert!(
        expected == actual,
        "{} differs from what the code produces now; if the change is meant, rerun with UPDATE_GOLDEN=1 and \
         commit the diff.\n--- expected\n{expected}\n--- actual\n{actual}",
        path.display()
    );
}
