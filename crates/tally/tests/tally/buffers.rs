//! The buffers behaviour suite: every test runs on each buffer store (SQLite
//! file, real redis-server) flushing into each sink (SQLite file, real
//! PostgreSQL), and on a real three-node Redis Cluster flushing into SQLite,
//! on a manual clock.

use std::sync::Arc;
use std::time::Duration;

use tally::buffers::{
    BufferedRow, Buffers, Flusher, FlusherSettings, Sink, SinkOutcome, StoredRow, TableConfig,
    Tables, Update, open_sink,
};
use tally::counters::Applied;
use tally::{Backend, BackendConfig, Clock, ManualClock};
use tally_testkit::PostgresServer;
use tempfile::TempDir;

use crate::backends;
use crate::common::{ONCE, tries};
use backends::{Kind, Servers};

/// Buffer stores: SQLite file, redis-server, Redis Cluster.
type Store = Kind;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SinkKind {
    Sqlite,
    Postgres,
}

const T0: f64 = 1_700_000_000.0;

struct Fixture {
    clock: ManualClock,
    buffers: Buffers,
    backend_config: BackendConfig,
    sink: Arc<dyn Sink>,
    tables: Tables,
    _servers: Servers,
    _pg: Option<PostgresServer>,
    _dir: TempDir,
}

fn tables() -> Tables {
    Tables::new(&[
        TableConfig {
            name: "groups".into(),
            key: vec!["id".into()],
            counters: vec!["times_seen".into(), "users".into()],
            last_write: vec!["last_seen".into()],
        },
        TableConfig {
            name: "pairs".into(),
            key: vec!["a".into(), "b".into()],
            counters: vec!["n".into()],
            last_write: vec![],
        },
    ])
    .unwrap()
}

const SQLITE_SCHEMA: &str = "
CREATE TABLE groups (id INTEGER PRIMARY KEY, times_seen INTEGER NOT NULL DEFAULT 0,
                     users INTEGER NOT NULL DEFAULT 0 CHECK (users < 1000000), last_seen INTEGER);
CREATE TABLE pairs (a TEXT NOT NULL, b INTEGER NOT NULL, n INTEGER NOT NULL, PRIMARY KEY (a, b));
";

const PG_SCHEMA: [&str; 2] = [
    "CREATE TABLE groups (id bigint PRIMARY KEY, times_seen bigint NOT NULL DEFAULT 0,
                          users integer NOT NULL DEFAULT 0 CHECK (users < 1000000),
                          last_seen bigint)",
    "CREATE TABLE pairs (a text NOT NULL, b integer NOT NULL, n bigint NOT NULL, PRIMARY KEY (a, b))",
];

impl Fixture {
    async fn new(store: Store, sink: SinkKind) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::at(T0);
        let (backend_config, servers) = backends::start(store, &dir.path().join("tally"));
        let tables = tables();
        let (url, pg) = match sink {
            SinkKind::Sqlite => {
                let path = dir.path().join("sink.sqlite3");
                rusqlite::Connection::open(&path)
                    .unwrap()
                    .execute_batch(SQLITE_SCHEMA)
                    .unwrap();
                (format!("sqlite:{}", path.display()), None)
            }
            SinkKind::Postgres => {
                let server = PostgresServer::start();
                let pool = sqlx::PgPool::connect(&server.url()).await.unwrap();
                for stmt in PG_SCHEMA {
                    sqlx::query(stmt).execute(&pool).await.unwrap();
                }
                pool.close().await;
                (server.url(), Some(server))
            }
        };
        let sink = open_sink(&url, &tables).await.unwrap();
        let backend = Backend::open(&backend_config).await.unwrap();
        let buffers = Buffers::new(
            backend.buffer_store().await.unwrap(),
            tables.clone(),
            Arc::new(clock.clone()),
        );
        Fixture {
            clock,
            buffers,
            backend_config,
            sink,
            tables,
            _servers: servers,
            _pg: pg,
            _dir: dir,
        }
    }

    /// Another client on the same store, as another process would have.
    async fn other_buffers(&self) -> Buffers {
        let backend = Backend::open(&self.backend_config).await.unwrap();
        Buffers::new(
            backend.buffer_store().await.unwrap(),
            self.tables.clone(),
            Arc::new(self.clock.clone()),
        )
    }

    fn flusher(&self, buffers: &Buffers, settings: FlusherSettings) -> Flusher {
        Flusher::new(buffers.clone(), self.sink.clone(), settings).unwrap()
    }

    /// Row `id` of `groups` as SQL stores it (`None` when it is missing).
    async fn stored_row(&self, id: i64) -> Option<StoredRow> {
        let row = tally::buffers::RowKey {
            table: "groups".into(),
            key: vec![id.to_string()],
        };
        self.sink.read(&row).await.unwrap()
    }

    /// A counter as SQL stores it (0 when the row is missing).
    async fn stored(&self, id: i64, col: &str) -> i64 {
        self.stored_row(id)
            .await
            .and_then(|r| r.counters[col])
            .unwrap_or(0)
    }

    async fn last_seen(&self, id: i64) -> Option<String> {
        self.stored_row(id)
            .await
            .and_then(|r| r.last_write["last_seen"].clone())
    }

    /// Row `id` of `groups` as a buffered read sees it: what SQL holds plus
    /// what is pending.
    async fn read(&self, id: i64) -> BufferedRow {
        self.buffers
            .read(self.sink.as_ref(), "groups", &[("id", &id.to_string())])
            .await
            .unwrap()
    }
}

