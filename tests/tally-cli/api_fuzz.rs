//! The API document is the contract: schemathesis, a property-based fuzzer
//! driven by `/openapi.json`, runs every one of its checks against the real
//! `tally serve` and must find nothing. It sends what the document allows
//! (which must not be refused) and what it refuses (which must not be
//! accepted), other methods (405 with `Allow`), requests without the token
//! (401), and checks every status, header, content type and body against
//! the document.
//!
//! Three servers: SQLite in the default aggregated mode (202), a real
//! redis-server in exact mode (200), and SQLite with a token that writes
//! and reads need. Generation is deterministic (no example database, no
//! randomness), 30 examples per operation, so CI sends the same requests
//! every run. The only allowances are in `tests/fuzz/schemathesis.toml`,
//! each one explained there and stated in the document.
//!
//! schemathesis comes from PyPI, pinned in `scripts/requirements-fuzz.txt`;
//! `scripts/test` installs it into `<target dir>/fuzz-venv`. Without it the
//! tests fail and say how to install it (they are never skipped).

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Command;

/// Examples per operation and phase.
const EXAMPLES: &str = "30";
const TOKEN: &str = "fuzz-token-0123456789";

/// The schemathesis executable: `$TALLY_SCHEMATHESIS`, else the one
/// `scripts/test` installs under the target directory.
fn schemathesis() -> PathBuf {
    // CARGO_BIN_EXE_tally is <target dir>/<profile>/tally.
    let venv = Path::new(env!("CARGO_BIN_EXE_tally"))
        .parent()
        .and_then(Path::parent)
        .expect("the binary sits in <target dir>/<profile>/")
        .join("fuzz-venv");
    let exe = std::env::var_os("TALLY_SCHEMATHESIS")
        .map_or_else(|| venv.join("bin").join("schemathesis"), PathBuf::from);
    assert!(
        exe.is_file(),
        "schemathesis is not installed at {}. Run scripts/test, which installs it, or by hand: \
         python3 -m venv {venv} && {venv}/bin/pip install -r scripts/requirements-fuzz.txt \
         (or point TALLY_SCHEMATHESIS at a schemathesis executable)",
        exe.display(),
        venv = venv.display(),
    );
    exe
}

/// Runs schemathesis with all checks against the server at `base`, with
/// `extra` arguments; fails with its report when it finds anything.
fn fuzz(base: &str, extra: &[&str]) {
    let workdir = tempfile::tempdir().unwrap();
    let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz/schemathesis.toml");
    let out = Command::new(schemathesis())
        .current_dir(workdir.path())
        .arg("--config-file")
        .arg(&config)
        .arg("run")
        .arg(format!("{base}/openapi.json"))
        .args(["--max-examples", EXAMPLES])
        .args(["--generation-deterministic", "--workers", "1"])
        .args(["--no-color", "--output-sanitize", "false"])
        .args(extra)
        .env("NO_COLOR", "1")
        .output()
        .expect("run schemathesis");
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "schemathesis found mismatches between /openapi.json and the server \
         (exit {}):\n{report}",
        out.status
    );
    // A run that tested nothing must not pass for a clean one.
    let figure = |label: &str| {
        report
            .lines()
            .find_map(|l| l.trim().strip_prefix(label))
            .map(|v| v.trim().to_owned())
            .unwrap_or_else(|| panic!("no {label:?} in the report:\n{report}"))
    };
    let (selected, tested) = (figure("Selected:"), figure("Tested:"));
    let (chosen, all) = selected.split_once('/').expect("Selected: N/M");
    assert!(
        chosen == all && tested == all && tested != "0",
        "schemathesis did not test every operation (selected {selected}, tested {tested}):\n{report}"
    );
}

#[test]
fn sqlite_server_matches_its_document() {
    let dir = tempfile::tempdir().unwrap();
    let s = support::serve(&["--data-dir", dir.path().to_str().unwrap()], &[]);
    fuzz(&s.base, &[]);
}

#[test]
fn redis_server_matches_its_document() {
    let redis = tally_testkit::RedisServer::start();
    let s = support::serve(&["--redis", &redis.url()], &["--write-mode", "exact"]);
    fuzz(&s.base, &[]);
}

/// With a token for writes and reads: each operation is also sent without
/// it and with a wrong one, and must answer 401 as documented.
#[test]
fn token_server_matches_its_document() {
    let dir = tempfile::tempdir().unwrap();
    let s = support::serve(
        &["--data-dir", dir.path().to_str().unwrap()],
        &["--token", TOKEN, "--protect-reads"],
    );
    fuzz(&s.base, &["-H", &format!("Authorization: Bearer {TOKEN}")]);
}
