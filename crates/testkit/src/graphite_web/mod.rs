//! The reference Graphite: graphite-web 1.1.10 on whisper files, and carbon
//! 1.1.10's line receiver, from PyPI.
//!
//! Tally's Graphite routes are checked against what graphite-web answers on
//! the same data, and its carbon listener against what carbon's own receiver
//! makes of the same lines. This module owns that reference side:
//!
//! - [`WhisperData`]: whisper files holding exactly the given slots, one
//!   archive per Tally precision, nothing propagated (`whisper.rs`);
//! - [`GraphiteWeb`]: graphite-web served by gunicorn on a free loopback
//!   port over a temporary storage directory holding those files, stopped on
//!   drop with its directory removed;
//! - [`carbon_reference_parse`] and [`carbon_reference_datagrams`]: carbon's
//!   TCP and UDP receivers on given lines (`carbon.rs`).
//!
//! All of it runs from one Python virtual environment, [`graphite_venv`],
//! holding the versions pinned in `scripts/requirements-graphite.txt`, which
//! `scripts/test` installs. Without it every entry point panics and says how
//! to install it; nothing is skipped. The installed packages are used as PyPI
//! ships them: the harness's own Python (`py/`: a settings module, a WSGI
//! entry point that puts back the two `inspect` functions graphite-web's
//! `/functions` needs on Python 3.11, carbon's driver) sits in the temporary
//! directory and patches nothing on disk.
//!
//! The server is made deterministic (see `py/tally_graphite_settings.py`): UTC,
//! DEBUG off, a dummy cache, the standard finder alone, no carbon-cache,
//! `PYTHONHASHSEED=0`. Its answers then depend on the request (give it `now`)
//! and the files only.

mod carbon;
mod whisper;

pub use carbon::{
    CARBON_REFERENCE_NOW, CarbonOutcome, carbon_reference_datagrams, carbon_reference_parse,
};
pub use whisper::{WhisperAggregation, WhisperData, WhisperSeries};

use std::fs::{self, File};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tempfile::TempDir;

use crate::http::{self, Response};
use crate::process::{free_port, stop_child, wait_until};

/// The path every route is served under, as Tally serves its Graphite routes
/// (Grafana's data source URL is `http://HOST:PORT/graphite`).
pub const URL_PREFIX: &str = "/graphite";

/// The harness's Python files, written next to each server or run.
const PY_FILES: [(&str, &str); 3] = [
    (
        "tally_graphite_settings.py",
        include_str!("py/tally_graphite_settings.py"),
    ),
    (
        "tally_graphite_wsgi.py",
        include_str!("py/tally_graphite_wsgi.py"),
    ),
    (
        "tally_carbon_lines.py",
        include_str!("py/tally_carbon_lines.py"),
    ),
];

/// The pins the virtual environment must hold, as the repository has them.
const PINS: &str = include_str!("../../../../scripts/requirements-graphite.txt");

/// Where the reference virtual environment is: `$TALLY_GRAPHITE_VENV`, else
/// `$CARGO_TARGET_DIR/graphite-venv`, else `target/graphite-venv` (relative
/// paths are taken from the workspace root, where `scripts/test` runs).
pub fn graphite_venv() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let path = if let Some(venv) = std::env::var_os("TALLY_GRAPHITE_VENV") {
        PathBuf::from(venv)
    } else if let Some(target) = std::env::var_os("CARGO_TARGET_DIR") {
        PathBuf::from(target).join("graphite-venv")
    } else {
        PathBuf::from("target/graphite-venv")
    };
    if path.is_relative() {
        root.join(path)
    } else {
        path
    }
}

/// The reference virtual environment's Python, checked as a server's is (present, with the
/// pins of this checkout), for a test that runs graphite-web's own code directly; `Err` says
/// what is missing and how to install it.
pub fn graphite_python() -> Result<PathBuf, String> {
    let venv = graphite_venv();
    check_venv(&venv)?;
    Ok(venv.join("bin").join("python"))
}