fn seen(id: i64, n: i64, at: i64) -> Update {
    Update::new("groups")
        .key("id", id)
        .add("times_seen", n)
        .set("last_seen", at)
}

fn settings() -> FlusherSettings {
    FlusherSettings {
        batch_rows: 7,
        lease: Duration::from_secs(30),
        ..FlusherSettings::default()
    }
}

/// [`settings`] with a lease of 1 s and a retention of `retention_secs`.
fn one_second_lease(retention_secs: u64) -> FlusherSettings {
    FlusherSettings {
        lease: Duration::from_secs(1),
        retention: Duration::from_secs(retention_secs),
        ..settings()
    }
}

per_backend!(
    sqlite_store_sqlite_sink(Kind::SqliteFile, SinkKind::Sqlite),
    sqlite_store_postgres_sink(Kind::SqliteFile, SinkKind::Postgres),
    redis_store_sqlite_sink(Kind::Redis, SinkKind::Sqlite),
    redis_store_postgres_sink(Kind::Redis, SinkKind::Postgres),
    redis_cluster_store_sqlite_sink(Kind::RedisCluster, SinkKind::Sqlite):
    flush_writes_exact_totals_in_one_statement_per_table,
    insert_if_missing_and_last_write_wins,
    bad_input_changes_nothing,
    crash_between_claim_and_commit_loses_nothing,
    crash_between_commit_and_release_applies_once,
    concurrent_writers_and_two_flushers_are_exact,
    backlog_metrics_track_pending_rows,
    ancient_claims_are_left_for_an_operator,
    a_refused_batch_does_not_stall_the_others,
    batch_ids_are_forgotten_after_twice_the_retention,
    keyed_changes_apply_once,
);

async fn flush_writes_exact_totals_in_one_statement_per_table(store: Store, sink: SinkKind) {
    let f = Fixture::new(store, sink).await;
    for i in 0..5 {
        f.buffers.incr(&seen(42, 1, 100 + i)).await.unwrap();
    }
    f.buffers
        .incr(&Update::new("groups").key("id", 7).add("users", 3))
        .await
        .unwrap();
    f.buffers
        .incr(
            &Update::new("pairs")
                .key("a", "x y")
                .key("b", 2)
                .add("n", -4),
        )
        .await
        .unwrap();
    // Reads add what is pending to what SQL holds (nothing yet).
    let read = f.read(42).await;
    assert_eq!(read.stored, None);
    assert_eq!(read.counters["times_seen"], 5);
    assert_eq!(read.last_write["last_seen"].as_deref(), Some("104"));

    let flusher = f.flusher(
        &f.buffers,
        FlusherSettings {
            batch_rows: 100,
            ..settings()
        },
    );
    let report = flusher.tick().await.unwrap();
    // One batch: the batch-id insert plus one statement per table.
    assert_eq!(report.batches, 1, "{report:?}");
    assert_eq!(report.statements, 3, "{report:?}");
    assert_eq!(report.rows, 3, "{report:?}");
    assert_eq!(f.stored(42, "times_seen").await, 5);
    assert_eq!(f.stored(7, "users").await, 3);
    assert_eq!(f.last_seen(42).await.as_deref(), Some("104"));
    // Nothing is pending any more, and a read is SQL's value alone.
    let read = f.read(42).await;
    assert!(read.pending.is_empty(), "{read:?}");
    assert_eq!(read.counters["times_seen"], 5);
    let pair = tally::buffers::RowKey {
        table: "pairs".into(),
        key: vec!["x y".into(), "2".into()],
    };
    assert_eq!(
        f.sink.read(&pair).await.unwrap().unwrap().counters["n"],
        Some(-4)
    );
    // More increments add to the stored row.
    f.buffers.incr(&seen(42, 10, 200)).await.unwrap();
    assert_eq!(flusher.drain().await.unwrap().batches, 1);
    assert_eq!(f.stored(42, "times_seen").await, 15);
    assert_eq!(flusher.tick().await.unwrap().batches, 0);
}

