//! Helpers shared by the end-to-end tests of the binary:
//! the `tally` binary with the user's environment removed, `tally serve`
//! started on a free port, and a SQLite sink with the `groups` table those
//! tests write to.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

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

/// A running `tally serve`, killed on drop.
pub struct Serve {
    pub child: Child,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `tally <global> serve --listen 127.0.0.1:<free port> <args>` and
/// waits for its "serving on" line (`global`: the backend, e.g.
/// `--data-dir DIR` or `--redis URL`).
pub fn serve(global: &[&str], args: &[&str]) -> Serve {
    serve_with_env(global, args, &[])
}

/// [`serve`] with `TALLY_*` variables (or others) set to `env`.
pub fn serve_with_env(global: &[&str], args: &[&str], env: &[(&str, &str)]) -> Serve {
    let port = tally_testkit::free_port();
    let mut child = tally()
        .envs(env.iter().copied())
        .args(global)
        .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start tally serve");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(
        line.contains(&format!("http://127.0.0.1:{port}/")),
        "unexpected first line: {line:?}"
    );
    Serve {
        child,
        base: format!("http://127.0.0.1:{port}"),
    }
}

/// Sends `child` (a `tally` command that runs until stopped) SIGTERM and
/// waits until it has exited cleanly; `what` names it in the failure.
pub fn terminate(child: &mut Child, what: &str) {
    assert!(
        Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap()
            .success()
    );
    let deadline = std::time::Instant::now() + tally_testkit::PATIENCE;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{what} ignored SIGTERM"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert!(status.success(), "{status}");
}

/// Writes `text` as `dir/tally.toml`, a settings file for `--config`, and
/// returns its path.
pub fn settings_file(dir: &Path, text: &str) -> PathBuf {
    let file = dir.join("tally.toml");
    std::fs::write(&file, text).unwrap();
    file
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
        "tally {:?} failed ({}): {}",
        cmd.get_args().collect::<Vec<_>>(),
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

/// The sum of a `GET /v1/counters/{name}?precision=86400` answer's samples:
/// the counter's total over the days kept.
pub fn day_sum(body: &str) -> i64 {
    let v: serde_json::Value = serde_json::from_str(body).unwrap();
    v["precisions"]["86400"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p[1].as_i64().unwrap())
        .sum()
}
