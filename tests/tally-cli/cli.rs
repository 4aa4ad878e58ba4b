//! The `tally` binary end to end: real processes, a real redis-server, a
//! SQLite file shared by several processes.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support;

use redis::Commands;
use support::{ok, run, settings_file, tally};
use tally_testkit::{RedisOptions, RedisServer};

fn with_dir(dir: &Path, args: &[&str]) -> Command {
    let mut cmd = tally();
    cmd.arg("--data-dir").arg(dir).args(args);
    cmd
}

/// A connection to the Redis at `url`.
fn connect(url: impl redis::IntoConnectionInfo) -> redis::Connection {
    redis::Client::open(url).unwrap().get_connection().unwrap()
}

/// Runs `tally --data-dir DIR <args>`, asserts success, returns stdout.
fn ok_in(dir: &Path, args: &[&str]) -> String {
    ok(&mut with_dir(dir, args))
}

/// Runs `tally --data-dir DIR <args>` to completion.
fn run_in(dir: &Path, args: &[&str]) -> std::process::Output {
    run(&mut with_dir(dir, args))
}

#[test]
fn ria_incr_leaves_the_books_keys() {
    let server = RedisServer::start();
    ok(tally().args([
        "--redis",
        &server.url(),
        "--layout",
        "ria",
        "incr",
        "hits",
        "3",
        "--at",
        "1336376415.5",
    ]));
    let mut conn = connect(server.url());
    let field: i64 = conn.hget("count:5:hits", "1336376415").unwrap();
    assert_eq!(field, 3);
    let hash: Vec<(String, String)> = conn.hgetall("count:5:hits").unwrap();
    assert_eq!(hash, vec![("1336376415".to_owned(), "3".to_owned())]);
    let score: Option<f64> = conn.zscore("known:", "5:hits").unwrap();
    assert_eq!(score, Some(0.0));
    // And it reads back through the CLI, as JSON for one precision.
    let json = ok(tally().args([
        "--redis",
        &server.url(),
        "--layout",
        "ria",
        "get",
        "hits",
        "--precision",
        "5",
        "--json",
    ]));
    assert_eq!(json.trim(), "[[1336376415,3]]");
}

