//! Helpers shared by the end-to-end tests of the binary:
//! the `tally` binary with the user's environment removed, and a SQLite
//! sink with the `groups` table those tests write to.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The built `tally` binary, with no `TALLY_*` setting leaking in.
pub fn tally() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tally"));
    for (var, _) in std::env::vars_os() {
        if var.to_string_lossy().starts_with("TALLY_") {
            cmd.env_remove(var);
        }
    }
    cmd
}

/// Runs `cmd` to completion.
pub fn run(cmd: &mut Command) -> std::process::Output {
    cmd.output().expect("run tally")
}

/// Runs `cmd`, asserts success, returns stdout.
pub fn ok(cmd: &mut Command) -> String {
    let out = cmd.output().expect("run tally");
    assert!(
        out.status.success(),
        "tally failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The `groups` table of the end-to-end tests, in a new SQLite file under
/// `dir`; returns the sink URL.
pub fn sqlite_sink(dir: &Path) -> String {
    let path: PathBuf = dir.join("sink.sqlite3");
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch(
            "CREATE TABLE groups (id INTEGER PRIMARY KEY, times_seen INTEGER NOT NULL DEFAULT 0,
                                  users INTEGER NOT NULL DEFAULT 0)",
        )
        .unwrap();
    format!("sqlite:{}", path.display())
}
