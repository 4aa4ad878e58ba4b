//! `tally limit check` and `tally lock` end to end: real processes on a
//! SQLite file and on a real redis-server.

use std::path::Path;
use std::process::{Command, Output};

use tally_testkit::RedisServer;

use crate::support;
use support::{settings_file, tally};

fn run(cmd: &mut Command) -> (Option<i32>, String, String) {
    let Output {
        status,
        stdout,
        stderr,
    } = cmd.output().expect("run tally");
    (
        status.code(),
        String::from_utf8(stdout).unwrap(),
        String::from_utf8(stderr).unwrap(),
    )
}

fn check(dir: &Path, args: &[&str]) -> (Option<i32>, serde_json::Value) {
    let (code, out, err) = run(tally()
        .arg("--data-dir")
        .arg(dir)
        .args(["limit", "check"])
        .args(args)
        .arg("--json"));
    assert!(matches!(code, Some(0 | 3)), "{code:?}: {err}");
    (code, serde_json::from_str(&out).unwrap())
}

#[test]
fn limit_check_exits_3_when_limited_and_reads_policies() {
    let dir = tempfile::tempdir().unwrap();
    let gcra = [
        "k",
        "--algorithm",
        "gcra",
        "--limit",
        "2",
        "--window",
        "3600",
    ];
    let (code, d) = check(dir.path(), &gcra);
    assert_eq!(
        (code, d["allowed"].as_bool(), d["remaining"].as_u64()),
        (Some(0), Some(true), Some(1))
    );
    assert_eq!(check(dir.path(), &gcra).0, Some(0));
    let (code, d) = check(dir.path(), &gcra);
    assert_eq!(code, Some(3));
    assert_eq!(d["allowed"], false);
    // 2 per hour: the next unit is 30 minutes away.
    let retry = d["retry_after_ms"].as_u64().unwrap();
    assert!((1_799_000..=1_800_000).contains(&retry), "{d}");
    // A cost above the limit is never admitted, and says so.
    let (code, d) = check(
        dir.path(),
        &[
            "other",
            "--algorithm",
            "fixed",
            "--limit",
            "2",
            "--window",
            "60",
            "--cost",
            "3",
        ],
    );
    assert_eq!(
        (code, d["retry_after_ms"].clone()),
        (Some(3), serde_json::Value::Null)
    );
    // Named policies from the config file.
    let file = settings_file(
        dir.path(),
        &format!(
            "data_dir = {:?}\n[limits.policies.api]\nalgorithm = \"sliding\"\nlimit = 1\nwindow = 3600\non_error = \"closed\"\n",
            dir.path()
        ),
    );
    let policy = |key: &str| {
        run(tally().args([
            "--config",
            file.to_str().unwrap(),
            "limit",
            "check",
            key,
            "--policy",
            "api",
        ]))
    };
    let (code, out, _) = policy("p");
    assert_eq!(code, Some(0), "{out}");
    assert!(out.starts_with("allowed: 0 of 1 remaining"), "{out}");
    let (code, out, _) = policy("p");
    assert_eq!(code, Some(3));
    assert!(out.starts_with("limited:"), "{out}");
    // Bad input: exit 2 with a message naming the problem.
    for (args, message) in [
        (
            vec!["k", "--algorithm", "leaky", "--limit", "1", "--window", "1"],
            "expected fixed, sliding or gcra",
        ),
        (
            vec!["k", "--algorithm", "fixed", "--limit", "0", "--window", "1"],
            "a limit must be 1",
        ),
        (
            vec!["k", "--algorithm", "fixed", "--limit", "1"],
            "--policy NAME, or --algorithm",
        ),
        (
            vec!["k", "--algorithm", "fixed", "--limit", "1", "--window", "0"],
            "at least 1 ms",
        ),
        (vec!["k", "--policy", "nope"], "no policy \"nope\""),
    ] {
        let (code, _, err) = run(tally()
            .args(["--config", file.to_str().unwrap(), "limit", "check"])
            .args(&args));
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.contains(message), "{args:?}: {err}");
    }
    std::fs::write(
        &file,
        "[limits.policies.bad]\nalgorithm = \"fixed\"\nlimit = 1\nwindow = 1\nburst = 5\n",
    )
    .unwrap();
    let (code, _, err) = run(tally().args([
        "--config",
        file.to_str().unwrap(),
        "limit",
        "check",
        "k",
        "--policy",
        "bad",
    ]));
    assert_eq!(code, Some(2));
    assert!(
        err.contains("limits.policies.bad") && err.contains("only to the gcra"),
        "{err}"
    );
}

#[test]
fn lock_acquire_extend_release_on_redis() {
    let server = RedisServer::start();
    let url = server.url();
    let lock = |args: &[&str]| run(tally().args(["--redis", &url, "lock"]).args(args));
    let (code, out, err) = lock(&["acquire", "deploy", "--ttl", "30", "--json"]);
    assert_eq!(code, Some(0), "{err}");
    let lease: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (lease["status"].as_str(), lease["fence"].as_u64()),
        (Some("acquired"), Some(1))
    );
    let token = lease["token"].as_str().unwrap().to_owned();
    // Held: exit 3, even after waiting a little.
    let (code, out, _) = lock(&["acquire", "deploy", "--ttl", "30", "--wait", "0.2"]);
    assert_eq!(code, Some(3));
    assert!(out.starts_with("held"), "{out}");
    // Only the holder's token extends or releases.
    assert_eq!(
        lock(&["extend", "deploy", "wrong", "--ttl", "60"]).0,
        Some(3)
    );
    assert_eq!(lock(&["release", "deploy", "wrong"]).0, Some(3));
    assert_eq!(
        lock(&["extend", "deploy", &token, "--ttl", "60"]).0,
        Some(0)
    );
    assert_eq!(lock(&["release", "deploy", &token]).0, Some(0));
    let (code, out, _) = lock(&["acquire", "deploy", "--ttl", "30"]);
    assert_eq!(code, Some(0));
    assert!(out.trim().ends_with(" 2"), "the fence grew: {out}");
}