#[test]
fn expiring_layout_keys_expire_and_the_counter_is_forgotten() {
    // Issue 10: every key that holds samples carries a TTL (the registries
    // do not), and with no cleaner running the data is gone a few seconds
    // after the last write, and so is the counter from `tally counters`.
    let server = RedisServer::start();
    let url = server.url();
    let args = |more: &[&str]| -> Vec<String> {
        ["--redis", url.as_str(), "--layout", "expiring"]
            .iter()
            .chain(more)
            .map(|s| s.to_string())
            .collect()
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let at = format!("{now:.1}");
    ok(tally().args(args(&["incr", "hits", "3", "--at", &at])));
    let mut conn = connect(url.clone());
    let keys: Vec<String> = conn.keys("*").unwrap();
    assert!(keys.len() >= 7 + 2, "{keys:?}");
    for key in &keys {
        let ttl: i64 = conn.ttl(key).unwrap();
        if key.ends_with(":names@e") || key.ends_with(":ends@e") {
            assert_eq!(ttl, -1, "{key} is a registry: no TTL");
        } else {
            assert!(ttl > 0, "{key} holds samples and must expire, TTL {ttl}");
        }
    }
    let json = ok(tally().args(args(&["get", "hits", "--precision", "5", "--json"])));
    assert_eq!(json.trim(), format!("[[{},3]]", now as u64 / 5 * 5));

    // One precision keeping two slices: gone a few seconds after the write.
    let short = |more: &[&str]| {
        let mut all = args(&["--precisions", "1", "--samples", "2"]);
        all.extend(more.iter().map(|s| s.to_string()));
        all
    };
    let brief_keys = |conn: &mut redis::Connection, brief: &str| -> Vec<String> {
        conn.keys::<_, Vec<String>>(format!("*:1@*:{brief}"))
            .unwrap()
    };
    // Listed and stored until it expires (by Redis's clock, more than 1 s
    // after the write): checked within 900 ms of it.
    let (brief, listed, stored) =
        tally_testkit::in_time_blocking(Duration::from_millis(900), |run| {
            let brief = format!("brief{run:02}");
            ok(tally().args(short(&["incr", &brief, "1"])));
            let listed = ok(tally().args(short(&["counters"])));
            let stored = brief_keys(&mut conn, &brief).len();
            (brief, listed, stored)
        });
    assert!(listed.contains(&brief), "{listed}");
    assert_eq!(stored, 1);
    let deadline = std::time::Instant::now() + tally_testkit::PATIENCE;
    while !brief_keys(&mut conn, &brief).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the chunk did not expire"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let json = ok(tally().args(short(&["get", &brief, "--precision", "1", "--json"])));
    assert_eq!(json.trim(), "[]");
    let listed = ok(tally().args(short(&["counters"])));
    assert!(!listed.contains(&brief), "{listed}");
    // The listing forgot it in the registries too.
    let shard = tally::backend::redis::layout::shard_of(&brief);
    let member: Option<f64> = conn
        .zscore(format!("{{tally:{shard}}}:names@e"), &brief)
        .unwrap();
    assert_eq!(member, None);
}

#[test]
fn ria_clean_once_at_a_given_now() {
    let server = RedisServer::start();
    let url = server.url();
    let base = ["--redis", url.as_str(), "--layout", "ria", "--samples", "2"];
    // 1 s slices at 100..=104; at now = 104.5 with 2 samples, 103 and 104 survive.
    for t in 100..=104 {
        ok(tally()
            .args(base)
            .args(["incr", "x", "1", "--at", &t.to_string()]));
    }
    ok(tally().args(base).args(["incr", "old", "1", "--at", "1"]));
    let report = ok(tally()
        .args(base)
        .args(["clean", "--once", "--now", "104.5", "--json"]));
    let report: serde_json::Value = serde_json::from_str(&report).unwrap();
    // x: 1 s slices 100-102; old: its 1 s slice at 1 and 5 s slice at 0.
    assert_eq!(report["samples_removed"], 3 + 2, "{report}");
    assert_eq!(report["counters_removed"], 2, "{report}");
    let mut conn = connect(server.url());
    let mut fields: Vec<String> = conn.hkeys("count:1:x").unwrap();
    fields.sort();
    assert_eq!(fields, vec!["103", "104"]);
    // "old" had one 1 s sample at 1 (gone) and a day slice at 0 that 2 days of
    // retention keeps: only its emptied members leave known:.
    let known: Vec<String> = conn.zrange("known:", 0, -1).unwrap();
    assert!(!known.contains(&"1:old".to_owned()), "{known:?}");
    assert!(known.contains(&"86400:old".to_owned()), "{known:?}");
    let names = ok(tally().args(base).args(["counters", "--json"]));
    assert_eq!(names.trim(), r#"["old","x"]"#);
}

#[test]
fn runs_on_the_embedded_store_with_no_redis() {
    let dir = tempfile::tempdir().unwrap();
    ok_in(dir.path(), &["incr", "hits", "--at", "1700000000"]);
    ok_in(dir.path(), &["incr", "hits", "4", "--at", "1700000000.9"]);
    ok_in(dir.path(), &["incr", "misses", "-2", "--at", "1700000001"]);
    let one = ok_in(dir.path(), &["get", "hits", "--precision", "60", "--json"]);
    assert_eq!(one.trim(), "[[1699999980,5]]");
    let all: serde_json::Value =
        serde_json::from_str(&ok_in(dir.path(), &["get", "hits", "--json"])).unwrap();
    let keys: Vec<&String> = all.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["1", "5", "60", "300", "3600", "18000", "86400"]);
    assert_eq!(all["1"], serde_json::json!([[1700000000, 5]]));
    let table = ok_in(dir.path(), &["get", "hits"]);
    assert!(
        table.contains("1 min") && table.contains("2023-11-14T22:13:00Z"),
        "{table}"
    );
    let names = ok_in(dir.path(), &["counters"]);
    assert_eq!(names, "hits\nmisses\n");
    let page = ok_in(
        dir.path(),
        &["counters", "--json", "--after", "hits", "--limit", "5"],
    );
    assert_eq!(page.trim(), r#"["misses"]"#);
    assert_eq!(
        ok_in(dir.path(), &["delete", "misses", "--json"]).trim(),
        r#"{"deleted":true}"#
    );
    assert_eq!(
        ok_in(dir.path(), &["counters", "--json"]).trim(),
        r#"["hits"]"#
    );
    assert!(dir.path().join("tally.sqlite3").exists());
}

#[test]
fn bad_input_exits_2_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let long = "x".repeat(300);
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["incr", ""], "must not be empty"),
        (vec!["incr", long.as_str()], "at most 256 characters"),
        (vec!["incr", "a\u{1}b"], "control characters"),
        (
            vec!["incr", "x", "1", "--at", "-3"],
            "before the Unix epoch",
        ),
        (vec!["incr", "x", "1", "--at", "inf"], "not a finite number"),
        (vec!["incr", "x", "-9223372036854775808"], "out of range"),
        (vec!["incr", "x", "99999999999999999999"], "invalid value"),
        (
            vec!["get", "x", "--precision", "7"],
            "configured: 1, 5, 60, 300, 3600, 18000, 86400",
        ),
        (vec!["--precisions", "5,5", "incr", "x"], "listed twice"),
        (vec!["--samples", "0", "incr", "x"], "samples must be"),
        (vec!["--layout", "nope", "incr", "x"], "unknown layout"),
    ];
    for (args, message) in cases {
        let out = run_in(dir.path(), &args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(message), "{args:?}: {stderr}");
    }
    ok_in(
        dir.path(),
        &["incr", "x", "9223372036854775807", "--at", "5"],
    );
    let out = run_in(dir.path(), &["incr", "x", "1", "--at", "100"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("would overflow"));
    assert_eq!(
        ok_in(dir.path(), &["counters", "--json"]).trim(),
        r#"["x"]"#
    );
    assert_eq!(
        ok_in(dir.path(), &["get", "x", "--precision", "1", "--json"]).trim(),
        "[[5,9223372036854775807]]"
    );
}

