//! `tally ts` and `tally daily` end to end: real processes on a SQLite
//! file, a real redis-server and a real Redis Cluster.

use std::process::Command;

use tally_testkit::{RedisCluster, RedisServer};

use crate::support;

fn tally(backend: &[&str]) -> Command {
    let mut cmd = support::tally();
    cmd.args(backend);
    cmd
}

fn ok(backend: &[&str], args: &[&str]) -> String {
    support::ok(tally(backend).args(args))
}

fn json(backend: &[&str], args: &[&str]) -> serde_json::Value {
    serde_json::from_str(&ok(backend, args)).unwrap()
}

/// Runs `command` on the embedded store in memory with `setting` (a global
/// flag and its value): whether it succeeded, and its stderr.
fn on_the_embedded_store(setting: [&str; 2], command: &[&str]) -> (bool, String) {
    let out = tally(&["--data-dir", ":memory:", setting[0], setting[1]])
        .args(command)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.success(), stderr)
}

/// Asserts that the embedded store refuses `setting`, a Redis-only one,
/// naming it.
fn embedded_refuses(setting: [&str; 2], command: &[&str]) {
    let (succeeded, stderr) = on_the_embedded_store(setting, command);
    assert!(!succeeded);
    let [flag, value] = setting;
    let message = format!("{flag} {value} only applies to a Redis backend");
    assert!(stderr.contains(&message), "{stderr}");
}

