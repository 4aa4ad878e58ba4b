//! A real `redis-server` process for one test.
//!
//! Invariant: while a [`RedisServer`] is alive and not stopped, a server is
//! listening on its port; dropping the handle kills the process and removes
//! its directory.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tempfile::TempDir;

use crate::process::{PATIENCE, free_port, require_binary, wait_until};

const INSTALL_HINT: &str = "Install it with `sudo apt-get install redis-server`";

/// How a test wants its server configured.
#[derive(Clone, Debug, Default)]
pub struct RedisOptions {
    /// Keep an append-only file fsynced on every write, so that data survives
    /// a `kill -9` and [`RedisServer::restart`].
    pub durable: bool,
    /// Extra `--name value` arguments passed to `redis-server` verbatim.
    pub args: Vec<(String, String)>,
    /// Serve TLS only, with a certificate for `localhost` and 127.0.0.1
    /// signed by a throwaway CA ([`RedisServer::ca_cert`]).
    pub tls: bool,
}

/// A running `redis-server`, killed on drop.
#[derive(Debug)]
pub struct RedisServer {
    binary: PathBuf,
    port: u16,
    dir: TempDir,
    options: RedisOptions,
    child: Option<Child>,
}

impl RedisServer {
    /// Starts a non-persistent server on a free port.
    pub fn start() -> Self {
        Self::start_with(RedisOptions::default())
    }

    /// Starts a server with `options` on a free port.
    pub fn start_with(options: RedisOptions) -> Self {
        let binary = require_binary("redis-server", &["/usr/sbin"], INSTALL_HINT);
        let mut last_error = String::new();
        for _ in 0..5 {
            let mut server = RedisServer {
                binary: binary.clone(),
                port: free_port(),
                dir: tempfile::Builder::new()
                    .prefix("tally-redis-")
                    .tempdir()
                    .expect("temporary directory for redis-server"),
                options: options.clone(),
                child: None,
            };
            match server.spawn() {
                Ok(()) => return server,
                Err(e) => last_error = e,
            }
        }
        panic!("redis-server did not start after 5 attempts: {last_error}");
    }

    /// The TCP port the server listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A `redis://` URL for this server (`rediss://localhost` with TLS).
    pub fn url(&self) -> String {
        if self.options.tls {
            format!("rediss://localhost:{}/", self.port)
        } else {
            format!("redis://127.0.0.1:{}/", self.port)
        }
    }

    /// The CA certificate that signed the server's (TLS servers only).
    pub fn ca_cert(&self) -> Option<PathBuf> {
        self.options.tls.then(|| self.dir.path().join("ca.crt"))
    }