#[test]
fn several_processes_share_one_sqlite_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_owned();
    // Four "cron jobs" incrementing while another process reads and cleans.
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let path = path.clone();
            std::thread::spawn(move || {
                for i in 0..15 {
                    let at = (1_700_000_000 + (w * 15 + i) % 7).to_string();
                    ok_in(&path, &["incr", "jobs", "2", "--at", &at]);
                }
            })
        })
        .collect();
    let reader = {
        let path = path.clone();
        std::thread::spawn(move || {
            for _ in 0..10 {
                ok_in(&path, &["get", "jobs", "--json"]);
                ok_in(&path, &["clean", "--once", "--now", "1700000000"]);
            }
        })
    };
    for w in writers {
        w.join().unwrap();
    }
    reader.join().unwrap();
    let day = ok_in(&path, &["get", "jobs", "--precision", "86400", "--json"]);
    assert_eq!(day.trim(), "[[1699920000,120]]");
}

#[test]
fn configuration_layers_flags_over_env_over_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = settings_file(
        dir.path(),
        &format!(
            "data_dir = {:?}\nprecisions = [10, 60]\nsamples = 5\n",
            dir.path().join("data")
        ),
    );
    // The file sets the store and precisions.
    ok(tally().args([
        "--config",
        file.to_str().unwrap(),
        "incr",
        "c",
        "--at",
        "1000",
    ]));
    let all: serde_json::Value = serde_json::from_str(&ok(tally().args([
        "--config",
        file.to_str().unwrap(),
        "get",
        "c",
        "--json",
    ])))
    .unwrap();
    assert_eq!(
        all.as_object().unwrap().keys().collect::<Vec<_>>(),
        ["10", "60"]
    );
    // TALLY_PRECISIONS beats the file; a flag beats the variable.
    let env_json = ok(tally()
        .env("TALLY_CONFIG", &file)
        .env("TALLY_PRECISIONS", "60")
        .args(["get", "c", "--json"]));
    assert_eq!(env_json.trim(), r#"{"60":[[960,1]]}"#);
    let flag_json = ok(tally()
        .env("TALLY_CONFIG", &file)
        .env("TALLY_PRECISIONS", "60")
        .args(["--precisions", "10", "get", "c", "--json"]));
    assert_eq!(flag_json.trim(), r#"{"10":[[1000,1]]}"#);
    // An unknown setting in the file is an error naming it.
    std::fs::write(&file, "precisons = [1]\n").unwrap();
    let out = run(tally().args(["--config", file.to_str().unwrap(), "counters"]));
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("precisons"));
}