/// How to install the virtual environment at `venv`.
fn install_hint(venv: &Path) -> String {
    format!(
        "Run scripts/test, which installs it, or by hand from the repository root: \
         python3 -m venv {venv} && GRAPHITE_NO_PREFIX=1 \
         PIP_CONSTRAINT=$PWD/scripts/requirements-graphite.txt {venv}/bin/pip install \
         -r scripts/requirements-graphite.txt (or point TALLY_GRAPHITE_VENV at such a \
         virtual environment)",
        venv = venv.display()
    )
}

/// Makes `venv` a virtual environment holding the pinned packages, as
/// `scripts/test` does, unless it already holds them (the copy of the pins
/// it keeps matches): `python3 -m venv`, then `pip install` from PyPI with
/// the pins as requirements and as constraints of the sdists' builds, and
/// `GRAPHITE_NO_PREFIX=1`. For callers outside `scripts/test` (`tally bench
/// graphite` keeps one in its cache directory). Says why when it could not.
pub fn install_graphite_venv(venv: &Path) -> Result<(), String> {
    if check_venv(venv).is_ok()
        && fs::read_to_string(venv.join("requirements-graphite.txt")).is_ok_and(|p| p == PINS)
    {
        return Ok(());
    }
    let _ = fs::remove_dir_all(venv);
    if let Some(parent) = venv.parent() {
        fs::create_dir_all(parent).map_err(|e| format!("create {}: {e}", parent.display()))?;
    }
    let pins = tempfile::Builder::new()
        .prefix("requirements-graphite-")
        .suffix(".txt")
        .tempfile()
        .map_err(|e| format!("temporary pins file: {e}"))?;
    fs::write(pins.path(), PINS).map_err(|e| format!("write the pins: {e}"))?;
    let run = |cmd: &mut Command, what: &str| -> Result<(), String> {
        let out = cmd.output().map_err(|e| format!("{what}: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "{what} failed ({}): {}{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    };
    let installed = run(
        Command::new("python3").arg("-m").arg("venv").arg(venv),
        "python3 -m venv",
    )
    .and_then(|()| {
        run(
            Command::new(venv.join("bin").join("pip"))
                .args(["install", "--quiet", "--disable-pip-version-check", "-r"])
                .arg(pins.path())
                .env("GRAPHITE_NO_PREFIX", "1")
                .env("PIP_CONSTRAINT", pins.path()),
            "pip install graphite-web (is PyPI reachable?)",
        )
    })
    .and_then(|()| {
        fs::write(venv.join("requirements-graphite.txt"), PINS)
            .map_err(|e| format!("keep the pins in the virtual environment: {e}"))
    });
    if installed.is_err() {
        let _ = fs::remove_dir_all(venv);
    }
    installed
}

/// Checks that `venv` holds Python with the reference packages and the pins
/// of this checkout.
fn check_venv(venv: &Path) -> Result<(), String> {
    let python = venv.join("bin").join("python");
    if !python.is_file() {
        return Err(format!(
            "the reference Graphite's virtual environment is missing: no Python at {}. {}",
            python.display(),
            install_hint(venv)
        ));
    }
    if !venv.join("bin").join("gunicorn").is_file() {
        return Err(format!(
            "the reference Graphite's virtual environment at {} has no gunicorn. {}",
            venv.display(),
            install_hint(venv)
        ));
    }
    // scripts/test leaves a copy of the pins it installed.
    if let Ok(installed) = fs::read_to_string(venv.join("requirements-graphite.txt"))
        && installed != PINS
    {
        return Err(format!(
            "the reference Graphite's virtual environment at {} holds other pins than \
             scripts/requirements-graphite.txt. {}",
            venv.display(),
            install_hint(venv)
        ));
    }
    Ok(())
}

/// The virtual environment and a directory of the harness's Python files.
struct PythonEnv {
    venv: PathBuf,
    py_dir: PathBuf,
    // Holds `py_dir` when it is this value's own.
    _own_dir: Option<TempDir>,
}

impl PythonEnv {
    /// The environment at `venv` with the Python files in a directory of its
    /// own; panics with the install hint when the venv is missing.
    fn new(venv: &Path) -> Self {
        check_venv(venv).unwrap_or_else(|e| panic!("{e}"));
        let dir = tempfile::Builder::new()
            .prefix("tally-graphite-py-")
            .tempdir()
            .expect("temporary directory for the harness's Python");
        write_py_files(dir.path()).expect("write the harness's Python files");
        PythonEnv {
            venv: venv.to_path_buf(),
            py_dir: dir.path().to_path_buf(),
            _own_dir: Some(dir),
        }
    }

    fn python(&self) -> PathBuf {
        self.venv.join("bin").join("python")
    }

    fn script_path(&self, name: &str) -> PathBuf {
        self.py_dir.join(name)
    }

    /// `program` with an environment that makes Python's behaviour fixed:
    /// the harness's files first on the path, no user site, no bytecode
    /// written, a fixed hash seed, UTF-8, UTC.
    fn command(&self, program: &Path) -> Command {
        let mut cmd = Command::new(program);
        cmd.env("PYTHONPATH", &self.py_dir)
            .env_remove("PYTHONHOME")
            .env_remove("PYTHONSTARTUP")
            .env("PYTHONNOUSERSITE", "1")
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .env("PYTHONHASHSEED", "0")
            .env("PYTHONUTF8", "1")
            .env("TZ", "UTC")
            .env("DJANGO_SETTINGS_MODULE", "graphite.settings")
            .env("GRAPHITE_SETTINGS_MODULE", "tally_graphite_settings");
        cmd
    }
}

fn write_py_files(dir: &Path) -> std::io::Result<()> {
    for (name, text) in PY_FILES {
        fs::write(dir.join(name), text)?;
    }
    Ok(())
}

/// How a test or bench wants its graphite-web.
#[derive(Clone, Debug)]
pub struct GraphiteWebOptions {
    /// gunicorn worker processes (sync workers, one request at a time each).
    /// Default 1; a bench asks for one per core.
    pub workers: usize,
    /// The virtual environment; default [`graphite_venv`].
    pub venv: Option<PathBuf>,
    /// graphite-web's `ENFORCE_INPUT_VALIDATION`: when set, a function call
    /// whose arguments fail its parameter checks answers 400 instead of
    /// being run anyway. Default off, as graphite-web ships.
    pub enforce_input_validation: bool,
    /// graphite-web's `UTF8_METRICS`: when set, the target grammar takes
    /// any Unicode printable character in a path; when not, a path stops at
    /// its first non-ASCII character (so `café.x` renders nothing, though
    /// `/metrics/find` lists it). Default off, as graphite-web ships.
    pub utf8_metrics: bool,
    /// How long to wait for the server to answer. Default 180 s: importing
    /// Django and graphite on a loaded machine is slow, and readiness is
    /// polled, so a generous bound costs nothing when the machine is idle.
    pub startup_timeout: Duration,
}

impl Default for GraphiteWebOptions {
    fn default() -> Self {
        GraphiteWebOptions {
            workers: 1,
            venv: None,
            enforce_input_validation: false,
            utf8_metrics: false,
            startup_timeout: Duration::from_secs(180),
        }
    }
}

/// A running graphite-web 1.1.10 over a temporary whisper directory, stopped
/// on drop (gunicorn and its workers) with the directory removed.
///
/// Every route is under [`URL_PREFIX`] (`/graphite/render`,
/// `/graphite/metrics/find`, `/graphite/functions`, `/graphite/version`,
/// ...); the request methods take paths relative to it, as Grafana's data
/// source does: `get("/render?target=a.b&format=json")`.
#[derive(Debug)]
pub struct GraphiteWeb {
    dir: TempDir,
    port: u16,
    child: Option<Child>,
}

impl GraphiteWeb {
    /// Serves `data` with one worker; panics if it cannot (saying how to
    /// install what is missing).
    pub fn start(data: &WhisperData) -> Self {
        Self::start_with(data, GraphiteWebOptions::default())
    }

    /// Serves `data` with `options`; panics if it cannot.
    pub fn start_with(data: &WhisperData, options: GraphiteWebOptions) -> Self {
        Self::try_start_with(data, options).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Serves `data` with `options`, or says why it could not: the virtual
    /// environment is missing (with how to install it), or the server did
    /// not come up (with its logs).
    pub fn try_start_with(data: &WhisperData, options: GraphiteWebOptions) -> Result<Self, String> {
        let venv = options.venv.clone().unwrap_or_else(graphite_venv);
        check_venv(&venv)?;
        let dir = tempfile::Builder::new()
            .prefix("tally-graphite-web-")
            .tempdir()
            .map_err(|e| format!("temporary directory for graphite-web: {e}"))?;
        let root = dir.path();
        for sub in ["py", "conf", "log", "storage/whisper"] {
            fs::create_dir_all(root.join(sub)).map_err(|e| format!("create {sub}: {e}"))?;
        }
        write_py_files(&root.join("py")).map_err(|e| format!("write the Python files: {e}"))?;
        data.write_to(&root.join("storage/whisper"))
            .map_err(|e| format!("write the whisper files: {e}"))?;
        let env = PythonEnv {
            venv: venv.clone(),
            py_dir: root.join("py"),
            _own_dir: None,
        };
        make_database(&env, root)?;

        let mut server = GraphiteWeb {
            dir,
            port: 0,
            child: None,
        };
        // The port was free a moment ago; another process may take it first.
        let mut last_error = String::new();
        for _ in 0..5 {
            server.port = free_port();
            match server.spawn(&env, &options) {
                Ok(child) => {
                    server.child = Some(child);
                    return Ok(server);
                }
                Err(e) if e.contains("Connection in use") => last_error = e,
                Err(e) => return Err(e),
            }
        }
        Err(format!(
            "graphite-web did not start after 5 attempts: {last_error}"
        ))
    }

    fn spawn(&self, env: &PythonEnv, options: &GraphiteWebOptions) -> Result<Child, String> {
        let root = self.dir.path();
        let log = root.join("log");
        let output = File::create(log.join("gunicorn.out")).map_err(|e| e.to_string())?;
        let mut cmd = env.command(&env.venv.join("bin").join("gunicorn"));
        let flag = |on: bool| if on { "1" } else { "0" };
        cmd.env("TALLY_GRAPHITE_DIR", root)
            .env(
                "TALLY_GRAPHITE_ENFORCE_INPUT_VALIDATION",
                flag(options.enforce_input_validation),
            )
            .env("TALLY_GRAPHITE_UTF8_METRICS", flag(options.utf8_metrics))
            .current_dir(root)
            .arg("--bind")
            .arg(format!("127.0.0.1:{}", self.port))
            .arg("--workers")
            .arg(options.workers.max(1).to_string())
            .args(["--worker-class", "sync", "--preload"])
            // A long render on a loaded machine must not be cut off (gunicorn
            // kills a worker silent this long), and drop stops it quickly.
            .args(["--timeout", "300", "--graceful-timeout", "5"])
            .arg("--error-logfile")
            .arg(log.join("gunicorn.log"))
            .arg("tally_graphite_wsgi:application")
            .stdin(Stdio::null())
            .stdout(output.try_clone().map_err(|e| e.to_string())?)
            .stderr(output);
        // Left in the test's process group, so that whatever kills the test
        // (Ctrl-C, nextest's timeout) kills the server too.
        let mut child = cmd.spawn().map_err(|e| format!("spawn gunicorn: {e}"))?;
        let addr = self.addr();
        let ready = wait_until(options.startup_timeout, || {
            if let Ok(Some(_)) = child.try_wait() {
                return true;
            }
            http::request(addr, "GET", &format!("{URL_PREFIX}/version"), &[], &[])
                .is_ok_and(|r| r.status == 200 && r.text().trim() == "1.1.10")
        });
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("gunicorn exited with {status}: {}", self.logs()));
        }
        if !ready {
            stop(&mut child);
            return Err(format!(
                "graphite-web did not answer {URL_PREFIX}/version on port {} within {:?}: {}",
                self.port,
                options.startup_timeout,
                self.logs()
            ));
        }
        Ok(child)
    }

    /// The base URL, as a Grafana data source would have it:
    /// `http://127.0.0.1:PORT/graphite`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}{URL_PREFIX}", self.port)
    }

    /// The address gunicorn listens on.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// The TCP port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// gunicorn's (the master's) process id; its workers are its children.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The whisper directory graphite-web's finder reads.
    pub fn whisper_dir(&self) -> PathBuf {
        self.dir.path().join("storage/whisper")
    }

    /// Writes more series (or replaces files) while the server runs: it
    /// looks files up on every request.
    ///
    /// Panics if a file cannot be written or a series is not valid.
    pub fn write(&self, data: &WhisperData) {
        data.write_to(&self.whisper_dir())
            .unwrap_or_else(|e| panic!("write whisper files: {e}"));
    }

    /// gunicorn's log and graphite-web's own logs (exceptions, info), for a
    /// failure message.
    pub fn logs(&self) -> String {
        let log = self.dir.path().join("log");
        let mut text = String::new();
        for name in ["gunicorn.out", "gunicorn.log", "exception.log", "info.log"] {
            if let Ok(content) = fs::read_to_string(log.join(name))
                && !content.is_empty()
            {
                text.push_str(&format!("--- {name}\n{content}"));
            }
        }
        text
    }

    /// Sends one request; `path` is relative to [`URL_PREFIX`] (`/render?...`).
    /// `headers` go as given (not `Host`, `Connection` or `Content-Length`,
    /// which [`http::request`] adds). Panics if the server does not answer,
    /// with its logs.
    pub fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Response {
        let target = format!("{URL_PREFIX}{path}");
        http::request(self.addr(), method, &target, headers, body).unwrap_or_else(|e| {
            panic!(
                "graphite-web did not answer {method} {target}: {e}\n{}",
                self.logs()
            )
        })
    }

    /// `GET path` (relative to [`URL_PREFIX`]).
    pub fn get(&self, path: &str) -> Response {
        self.request("GET", path, &[], &[])
    }

    /// `POST path` with this body and `Content-Type`.
    pub fn post(&self, path: &str, content_type: &str, body: &[u8]) -> Response {
        self.request("POST", path, &[("Content-Type", content_type)], body)
    }

    /// `POST path` with a form body sent as given (`target=a.b&from=-1h`, or
    /// Grafana's raw `query=app.{a,b}.*`), as
    /// `application/x-www-form-urlencoded`.
    pub fn post_form(&self, path: &str, body: &str) -> Response {
        self.post(path, "application/x-www-form-urlencoded", body.as_bytes())
    }
}

impl Drop for GraphiteWeb {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            stop(&mut child);
        }
    }
}