async fn insert_if_missing_and_last_write_wins(store: Store, sink: SinkKind) {
    let f = Fixture::new(store, sink).await;
    let flusher = f.flusher(&f.buffers, settings());
    f.buffers.incr(&seen(1, 1, 10)).await.unwrap();
    f.buffers.incr(&seen(1, 1, 30)).await.unwrap();
    f.buffers.incr(&seen(1, 1, 20)).await.unwrap(); // the last write wins, not the largest
    flusher.drain().await.unwrap();
    assert_eq!(f.last_seen(1).await.as_deref(), Some("20"));
    // A change without the last-write column keeps the stored value.
    f.buffers
        .incr(&Update::new("groups").key("id", 1).add("times_seen", 2))
        .await
        .unwrap();
    flusher.drain().await.unwrap();
    assert_eq!(f.last_seen(1).await.as_deref(), Some("20"));
    assert_eq!(f.stored(1, "times_seen").await, 5);
    // A value-only change inserts the row with zero counters.
    f.buffers
        .incr(&Update::new("groups").key("id", 2).set("last_seen", 99))
        .await
        .unwrap();
    flusher.drain().await.unwrap();
    assert_eq!(f.stored(2, "times_seen").await, 0);
    assert_eq!(f.last_seen(2).await.as_deref(), Some("99"));
}

async fn bad_input_changes_nothing(store: Store, sink: SinkKind) {
    let f = Fixture::new(store, sink).await;
    let cases = [
        (
            Update::new("nope").key("id", 1).add("times_seen", 1),
            "configured: groups, pairs",
        ),
        (
            Update::new("groups").add("times_seen", 1),
            "key column id of table groups is missing",
        ),
        (
            Update::new("groups")
                .key("id", 1)
                .key("x", 2)
                .add("times_seen", 1),
            "\"x\" is not a key column",
        ),
        (
            Update::new("groups").key("id", 1).add("last_seen", 1),
            "not a counter column",
        ),
        (
            Update::new("groups").key("id", 1).set("users", 1),
            "not a last-write column",
        ),
        (
            Update::new("groups").key("id", 1),
            "at least one delta or value",
        ),
        (
            Update::new("groups")
                .key("id", "x".repeat(5000))
                .add("users", 1),
            "at most 4096",
        ),
        (
            Update::new("groups").key("id", 1).add("users", i64::MIN),
            "out of range",
        ),
    ];
    for (update, message) in cases {
        let e = f.buffers.incr(&update).await.unwrap_err();
        assert!(e.is_bad_input(), "{e}");
        assert!(e.to_string().contains(message), "{e} / {message}");
    }
    assert_eq!(f.buffers.stats().await.unwrap().pending_rows, 0);
    // A pending delta that would overflow is refused, and the pending row is unchanged.
    f.buffers
        .incr(
            &Update::new("groups")
                .key("id", 1)
                .add("users", i64::MAX - 1)
                .add("times_seen", 5),
        )
        .await
        .unwrap();
    let e = f
        .buffers
        .incr(
            &Update::new("groups")
                .key("id", 1)
                .add("times_seen", 1)
                .add("users", 2),
        )
        .await
        .unwrap_err();
    assert!(e.to_string().contains("overflow"), "{e}");
    let read = f.read(1).await;
    assert_eq!(read.pending.counters["users"], i64::MAX - 1);
    assert_eq!(read.pending.counters["times_seen"], 5);
}