#[test]
fn clean_runs_until_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    ok_in(dir.path(), &["--samples", "1", "incr", "x", "--at", "10"]);
    let mut child = with_dir(
        dir.path(),
        &["--samples", "1", "--clean-interval", "1", "clean"],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    // The first pass runs at once and removes the stale counter.
    let gone = tally_testkit::wait_until(tally_testkit::PATIENCE, || {
        ok_in(dir.path(), &["counters", "--json"]).trim() == "[]"
    });
    assert!(gone, "the cleaner did not remove the stale counter");
    support::terminate(&mut child, "tally clean");
}

#[test]
fn redis_urls_carry_password_database_and_tls() {
    // A password and a database number in the URL.
    let server = RedisServer::start_with(RedisOptions {
        args: vec![("requirepass".into(), "s3cret".into())],
        ..RedisOptions::default()
    });
    let url = format!("redis://:s3cret@127.0.0.1:{}/3", server.port());
    ok(tally().args([
        "--redis", &url, "--layout", "ria", "incr", "pw", "2", "--at", "100",
    ]));
    let mut db3 = connect(url.as_str());
    let field: i64 = db3.hget("count:60:pw", "60").unwrap();
    assert_eq!(field, 2);
    let mut db0 = connect(format!("redis://:s3cret@127.0.0.1:{}/0", server.port()));
    assert!(
        !db0.exists::<_, bool>("count:60:pw").unwrap(),
        "written to db 0, not 3"
    );
    let wrong = format!("redis://:nope@127.0.0.1:{}/3", server.port());
    let out = run(tally().args(["--redis", &wrong, "incr", "pw"]));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("refused the credentials"), "{stderr}");
    assert!(
        !stderr.contains("nope"),
        "the password leaked into the message: {stderr}"
    );

    // rediss://, verified against the server's CA (SSL_CERT_FILE).
    let tls = RedisServer::start_with(RedisOptions {
        tls: true,
        ..RedisOptions::default()
    });
    let ca = tls.ca_cert().unwrap();
    ok(tally().env("SSL_CERT_FILE", &ca).args([
        "--redis",
        &tls.url(),
        "incr",
        "secure",
        "5",
        "--at",
        "100",
    ]));
    let json = ok(tally().env("SSL_CERT_FILE", &ca).args([
        "--redis",
        &tls.url(),
        "get",
        "secure",
        "--precision",
        "60",
        "--json",
    ]));
    assert_eq!(json.trim(), "[[60,5]]");
    // Without trusting that CA the connection is refused, not silently unverified.
    let out = run(tally().env("SSL_CERT_FILE", "/nonexistent").args([
        "--redis",
        &tls.url(),
        "incr",
        "secure",
    ]));
    assert!(!out.status.success());
}

/// Guards the start-up warning: a counter command on a Redis whose listpack
/// limit is below a hash's peak says so on stderr, and still does its work.
#[test]
fn warns_when_counter_hashes_would_leave_the_listpack_encoding() {
    let server = RedisServer::start();
    let url = server.url();
    let out = run(tally().args(["--redis", &url, "incr", "hits", "--at", "1000000"]));
    assert!(out.status.success());
    let quiet = String::from_utf8_lossy(&out.stderr);
    assert!(!quiet.contains("listpack"), "{quiet}");
    let out = run(tally().args([
        "--redis",
        &url,
        "--samples",
        "600",
        "incr",
        "hits",
        "--at",
        "1000000",
    ]));
    assert!(out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("hash-max-listpack-entries is 512") && err.contains("661"),
        "{err}"
    );
    let out = run(tally().args(["--redis", &url, "get", "hits", "--precision", "1", "--json"]));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "[[1000000,2]]");
}

/// `tally stats record` of issue 9's three values of `lat`, at one instant.
const RECORD_LAT: [&str; 8] = [
    "stats",
    "record",
    "lat",
    "10",
    "20",
    "30",
    "--at",
    "1336376415",
];