/// Stops gunicorn: SIGQUIT, its quick shutdown (it kills its workers and
/// exits), then SIGKILL if it has not exited in 10 s (a worker left behind
/// then exits on its own once it sees its parent gone).
fn stop(child: &mut Child) {
    stop_child(child, "-QUIT", Duration::from_secs(10));
}

/// Gives the server under `root` its SQLite database (tags, profiles: what
/// `/metrics/find` and the tag routes touch). Django's migrations take a few
/// seconds, so their result is kept once in the virtual environment
/// (`tally-graphite.db`, made again with the environment) and copied.
fn make_database(env: &PythonEnv, root: &Path) -> Result<(), String> {
    let db = root.join("storage/graphite.db");
    let template = env.venv.join("tally-graphite.db");
    if fs::copy(&template, &db).is_ok() {
        return Ok(());
    }
    let out = env
        .command(&env.python())
        .env("TALLY_GRAPHITE_DIR", root)
        .current_dir(root)
        .args([
            "-m",
            "django",
            "migrate",
            "--run-syncdb",
            "--verbosity",
            "0",
        ])
        .output()
        .map_err(|e| format!("run {}: {e}", env.python().display()))?;
    if !out.status.success() || !db.is_file() {
        return Err(format!(
            "graphite-web's database migration failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    // Kept for the next server: written aside, then renamed into place, so a
    // concurrent test never copies half a file. Failing to keep it is fine.
    if let Ok(aside) = tempfile::NamedTempFile::new_in(&env.venv)
        && fs::copy(&db, aside.path()).is_ok()
    {
        let _ = aside.persist(&template);
    }
    Ok(())
}
