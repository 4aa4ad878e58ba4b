//! A real PostgreSQL server for one test, from the Debian packages.
//!
//! Invariant: while a [`PostgresServer`] is alive, a fresh cluster (made by
//! `initdb` in a temporary directory) is listening on 127.0.0.1 on its own
//! free port, with trust authentication for the `postgres` user; dropping
//! the handle shuts the server down (immediate mode, then SIGKILL) and
//! removes the directory. PostgreSQL refuses to run as root, so when the
//! tests run as root the server runs as the `postgres` OS user (created by
//! the Debian package), with the directory handed to it.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tempfile::TempDir;

use crate::process::{PATIENCE, free_port, stop_child, wait_until};

const INSTALL_HINT: &str = "Install PostgreSQL with `sudo apt-get install postgresql` (binaries in /usr/lib/postgresql/*/bin)";

/// A running PostgreSQL server, stopped on drop.
#[derive(Debug)]
pub struct PostgresServer {
    port: u16,
    dir: TempDir,
    child: Option<Child>,
}

/// The directory of the newest installed PostgreSQL's binaries.
fn bin_dir() -> PathBuf {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v: u32 = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("postgres").is_file().then_some((v, bin))
        })
        .collect();
    versions.sort();
    match versions.pop() {
        Some((_, bin)) => bin,
        None => panic!("PostgreSQL was not found in /usr/lib/postgresql. {INSTALL_HINT}"),
    }
}

/// `(uid, gid)` of the `postgres` user when running as root, else `None`.
fn run_as() -> Option<(u32, u32)> {
    let me = Command::new("id").arg("-u").output().ok()?;
    if String::from_utf8_lossy(&me.stdout).trim() != "0" {
        return None;
    }
    let id = |flag: &str| -> u32 {
        let out = Command::new("id")
            .args([flag, "postgres"])
            .output()
            .unwrap_or_else(|e| panic!("cannot run `id`: {e}"));
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .unwrap_or_else(|_| {
                panic!(
                    "running as root, PostgreSQL needs the `postgres` OS user, which does not \
                     exist. {INSTALL_HINT}"
                )
            })
    };
    Some((id("-u"), id("-g")))
}

fn command(bin: &Path, name: &str, user: Option<(u32, u32)>) -> Command {
    let mut cmd = Command::new(bin.join(name));
    if let Some((uid, gid)) = user {
        cmd.uid(uid).gid(gid);
    }
    cmd.env_remove("PGDATA").env("LC_ALL", "C");
    cmd
}

impl PostgresServer {
    /// Initialises a cluster and starts a server on a free port.
    pub fn start() -> Self {
        let bin = bin_dir();
        let user = run_as();
        let dir = tempfile::Builder::new()
            .prefix("tally-pg-")
            .tempdir()
            .expect("temporary directory for PostgreSQL");
        if let Some((uid, gid)) = user {
            let status = Command::new("chown")
                .arg("-R")
                .arg(format!("{uid}:{gid}"))
                .arg(dir.path())
                .status()
                .expect("chown the PostgreSQL directory");
            assert!(status.success(), "chown of {} failed", dir.path().display());
        }
        let data = dir.path().join("data");
        let out = command(&bin, "initdb", user)
            .arg("-D")
            .arg(&data)
            .args(["-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"])
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("cannot run initdb: {e}. {INSTALL_HINT}"));
        assert!(
            out.status.success(),
            "initdb failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let mut last_error = String::new();
        for _ in 0..5 {
            let port = free_port();
            match Self::spawn(&bin, user, dir.path(), port) {
                Ok(child) => {
                    return PostgresServer {
                        port,
                        dir,
                        child: Some(child),
                    };
                }
                Err(e) => last_error = e,
            }
        }
        panic!("PostgreSQL did not start after 5 attempts: {last_error}");
    }

    fn spawn(bin: &Path, user: Option<(u32, u32)>, dir: &Path, port: u16) -> Result<Child, String> {
        let log = std::fs::File::create(dir.join("postgres.log")).map_err(|e| e.to_string())?;
        let mut child = command(bin, "postgres", user)
            .arg("-D")
            .arg(dir.join("data"))
            .args(["-p", &port.to_string(), "-k"])
            .arg(dir)
            .args([
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                "fsync=off",
                "-c",
                "synchronous_commit=off",
                "-c",
                "full_page_writes=off",
                "-c",
                "max_connections=200",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("spawn postgres: {e}"))?;
        let ready = wait_until(PATIENCE, || {
            if let Ok(Some(_)) = child.try_wait() {
                return true;
            }
            Command::new(bin.join("pg_isready"))
                .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-U", "postgres"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        });
        if let Ok(Some(status)) = child.try_wait() {
            let log = std::fs::read_to_string(dir.join("postgres.log")).unwrap_or_default();
            return Err(format!("postgres exited with {status}: {log}"));
        }
        if !ready {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("postgres did not become ready on port {port}"));
        }
        Ok(child)
    }

    /// The TCP port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A `postgres://` URL to the `postgres` database as the `postgres` user.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// The server's directory (data and log).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for PostgresServer {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // Immediate shutdown: the postmaster stops its backends too.
            stop_child(&mut child, "-QUIT", Duration::from_secs(5));
        }
    }
}