/// Issue 9's done-when: three values recorded at one instant read back as
/// one minute slice with count 3, sum 60, min 10, max 30, mean 20, stddev 10.
#[test]
fn stats_record_then_get_shows_the_books_slice() {
    let dir = tempfile::tempdir().unwrap();
    ok_in(dir.path(), &RECORD_LAT);
    let out = ok_in(
        dir.path(),
        &["stats", "get", "lat", "--precision", "60", "--json"],
    );
    let body: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    let slices = body["60"].as_array().unwrap();
    assert_eq!(slices.len(), 1, "{body}");
    let s = &slices[0];
    assert_eq!(s["start"], 1336376400);
    assert_eq!(
        (&s["count"], &s["sum"]),
        (&serde_json::json!(3), &serde_json::json!(60.0))
    );
    assert_eq!(
        (&s["min"], &s["max"]),
        (&serde_json::json!(10.0), &serde_json::json!(30.0))
    );
    assert_eq!(
        (&s["mean"], &s["stddev"]),
        (&serde_json::json!(20.0), &serde_json::json!(10.0))
    );
    let table = ok_in(dir.path(), &["stats", "get", "lat", "--precision", "60"]);
    assert!(table.contains("2012-05-07T07:40:00Z"), "{table}");
    let bad = run_in(dir.path(), &["stats", "record", "lat", "NaN"]);
    assert!(!bad.status.success());
    let top = ok_in(
        dir.path(),
        &[
            "stats",
            "top",
            "--by",
            "max",
            "--from",
            "1336376400",
            "--to",
            "1336376459",
            "--json",
        ],
    );
    assert!(top.contains("\"name\":\"lat\""), "{top}");
}

#[test]
fn migrate_moves_a_data_dir_onto_redis_and_a_rerun_counts_nothing_twice() {
    let dir = tempfile::tempdir().unwrap();
    let server = RedisServer::start();
    for (name, count) in [("pages:home", "4"), ("pages:about", "2")] {
        ok_in(dir.path(), &["incr", name, count, "--at", "1336376415"]);
    }
    ok_in(dir.path(), &RECORD_LAT);
    // Daily statistics and time series (at the system's now: Redis
    // expires time series by its own clock).
    ok_in(dir.path(), &["daily", "incr", "ad-1", "5"]);
    ok_in(dir.path(), &["ts", "incr", "project", "42", "7"]);
    ok_in(
        dir.path(),
        &["ts", "record", "project.users", "42", "ann", "bob", "ann"],
    );
    let data = dir.path().to_str().unwrap();
    let migrate = |json: bool| {
        let mut cmd = tally();
        cmd.args(["migrate", "--from", data, "--to", &server.url()]);
        if json {
            cmd.arg("--json");
        }
        ok(&mut cmd)
    };
    let first: serde_json::Value = serde_json::from_str(migrate(true).trim()).unwrap();
    assert_eq!(first["spaces"][0]["space"], "counters", "{first}");
    assert_eq!(first["spaces"][0]["series"], 2, "{first}");
    assert_eq!(first["spaces"][0]["batches_written"], 1, "{first}");
    assert_eq!(first["spaces"][1]["series"], 1, "{first}");
    assert_eq!(first["daily"]["series"], 1, "{first}");
    assert_eq!(first["daily"]["slices"], 1, "{first}");
    assert_eq!(first["time_series"]["series"], 2, "{first}");
    assert_eq!(first["time_series"]["batches_written"], 1, "{first}");
    // Run again: every batch is already there; the summary says so.
    let again = migrate(false);
    assert!(
        again.contains("counters  2 series")
            && again.contains("0 batches written, 1 already there")
            && again.contains("daily     1 series, 1 slices: 0 batches written, 1 already there")
            && again.contains("time_series 2 series"),
        "{again}"
    );
    let on_redis = |args: &[&str]| {
        let mut cmd = tally();
        cmd.args(["--redis", &server.url()]).args(args);
        ok(&mut cmd)
    };
    let total: serde_json::Value =
        serde_json::from_str(on_redis(&["daily", "total", "ad-1", "--json"]).trim()).unwrap();
    assert_eq!(total["total"], 5, "{total}");
    let sums: serde_json::Value =
        serde_json::from_str(on_redis(&["ts", "sums", "project", "42", "--json"]).trim()).unwrap();
    assert_eq!(sums["totals"][0]["total"], 7, "{sums}");
    let distinct: serde_json::Value =
        serde_json::from_str(on_redis(&["ts", "distinct", "project.users", "42", "--json"]).trim())
            .unwrap();
    assert_eq!(distinct["totals"][0]["total"], 2, "{distinct}");
    let get = |name: &str| {
        ok(tally().args([
            "--redis",
            &server.url(),
            "get",
            name,
            "--precision",
            "86400",
            "--json",
        ]))
    };
    assert_eq!(get("pages:home").trim(), "[[1336348800,4]]");
    assert_eq!(get("pages:about").trim(), "[[1336348800,2]]");
    let stat = ok(tally().args([
        "--redis",
        &server.url(),
        "stats",
        "get",
        "lat",
        "--precision",
        "60",
        "--json",
    ]));
    let body: serde_json::Value = serde_json::from_str(stat.trim()).unwrap();
    assert_eq!(body["60"][0]["count"], 3, "{body}");
    // A store that is none of the forms is refused, naming the flag.
    let bad = run(tally().args(["migrate", "--from", "ftp://x", "--to", data]));
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("--from") && err.contains("ftp"), "{err}");
}