    /// The server's working directory (AOF and RDB files live here).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Kills the process with SIGKILL, as a crash would.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Whether the process is currently running.
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// Starts the server again on the same port and directory, after
    /// repairing its append-only file as an operator does after a crash
    /// (`redis-check-aof --fix`).
    ///
    /// Panics if it is already running or does not come up.
    pub fn start_again(&mut self) {
        assert!(self.child.is_none(), "redis-server is already running");
        repair_aof(self.dir.path());
        let mut last_error = String::new();
        // The old socket may linger briefly after a kill.
        for _ in 0..50 {
            match self.spawn() {
                Ok(()) => return,
                Err(e) => last_error = e,
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!(
            "redis-server did not restart on port {}: {last_error}",
            self.port
        );
    }

    /// Kills the server (SIGKILL) and starts it again on the same port.
    pub fn restart(&mut self) {
        self.kill();
        self.start_again();
    }

    /// Sends one inline command and returns the raw reply line, for harness
    /// use (tests use a real client).
    pub fn command(&self, inline: &str) -> std::io::Result<String> {
        raw_command(self.port, inline)
    }

    fn spawn(&mut self) -> Result<(), String> {
        let mut cmd = Command::new(&self.binary);
        if self.options.tls {
            make_certificates(self.dir.path())?;
            let d = self.dir.path();
            cmd.args(["--port", "0", "--tls-auth-clients", "no"])
                .arg("--tls-port")
                .arg(self.port.to_string())
                .arg("--tls-cert-file")
                .arg(d.join("server.crt"))
                .arg("--tls-key-file")
                .arg(d.join("server.key"))
                .arg("--tls-ca-cert-file")
                .arg(d.join("ca.crt"));
        } else {
            cmd.arg("--port").arg(self.port.to_string());
        }
        cmd.arg("--bind")
            .arg("127.0.0.1")
            .arg("--dir")
            .arg(self.dir.path())
            .arg("--save")
            .arg("")
            .arg("--daemonize")
            .arg("no")
            .arg("--logfile")
            .arg(self.dir.path().join("redis.log"));
        if self.options.durable {
            cmd.args(["--appendonly", "yes", "--appendfsync", "always"]);
        } else {
            cmd.args(["--appendonly", "no"]);
        }
        for (name, value) in &self.options.args {
            cmd.arg(format!("--{name}")).arg(value);
        }
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("spawn redis-server: {e}"))?;
        let port = self.port;
        let ca = self.ca_cert();
        let up = wait_until(PATIENCE, || {
            if let Ok(Some(_)) = child.try_wait() {
                return true;
            }
            answers_ping(port, ca.as_deref())
        });
        if let Ok(Some(status)) = child.try_wait() {
            let log =
                std::fs::read_to_string(self.dir.path().join("redis.log")).unwrap_or_default();
            return Err(format!("redis-server exited with {status}: {log}"));
        }
        if !up {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("redis-server did not answer PING on port {port}"));
        }
        // With an AOF, the server answers PING with -LOADING until loaded.
        wait_until(PATIENCE, || answers_ping(port, ca.as_deref()));
        self.child = Some(child);
        Ok(())
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Whether the server on `port` is up and loaded: PONG, or NOAUTH (a
/// password is set); over TLS (with `ca`) through `redis-cli --tls`.
fn answers_ping(port: u16, ca: Option<&Path>) -> bool {
    let reply = match ca {
        None => raw_command(port, "PING").unwrap_or_default(),
        Some(ca) => {
            let cli = require_binary(
                "redis-cli",
                &[],
                "Install it with `sudo apt-get install redis-tools`",
            );
            Command::new(cli)
                .args([
                    "--tls",
                    "-h",
                    "localhost",
                    "-p",
                    &port.to_string(),
                    "--cacert",
                ])
                .arg(ca)
                .arg("PING")
                .output()
                .map(|o| format!("+{}", String::from_utf8_lossy(&o.stdout).trim()))
                .unwrap_or_default()
        }
    };
    reply.starts_with("+PONG") || reply.starts_with("-NOAUTH")
}

/// A throwaway CA and a server certificate for localhost / 127.0.0.1, made
/// with the `openssl` command in `dir`.
fn make_certificates(dir: &Path) -> Result<(), String> {
    if dir.join("server.crt").exists() {
        return Ok(());
    }
    let openssl = require_binary(
        "openssl",
        &[],
        "Install it with `sudo apt-get install openssl`",
    );
    std::fs::write(
        dir.join("ext.cnf"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\n",
    )
    .map_err(|e| e.to_string())?;
    let steps: [&[&str]; 3] = [
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
            "-days",
            "2",
            "-subj",
            "/CN=tally-test-ca",
        ],
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            "/CN=localhost",
        ],
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.crt",
            "-days",
            "2",
            "-extfile",
            "ext.cnf",
        ],
    ];
    for args in steps {
        let out = Command::new(&openssl)
            .args(args)
            .current_dir(dir)
            .output()
            .map_err(|e| format!("openssl: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "openssl {args:?} failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    Ok(())
}

/// Sends an inline command over a fresh connection and reads the first reply
/// chunk.
pub(crate) fn raw_command(port: u16, inline: &str) -> std::io::Result<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    // Long enough for a loaded machine (a durable server fsyncs each write).
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    stream.write_all(inline.as_bytes())?;
    stream.write_all(b"\r\n")?;
    let mut buf = [0u8; 4096];
    let n = stream.read(&mut buf)?;
    Ok(String::from_utf8_lossy(&buf[..n]).into_owned())
}

/// Runs `redis-check-aof --fix` on the append-only file in `dir`, if there is
/// one, as Redis's documentation asks after a crash.
///
/// A `kill -9` can cut the server's last AOF write short, inside the
/// MULTI/EXEC that wraps a script's effects. Redis 7.0 (Debian's) and Valkey
/// before valkey-io/valkey#4342 then truncate only the torn command on the
/// next start, leaving a MULTI with no EXEC in the file; the start after that
/// merges those orphaned commands into the next transaction and applies a
/// write the client was never told succeeded. `redis-check-aof --fix` cuts
/// the file back to before the unfinished MULTI instead.
///
/// Panics if the tool is missing or cannot repair the file.
pub fn repair_aof(dir: &Path) {
    let manifest = dir.join("appendonlydir").join("appendonly.aof.manifest");
    if !manifest.exists() {
        return;
    }
    let tool = require_binary(
        "redis-check-aof",
        &["/usr/bin", "/usr/sbin"],
        "Install it with `sudo apt-get install redis-tools`",
    );
    let mut child = Command::new(&tool)
        .arg("--fix")
        .arg(&manifest)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("could not run {}: {e}", tool.display()));
    // It asks before it truncates.
    let _ = child.stdin.take().expect("piped stdin").write_all(b"y\n");
    let out = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("redis-check-aof failed: {e}"));
    assert!(
        out.status.success(),
        "redis-check-aof --fix {} failed ({}): {}{}",
        manifest.display(),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// How many times `command` (lower case, as `cmdstat_<command>` names it)
/// ran, from the text of `INFO commandstats`; 0 when it did not run (a
/// script's commands count).
pub fn command_calls(commandstats: &str, command: &str) -> u64 {
    commandstats
        .lines()
        .find_map(|l| {
            l.strip_prefix("cmdstat_")?
                .strip_prefix(command)?
                .strip_prefix(":calls=")
        })
        .and_then(|rest| rest.split(',').next()?.parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    /// A command's calls are read from its own line only.
    #[test]
    fn command_calls_reads_the_commands_own_line() {
        let info = "# Commandstats\r\n\
                    cmdstat_getset:calls=9,usec=1,usec_per_call=0.11\r\n\
                    cmdstat_get:calls=4,usec=2,usec_per_call=0.50\r\n";
        assert_eq!(super::command_calls(info, "get"), 4);
        assert_eq!(super::command_calls(info, "getset"), 9);
        assert_eq!(super::command_calls(info, "hmget"), 0);
    }
}
