//! Helpers shared by the end-to-end tests of buffers, limits and locks:
//! the `tally` binary with the user's environment removed, and a SQLite
//! sink with the `groups` table those tests write to.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The built `tally` binary, with no `TALLY_*` setting leaking in.
pub fn tally() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tally"));
    for var in [
        "TALLY_REDIS",
        "TALLY_REDIS_CLUSTER",
        "TALLY_DATA_DIR",
        "TALLY_CONFIG",
        "TALLY_SINK",
    ] {
        cmd.env_remove(var);
    }
    cmd
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