async fn crash_between_claim_and_commit_loses_nothing(store: Store, sink: SinkKind) {
    let f = Fixture::new(store, sink).await;
    for id in 0..10 {
        f.buffers.incr(&seen(id, 2, 1)).await.unwrap();
    }
    // Flusher A claims a batch and dies before writing it.
    let a = f.flusher(&f.other_buffers().await, settings());
    let claims = a.claim().await.unwrap();
    assert_eq!(claims.iter().map(|c| c.rows.len()).sum::<usize>(), 7);
    drop(a);
    // New increments to a claimed row stay pending behind the claim.
    let claimed_id: i64 = claims[0].rows[0].row.key[0].parse().unwrap();
    f.buffers.incr(&seen(claimed_id, 5, 2)).await.unwrap();
    // Flusher B, before A's lease ends: flushes the unclaimed rows only.
    let b = f.flusher(&f.buffers, settings());
    let r = b.tick().await.unwrap();
    assert_eq!((r.taken_over, r.rows), (0, 3), "{r:?}");
    assert_eq!(f.stored(claimed_id, "times_seen").await, 0);
    // The read still sees everything: claimed + pending.
    let read = f.read(claimed_id).await;
    assert_eq!(read.counters["times_seen"], 7);
    // After the lease, B takes the claim over, then the row's newer change.
    f.clock.advance(31.0);
    let r = b.tick().await.unwrap();
    assert_eq!(r.taken_over, claims.len() as u64, "{r:?}");
    assert_eq!(r.rows, 8, "7 taken over, then the newer change: {r:?}");
    assert_eq!(f.stored(claimed_id, "times_seen").await, 7);
    assert_eq!(f.last_seen(claimed_id).await.as_deref(), Some("2"));
    for id in 0..10 {
        if id != claimed_id {
            assert_eq!(f.stored(id, "times_seen").await, 2, "row {id}");
        }
    }
    let stats = f.buffers.stats().await.unwrap();
    assert_eq!((stats.pending_rows, stats.claims), (0, 0), "{stats:?}");
}

async fn crash_between_commit_and_release_applies_once(store: Store, sink: SinkKind) {
    let f = Fixture::new(store, sink).await;
    for id in 0..3 {
        f.buffers.incr(&seen(id, 4, 1)).await.unwrap();
    }
    let a = f.flusher(&f.buffers, settings());
    let claims = a.claim().await.unwrap();
    let n = claims.len() as u64;
    // A commits the batch to SQL and dies before releasing its claims.
    let outcome = f
        .sink
        .apply(&claims, f.clock.now().as_millis())
        .await
        .unwrap();
    assert_eq!((outcome.applied, outcome.rows), (n, 3), "{outcome:?}");
    // A read in this window does not count the claim twice.
    let read = f.read(1).await;
    assert_eq!(read.counters["times_seen"], 4, "{read:?}");
    f.clock.advance(31.0);
    let r = a.tick().await.unwrap();
    assert_eq!(
        (r.taken_over, r.already_applied, r.batches),
        (n, n, 0),
        "{r:?}"
    );
    for id in 0..3 {
        assert_eq!(f.stored(id, "times_seen").await, 4);
    }
    // Applying the same batch again, however it comes, is a no-op.
    assert_eq!(
        f.sink
            .apply(&claims, f.clock.now().as_millis())
            .await
            .unwrap(),
        SinkOutcome {
            applied: 0,
            already_applied: n,
            rows: 0,
            statements: 1
        }
    );
    assert_eq!(f.stored(0, "times_seen").await, 4);
    assert_eq!(f.buffers.stats().await.unwrap().claims, 0);
}

