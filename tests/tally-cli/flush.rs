//! `tally flush` as a real process, killed with SIGKILL at random moments
//! and while it holds a claim, and restarted many times while writers keep
//! buffering: SQL totals must still equal exactly what was acknowledged.
//! On Redis + PostgreSQL and on SQLite + SQLite.

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::Duration;

use tally::buffers::{Buffers, RowKey, Sink, TableConfig, Tables, Update, open_sink};
use tally::{Backend, BackendConfig, SystemClock};
use tally_testkit::{PostgresServer, RedisServer};

use crate::support;
use support::{ok, settings_file, sqlite_sink, tally};

const ROWS: usize = 20;
const WRITERS: i64 = 4;
const KILLS: usize = 25;

fn tables() -> Tables {
    Tables::new(&[TableConfig {
        name: "groups".into(),
        key: vec!["id".into()],
        counters: vec!["times_seen".into(), "users".into()],
        last_write: vec![],
    }])
    .unwrap()
}

const TABLES_TOML: &str = r#"
[[buffers.tables]]
name = "groups"
key = ["id"]
counters = ["times_seen", "users"]
"#;

/// A config file under `dir`: SQLite data in `dir/data`, a SQLite sink with
/// the `groups` table, `extra` lines in `[buffers]`. Returns (file, sink URL).
fn sqlite_config(dir: &Path, extra: &str) -> (std::path::PathBuf, String) {
    let url = sqlite_sink(dir);
    let file = settings_file(
        dir,
        &format!(
            "data_dir = {:?}\n[buffers]\nsink = {url:?}\n{extra}{TABLES_TOML}",
            dir.join("data")
        ),
    );
    (file, url)
}

/// A deterministic xorshift, so every run kills at the same offsets.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