/// The same session of commands on any backend.
fn both_stores(backend: &[&str]) {
    ok(backend, &["ts", "incr", "group", "42", "3"]);
    ok(backend, &["ts", "incr", "group", "42", "--at", "-20s"]);
    ok(backend, &["ts", "incr", "group", "7"]);
    let sums = json(
        backend,
        &["ts", "sums", "group", "42", "7", "--start", "-1m", "--json"],
    );
    assert_eq!(sums["rollup"], 10);
    assert_eq!(
        sums["totals"][0],
        serde_json::json!({"key": "42", "total": 4})
    );
    assert_eq!(sums["totals"][1]["total"], 1);
    let hourly = json(
        backend,
        &[
            "ts", "get", "group", "42", "--start", "-1h", "--rollup", "3600", "--json",
        ],
    );
    let points = hourly["series"][0]["points"].as_array().unwrap();
    assert_eq!(
        points.iter().map(|p| p[1].as_i64().unwrap()).sum::<i64>(),
        4
    );
    ok(backend, &["ts", "record", "group", "42", "u1", "u2", "u3"]);
    ok(backend, &["ts", "record", "group", "7", "u3", "u4"]);
    let union = json(
        backend,
        &["ts", "distinct", "group", "42", "7", "--union", "--json"],
    );
    assert_eq!(union["distinct"], 4);
    ok(
        backend,
        &["ts", "hit", "group", "42", "release-1=5", "release-2"],
    );
    let top = json(backend, &["ts", "top", "group", "42", "-n", "1", "--json"]);
    assert_eq!(
        top["items"],
        serde_json::json!([{"item": "release-1", "count": 5}])
    );
    ok(backend, &["ts", "merge", "group", "42", "7"]);
    let sums = json(backend, &["ts", "sums", "group", "42", "7", "--json"]);
    assert_eq!(sums["totals"][0]["total"], 5);
    assert_eq!(sums["totals"][1]["total"], 0);
    ok(backend, &["ts", "delete", "group", "42"]);
    let sums = json(backend, &["ts", "sums", "group", "42", "--json"]);
    assert_eq!(sums["totals"][0]["total"], 0);

    ok(backend, &["daily", "incr", "314"]);
    let counted = json(backend, &["daily", "incr", "314", "2", "--json"]);
    assert_eq!(counted["day_count"], 3);
    assert_eq!(counted["total"], 3);
    let last = json(backend, &["daily", "last", "314", "3", "--json"]);
    let counts: Vec<i64> = last
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["count"].as_i64().unwrap())
        .collect();
    assert_eq!(counts, vec![0, 0, 3]);
    let today = last[2]["day"].as_str().unwrap().to_owned();
    assert_eq!(ok(backend, &["daily", "day", "314", &today]).trim(), "3");
    assert_eq!(ok(backend, &["daily", "today", "314"]).trim(), "3");
    assert_eq!(
        json(backend, &["daily", "total", "314", "--json"])["total"],
        3
    );
    // Bad input exits 2 and writes nothing.
    let out = tally(backend)
        .args(["daily", "incr", "{advert:1}"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = tally(backend)
        .args(["ts", "incr", "group", "1", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

// The daily counts are today's by the CLI's clock: each test runs again,
// on a fresh store, when the UTC day turned during it.

#[test]
fn both_stores_on_sqlite() {
    tally_testkit::on_one_day(|| {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path().to_str().unwrap().to_owned();
        both_stores(&["--data-dir", &dir]);
    });
}

#[test]
fn both_stores_on_redis() {
    tally_testkit::on_one_day(|| {
        let server = RedisServer::start();
        let url = server.url();
        both_stores(&["--redis", &url]);
        let mut conn = redis::Client::open(url).unwrap().get_connection().unwrap();
        assert_eq!(seed_total(&mut conn, "314"), 3);
    });
}

/// `--daily-total running`: the same commands answer the same, the total
/// sits in `{advert:<id>}:stats`, and the default total reads it and takes
/// it back into the views hash; the embedded store refuses the setting.
#[test]
fn both_stores_on_redis_with_the_running_daily_total() {
    embedded_refuses(["--daily-total", "running"], &["daily", "incr", "314"]);
    let (_, stderr) = on_the_embedded_store(["--daily-total", "sum"], &["daily", "incr", "314"]);
    assert!(stderr.contains("unknown daily total \"sum\""), "{stderr}");
    tally_testkit::on_one_day(|| {
        let server = RedisServer::start();
        let url = server.url();
        both_stores(&["--redis", &url, "--daily-total", "running"]);
        let mut conn = redis::Client::open(url.as_str())
            .unwrap()
            .get_connection()
            .unwrap();
        let total: i64 = redis::cmd("HGET")
            .arg("{advert:314}:stats")
            .arg("total")
            .query(&mut conn)
            .unwrap();
        assert_eq!(total, 3);
        let counted = json(&["--redis", &url], &["daily", "incr", "314", "--json"]);
        assert_eq!(counted["total"], 4);
        assert_eq!(seed_total(&mut conn, "314"), 4);
    });
}

/// Seed 004's total script, verbatim (`getTotalViewsCount`).
const SEED_TOTAL: &str = "local totalView = 0
local dayViews = redis.call('hvals', KEYS[1])
for _, dayView in ipairs(dayViews) do
    totalView = totalView + tonumber(dayView)
end
return totalView";

fn seed_total(conn: &mut redis::Connection, entity: &str) -> i64 {
    redis::cmd("EVAL")
        .arg(SEED_TOTAL)
        .arg(1)
        .arg(format!("{{advert:{entity}}}:views"))
        .query(conn)
        .unwrap()
}

/// Regression: `tally daily total` said 0 where the article's own total
/// said 9, and 1 after one more Tally write.
#[test]
fn daily_reads_agree_with_the_seed_code() {
    tally_testkit::on_one_day(daily_reads_agree_once);
}

/// One run of [`daily_reads_agree_with_the_seed_code`], on a server of its
/// own.
fn daily_reads_agree_once() {
    let server = RedisServer::start();
    let url = server.url();
    let backend = ["--redis", url.as_str()];
    let mut conn = redis::Client::open(url.as_str())
        .unwrap()
        .get_connection()
        .unwrap();
    let today = tally::Day::of(tally::Clock::now(&tally::SystemClock), 0);
    // The article's incrementViewsCount: 9 views over three days.
    for (ago, n) in [(0, 4), (1, 3), (2, 2)] {
        let _: i64 = redis::cmd("HINCRBY")
            .arg("{advert:314}:views")
            .arg(today.plus(-ago).yyyymmdd())
            .arg(n)
            .query(&mut conn)
            .unwrap();
    }
    assert_eq!(seed_total(&mut conn, "314"), 9);
    assert_eq!(ok(&backend, &["daily", "total", "314"]).trim(), "9");
    let counted = json(&backend, &["daily", "incr", "314", "--json"]);
    assert_eq!(
        (&counted["day_count"], &counted["total"]),
        (&5.into(), &10.into())
    );
    assert_eq!(seed_total(&mut conn, "314"), 10);
    assert_eq!(ok(&backend, &["daily", "total", "314"]).trim(), "10");
    // The article's getViewStats (one HMGET of the dates) and getTodayViewsCount.
    let dates: Vec<u32> = (0..3).rev().map(|i| today.plus(-i).yyyymmdd()).collect();
    let seed_days: Vec<Option<i64>> = redis::cmd("HMGET")
        .arg("{advert:314}:views")
        .arg(&dates)
        .query(&mut conn)
        .unwrap();
    assert_eq!(seed_days, vec![Some(2), Some(3), Some(5)]);
    let last = json(&backend, &["daily", "last", "314", "3", "--json"]);
    let counts: Vec<Option<i64>> = last
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["count"].as_i64())
        .collect();
    assert_eq!(counts, seed_days);
    assert_eq!(ok(&backend, &["daily", "today", "314"]).trim(), "5");
    let yesterday = today.plus(-1).to_string();
    assert_eq!(
        ok(&backend, &["daily", "day", "314", &yesterday]).trim(),
        "3"
    );
}

#[test]
fn both_stores_and_counters_on_a_cluster_with_wait() {
    tally_testkit::on_one_day(|| {
        let cluster = RedisCluster::start();
        let urls = cluster.urls().join(",");
        let backend = ["--redis-cluster", urls.as_str(), "--wait-replicas", "1"];
        both_stores(&backend);
        ok(&backend, &["incr", "hits", "5"]);
        let got = json(&backend, &["get", "hits", "--precision", "86400", "--json"]);
        assert_eq!(got[0][1], 5);
    });
}

/// `--layout compact`: a counter is one hash on the server, read back by
/// the CLI at every precision; `tally migrate` moves it into the default
/// layout and back.
#[test]
fn the_compact_layout_keeps_one_hash_per_counter() {
    // A Redis key layout: the embedded store refuses it.
    embedded_refuses(["--layout", "compact"], &["incr", "x"]);
    let server = RedisServer::start();
    let url = server.url();
    let compact = ["--redis", url.as_str(), "--layout", "compact"];
    ok(&compact, &["incr", "ad:1", "3"]);
    let mut conn = redis::Client::open(url.as_str())
        .unwrap()
        .get_connection()
        .unwrap();
    let mut keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut conn).unwrap();
    keys.retain(|k| !k.contains(":writer:"));
    keys.sort();
    let shard = tally::backend::redis::layout::shard_of("ad:1");
    assert_eq!(
        keys,
        vec![
            format!("{{tally:{shard}}}:@:ad:1"),
            format!("{{tally:{shard}}}:names")
        ]
    );
    for p in ["1", "60", "86400"] {
        let got = json(&compact, &["get", "ad:1", "--precision", p, "--json"]);
        assert!(got.to_string().contains('3'), "{p}: {got}");
    }
    let other = RedisServer::start();
    let moved = ok(
        &[],
        &[
            "migrate",
            "--from",
            url.as_str(),
            "--from-layout",
            "compact",
            "--to",
            other.url().as_str(),
            "--json",
        ],
    );
    assert!(moved.contains("\"counters\""), "{moved}");
    let other_url = other.url();
    let default = ["--redis", other_url.as_str()];
    let got = json(&default, &["get", "ad:1", "--precision", "60", "--json"]);
    assert!(got.to_string().contains('3'), "{got}");
}