#[test]
fn incr_from_cron_alone_keeps_bounded_data_on_the_embedded_store() {
    // No cleaner ever runs: each `tally incr` that opens a new slice trims
    // what fell out of the window ending with it.
    let dir = tempfile::tempdir().unwrap();
    let opts = ["--precisions", "1,5", "--samples", "4"];
    for t in 0..40u64 {
        let at = (1_336_376_400 + t).to_string();
        let mut cmd = with_dir(dir.path(), &opts);
        ok(cmd.args(["incr", "cron", "1", "--at", &at]));
    }
    let get = |p: &str| {
        let mut cmd = with_dir(dir.path(), &opts);
        ok(cmd.args(["get", "cron", "--precision", p, "--json"]))
    };
    assert_eq!(
        get("1").trim(),
        "[[1336376436,1],[1336376437,1],[1336376438,1],[1336376439,1]]"
    );
    assert_eq!(
        get("5").trim(),
        "[[1336376420,5],[1336376425,5],[1336376430,5],[1336376435,5]]"
    );
    let db = rusqlite::Connection::open(dir.path().join("tally.sqlite3")).unwrap();
    let rows: i64 = db
        .query_row("SELECT count(*) FROM tally_sample", [], |r| r.get(0))
        .unwrap();
    assert_eq!(rows, 8, "4 slices at each of 2 precisions, nothing more");
}

/// Issue 9: `tally sets add` counts each member once per slice; `get` shows
/// the slices and the union of everything stored; `delete` removes the set.
#[test]
fn sets_add_get_and_delete() {
    let dir = tempfile::tempdir().unwrap();
    let add = |members: &[&str], at: &str| {
        let mut args = vec!["sets", "add", "users"];
        args.extend_from_slice(members);
        args.extend_from_slice(&["--at", at]);
        ok_in(dir.path(), &args);
    };
    add(&["ann", "bob", "ann"], "1336376415");
    add(&["bob", "cy"], "1336376475");
    let out = ok_in(
        dir.path(),
        &["sets", "get", "users", "--precision", "60", "--json"],
    );
    let body: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(
        body["precisions"]["60"],
        serde_json::json!([
            { "start": 1336376400, "count": 2 },
            { "start": 1336376460, "count": 2 }
        ]),
        "{body}"
    );
    assert_eq!(body["union"]["count"], 3, "{body}");
    let table = ok_in(dir.path(), &["sets", "get", "users"]);
    assert!(table.contains("users: 3 distinct"), "{table}");
    assert!(table.contains("2012-05-07T07:41:00Z"), "{table}");
    let bad = run_in(dir.path(), &["sets", "add", "users", ""]);
    assert!(!bad.status.success());
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("must not be empty"),
        "{bad:?}"
    );
    let deleted = ok_in(dir.path(), &["sets", "delete", "users", "--json"]);
    assert_eq!(deleted.trim(), r#"{"deleted":true}"#);
    let gone = ok_in(dir.path(), &["sets", "get", "users"]);
    assert!(gone.contains("users: 0 distinct"), "{gone}");
}