async fn kill_and_restart(config_file: &Path, backend: BackendConfig, sink: Arc<dyn Sink>) {
    let store = Backend::open(&backend)
        .await
        .unwrap()
        .buffer_store()
        .await
        .unwrap();
    let buffers = Buffers::new(store, tables(), Arc::new(SystemClock));
    let acked: Arc<Vec<AtomicI64>> = Arc::new((0..ROWS).map(|_| AtomicI64::new(0)).collect());
    let users: Arc<Vec<AtomicI64>> = Arc::new((0..ROWS).map(|_| AtomicI64::new(0)).collect());
    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for w in 0..WRITERS {
        let (buffers, acked, users, stop) =
            (buffers.clone(), acked.clone(), users.clone(), stop.clone());
        writers.push(tokio::spawn(async move {
            let mut i = w as usize;
            while !stop.load(Ordering::SeqCst) {
                let row = i % ROWS;
                buffers
                    .incr(
                        &Update::new("groups")
                            .key("id", row)
                            .add("times_seen", 1)
                            .add("users", w + 1),
                    )
                    .await
                    .unwrap();
                // Counted only once acknowledged.
                acked[row].fetch_add(1, Ordering::SeqCst);
                users[row].fetch_add(w + 1, Ordering::SeqCst);
                i += 7;
            }
        }));
    }
    let written = || acked.iter().map(|a| a.load(Ordering::SeqCst)).sum::<i64>();
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let mut mid_claim = 0;
    for kill in 0..KILLS {
        // The writers get through 1/25 of the load the check below asks
        // for before each flusher starts, however slow the machine is.
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while written() < (kill as i64 + 1) * 41 {
            assert!(std::time::Instant::now() < deadline, "the writers stalled");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let mut child = tally()
            .arg("--config")
            .arg(config_file)
            .arg("flush")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        if kill % 2 == 0 {
            tokio::time::sleep(Duration::from_millis(40 + rng.next() % 260)).await;
        } else {
            // Every other kill lands while a claim is held, however slowly a
            // loaded machine runs the flusher: once a claim shows, the
            // flusher is stopped (SIGSTOP) where it is, and killed so if the
            // claim is still held; if it was let go meanwhile, the flusher
            // goes on and the wait starts again.
            let deadline = std::time::Instant::now() + tally_testkit::PATIENCE;
            loop {
                while buffers.stats().await.unwrap().claims == 0 {
                    assert!(
                        std::time::Instant::now() < deadline,
                        "the flusher took no claim"
                    );
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
                signal(&child, "-STOP");
                if buffers.stats().await.unwrap().claims > 0 {
                    break;
                }
                signal(&child, "-CONT");
            }
        }
        child.kill().unwrap(); // SIGKILL, stopped or not
        child.wait().unwrap();
        if buffers.stats().await.unwrap().claims > 0 {
            mid_claim += 1;
        }
    }
    stop.store(true, Ordering::SeqCst);
    for w in writers {
        w.await.unwrap();
    }
    // Let the last killed flusher's leases expire, then flush the rest.
    tokio::time::sleep(Duration::from_millis(400)).await;
    let out = tally()
        .arg("--config")
        .arg(config_file)
        .args(["flush", "--once", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stats = buffers.stats().await.unwrap();
    assert_eq!((stats.pending_rows, stats.claims), (0, 0), "{stats:?}");
    let mut total = 0;
    for row in 0..ROWS {
        let stored = sink
            .read(&RowKey {
                table: "groups".into(),
                key: vec![row.to_string()],
            })
            .await
            .unwrap()
            .unwrap();
        let want = acked[row].load(Ordering::SeqCst);
        assert_eq!(stored.counters["times_seen"], Some(want), "row {row}");
        assert_eq!(
            stored.counters["users"],
            Some(users[row].load(Ordering::SeqCst)),
            "row {row}"
        );
        total += want;
    }
    assert!(total > 1000, "too few writes to mean anything: {total}");
    assert!(mid_claim > 0, "no kill landed while a claim was held");
    eprintln!(
        "{total} increments over {ROWS} rows exact after {KILLS} SIGKILLs, {mid_claim} of them leaving a claim behind"
    );
}

/// Sends `child` the signal `sig` (`"-STOP"`, `"-CONT"`) with `kill`.
fn signal(child: &std::process::Child, sig: &str) {
    let sent = std::process::Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success(), "kill {sig} {}: {sent}", child.id());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkilled_flusher_redis_to_postgres_is_exact() {
    let redis = RedisServer::start();
    let pg = PostgresServer::start();
    let pool = sqlx::PgPool::connect(&pg.url()).await.unwrap();
    sqlx::query(
        "CREATE TABLE groups (id bigint PRIMARY KEY, times_seen bigint NOT NULL DEFAULT 0,
                              users bigint NOT NULL DEFAULT 0)",
    )
    .execute(&pool)
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = settings_file(
        dir.path(),
        &format!(
            "redis = {:?}\n[buffers]\nsink = {:?}\ntick = 0.01\nbatch_rows = 5\nlease = 0.3\n{TABLES_TOML}",
            redis.url(),
            pg.url()
        ),
    );
    let sink = open_sink(&pg.url(), &tables()).await.unwrap();
    let backend = BackendConfig::Redis {
        url: redis.url(),
        layout: Default::default(),
    };
    kill_and_restart(&file, backend, sink).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkilled_flusher_sqlite_to_sqlite_is_exact() {
    let dir = tempfile::tempdir().unwrap();
    let (file, url) = sqlite_config(dir.path(), "tick = 0.01\nbatch_rows = 5\nlease = 0.3\n");
    let sink = open_sink(&url, &tables()).await.unwrap();
    kill_and_restart(
        &file,
        BackendConfig::SqliteDir(dir.path().join("data")),
        sink,
    )
    .await;
}

/// `tally --config <cfg> buffer incr groups --key id=<id> --add <add>`.
fn buffer_incr(cfg: &str, id: &str, add: &str) -> String {
    ok(tally().args([
        "--config",
        cfg,
        "buffer",
        "incr",
        "groups",
        "--key",
        &format!("id={id}"),
        "--add",
        add,
    ]))
}

#[test]
fn buffer_incr_get_stats_and_flush_once_from_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    let (file, _) = sqlite_config(dir.path(), "");
    let cfg = file.to_str().unwrap();
    for _ in 0..3 {
        buffer_incr(cfg, "42", "times_seen=2");
    }
    let stats: serde_json::Value = serde_json::from_str(&ok(
        tally().args(["--config", cfg, "buffer", "stats", "--json"])
    ))
    .unwrap();
    assert_eq!(stats["pending_rows"], 1, "{stats}");
    let row: serde_json::Value = serde_json::from_str(&ok(tally().args([
        "--config", cfg, "buffer", "get", "groups", "--key", "id=42", "--json",
    ])))
    .unwrap();
    assert_eq!(row["counters"]["times_seen"], 6, "{row}");
    assert_eq!(row["stored"], serde_json::Value::Null, "{row}");
    let report: serde_json::Value = serde_json::from_str(&ok(
        tally().args(["--config", cfg, "flush", "--once", "--json"])
    ))
    .unwrap();
    assert_eq!(
        (report["rows"].as_u64(), report["statements"].as_u64()),
        (Some(1), Some(2)),
        "{report}"
    );
    let row: serde_json::Value = serde_json::from_str(&ok(tally().args([
        "--config", cfg, "buffer", "get", "groups", "--key", "id=42", "--json",
    ])))
    .unwrap();
    assert_eq!(row["stored"]["counters"]["times_seen"], 6, "{row}");
    assert_eq!(row["pending"]["counters"], serde_json::json!({}), "{row}");
    // Bad input: exit 2, a message naming the problem.
    for (args, message) in [
        (
            vec![
                "buffer", "incr", "groups", "--key", "id=1", "--add", "nope=1",
            ],
            "not a counter column",
        ),
        (
            vec![
                "buffer", "incr", "groups", "--key", "id", "--add", "users=1",
            ],
            "is not COLUMN=VALUE",
        ),
        (
            vec![
                "buffer", "incr", "other", "--key", "id=1", "--add", "users=1",
            ],
            "not buffered",
        ),
    ] {
        let out = tally()
            .args(["--config", cfg])
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(message),
            "{args:?}"
        );
    }
    // A table name that is not an identifier is refused at start.
    std::fs::write(
        &file,
        "[[buffers.tables]]\nname = \"g; DROP TABLE x\"\nkey = [\"id\"]\ncounters = [\"n\"]\n",
    )
    .unwrap();
    let out = tally()
        .args(["--config", cfg, "buffer", "stats"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a valid SQL identifier"));
}

#[test]
fn flush_drains_what_is_buffered_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    // One tick an hour: only the start and the shutdown flush anything.
    let (file, _) = sqlite_config(dir.path(), "tick = 3600\n");
    let cfg = file.to_str().unwrap();
    let incr = |id: &str| buffer_incr(cfg, id, "times_seen=5");
    let stored = |id: &str| -> serde_json::Value {
        let row: serde_json::Value = serde_json::from_str(&ok(tally().args([
            "--config",
            cfg,
            "buffer",
            "get",
            "groups",
            "--key",
            &format!("id={id}"),
            "--json",
        ])))
        .unwrap();
        row["stored"]["counters"]["times_seen"].clone()
    };
    incr("1");
    let mut child = tally()
        .args(["--config", cfg, "flush"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The first tick flushes row 1 at start.
    assert!(
        tally_testkit::wait_until(tally_testkit::PATIENCE, || stored("1") == 5),
        "the first tick did not flush"
    );
    incr("2");
    assert_eq!(stored("2"), serde_json::Value::Null, "no tick for an hour");
    support::terminate(&mut child, "tally flush");
    assert_eq!(stored("2"), 5, "the shutdown drain flushed row 2");
}