async fn concurrent_writers_and_two_flushers_are_exact(store: Store, sink: SinkKind) {
    const WRITERS: i64 = 8;
    const INCREMENTS: i64 = 150;
    const ROWS: i64 = 10;
    let f = Fixture::new(store, sink).await;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flushed_so_far = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut flushers = Vec::new();
    for _ in 0..2 {
        let fl = f.flusher(
            &f.other_buffers().await,
            FlusherSettings {
                batch_rows: 3,
                ..settings()
            },
        );
        let (stop, so_far) = (stop.clone(), flushed_so_far.clone());
        flushers.push(tokio::spawn(async move {
            let mut written = 0;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let rows = fl.tick().await.unwrap().rows;
                so_far.fetch_add(rows, std::sync::atomic::Ordering::SeqCst);
                written += rows;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            written
        }));
    }
    let mut writers = Vec::new();
    for w in 0..WRITERS {
        let buffers = f.other_buffers().await;
        let so_far = flushed_so_far.clone();
        writers.push(tokio::spawn(async move {
            for i in 0..INCREMENTS {
                if i == INCREMENTS / 2 {
                    // Half-way, make sure the flushers are at work meanwhile.
                    let deadline = std::time::Instant::now() + tally_testkit::PATIENCE;
                    while so_far.load(std::sync::atomic::Ordering::SeqCst) == 0 {
                        assert!(std::time::Instant::now() < deadline, "no flush");
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                }
                let id = (w * INCREMENTS + i) % ROWS;
                buffers
                    .incr(
                        &Update::new("groups")
                            .key("id", id)
                            .add("times_seen", 1)
                            .add("users", w),
                    )
                    .await
                    .unwrap();
            }
        }));
    }
    for w in writers {
        w.await.unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let mut flushed = 0;
    for fl in flushers {
        flushed += fl.await.unwrap();
    }
    assert!(flushed > 0, "the flushers ran while writers wrote");
    f.flusher(&f.buffers, settings()).drain().await.unwrap();
    let mut total = 0;
    for id in 0..ROWS {
        let n = f.stored(id, "times_seen").await;
        assert_eq!(n, WRITERS * INCREMENTS / ROWS, "row {id}");
        total += n;
    }
    assert_eq!(total, WRITERS * INCREMENTS);
    let users: i64 = {
        let mut s = 0;
        for id in 0..ROWS {
            s += f.stored(id, "users").await;
        }
        s
    };
    assert_eq!(users, (0..WRITERS).map(|w| w * INCREMENTS).sum::<i64>());
}

async fn backlog_metrics_track_pending_rows(store: Store, sink: SinkKind) {
    let f = Fixture::new(store, sink).await;
    let start_ms = f.clock.now().as_millis();
    f.buffers.incr(&seen(1, 1, 1)).await.unwrap();
    f.clock.advance(2.5);
    f.buffers.incr(&seen(2, 1, 1)).await.unwrap();
    f.buffers.incr(&seen(1, 1, 1)).await.unwrap(); // still pending since the first change
    let stats = f.buffers.stats().await.unwrap();
    assert_eq!(stats.pending_rows, 2);
    assert_eq!(stats.oldest_pending_ms, Some(start_ms));
    let flusher = f.flusher(&f.buffers, settings());
    let m = flusher.metrics().await;
    assert_eq!(m.oldest_pending_age_ms, Some(2500));
    flusher.drain().await.unwrap();
    let m = flusher.metrics().await;
    assert_eq!((m.batches, m.rows_written, m.failures), (1, 2, 0), "{m:?}");
    assert_eq!(m.statements, 2);
    let b = m.backlog.unwrap();
    assert_eq!(
        (b.pending_rows, b.oldest_pending_ms, b.claims),
        (0, None, 0)
    );
}

async fn ancient_claims_are_left_for_an_operator(store: Store, sink: SinkKind) {
    let f = Fixture::new(store, sink).await;
    f.buffers.incr(&seen(1, 3, 1)).await.unwrap();
    let a = f.flusher(&f.buffers, one_second_lease(10));
    assert!(!a.claim().await.unwrap().is_empty());
    f.clock.advance(11.0);
    let r = a.tick().await.unwrap();
    assert_eq!((r.failed, r.taken_over, r.rows), (1, 0, 0), "{r:?}");
    assert_eq!(a.metrics().await.failures, 1);
    let stats = f.buffers.stats().await.unwrap();
    assert_eq!(stats.claims, 1, "the claim is kept: {stats:?}");
    // Whoever tries to finish it directly (once its renewed lease lapses)
    // is refused too.
    f.clock.advance(2.0);
    let claims = f
        .buffers
        .store()
        .take_over(f.clock.now().as_millis(), 1_000, 10)
        .await
        .unwrap();
    let e = a.finish(&claims).await.unwrap_err();
    assert!(
        e.to_string().contains("left in place for an operator"),
        "{e}"
    );
    assert_eq!(f.stored(1, "times_seen").await, 0);
}

async fn a_refused_batch_does_not_stall_the_others(store: Store, sink: SinkKind) {
    let f = Fixture::new(store, sink).await;
    // Row 1 breaks the table's CHECK constraint when flushed.
    f.buffers
        .incr(&Update::new("groups").key("id", 1).add("users", 2_000_000))
        .await
        .unwrap();
    f.clock.advance(0.001);
    for id in 2..5 {
        f.buffers.incr(&seen(id, 1, 1)).await.unwrap();
    }
    let s = FlusherSettings {
        batch_rows: 1,
        ..settings()
    };
    let flusher = f.flusher(&f.buffers, s);
    let r = flusher.tick().await.unwrap();
    assert_eq!((r.failed, r.batches, r.rows), (1, 3, 3), "{r:?}");
    for id in 2..5 {
        assert_eq!(f.stored(id, "times_seen").await, 1);
    }
    assert_eq!(f.stored(1, "users").await, 0);
    // The refused row stays claimed (nothing lost), and `--once` says so.
    let stats = f.buffers.stats().await.unwrap();
    assert_eq!((stats.claims, stats.pending_rows), (1, 0), "{stats:?}");
    assert_eq!(flusher.metrics().await.failures, 1);
    f.clock.advance(31.0);
    let e = flusher.drain().await.unwrap_err();
    assert!(e.to_string().contains("flush batches failed"), "{e}");
    let read = f.read(1).await;
    assert_eq!(
        read.counters["users"], 2_000_000,
        "still counted as pending"
    );
}

async fn batch_ids_are_forgotten_after_twice_the_retention(store: Store, sink: SinkKind) {
    let f = Fixture::new(store, sink).await;
    f.buffers.incr(&seen(1, 1, 1)).await.unwrap();
    let flusher = f.flusher(&f.buffers, one_second_lease(100));
    let claims = flusher.claim().await.unwrap();
    let ids: Vec<_> = claims.iter().map(|c| c.batch).collect();
    flusher.finish(&claims).await.unwrap();
    f.clock.advance(199.0);
    flusher.tick().await.unwrap();
    assert!(
        f.sink.applied(&ids).await.unwrap().iter().all(|&a| a),
        "kept for 2 x retention"
    );
    f.clock.advance(2.0);
    flusher.tick().await.unwrap();
    assert!(
        f.sink.applied(&ids).await.unwrap().iter().all(|&a| !a),
        "forgotten after"
    );
    assert_eq!(f.stored(1, "times_seen").await, 1);
}

/// Issue 11: a keyed change sent again (a retry after a server died before
/// recording its answer), before or after the flush, from another process
/// too, is buffered once; a bad key or a refused change leaves no mark.
async fn keyed_changes_apply_once(store: Store, sink: SinkKind) {
    let f = Fixture::new(store, sink).await;
    let other = f.other_buffers().await;
    let change = seen(42, 5, 100);
    tries(&ONCE, || f.buffers.incr_once("order-1", &change)).await;
    assert_eq!(
        other.incr_once("order-1", &change).await.unwrap(),
        Applied::Duplicate
    );
    // A change that does not fit the mapping is refused and marks nothing.
    let bad = Update::new("groups").key("id", 43).add("nope", 1);
    for (key, change) in [("order-2", bad), ("bad key", seen(43, 1, 100))] {
        let err = f.buffers.incr_once(key, &change).await.unwrap_err();
        assert!(err.is_bad_input(), "{key}: {err}");
    }
    assert_eq!(
        f.buffers
            .incr_once("order-2", &seen(43, 2, 100))
            .await
            .unwrap(),
        Applied::Written
    );
    let flusher = f.flusher(&f.buffers, settings());
    flusher.drain().await.unwrap();
    assert_eq!(f.stored(42, "times_seen").await, 5);
    assert_eq!(f.stored(43, "times_seen").await, 2);
    // After the flush, the repeat still buffers nothing.
    assert_eq!(
        other.incr_once("order-1", &change).await.unwrap(),
        Applied::Duplicate
    );
    assert_eq!(flusher.drain().await.unwrap().batches, 0);
    assert_eq!(f.stored(42, "times_seen").await, 5);
}
