//! `tally bench buffer`: the same stream of increments written to SQL naively
//! (one upsert statement per increment, as the writers arrive) and through
//! the buffer (buffered in the backend, then flushed), in the same run, on
//! the same SQL server. Reports SQL statements and wall time of each, and
//! checks that both tables end with exactly the totals sent.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use anyhow::{Result, bail, ensure};
use tally::buffers::{
    Buffers, Flusher, FlusherSettings, RowKey, TableConfig, Tables, Update, open_sink,
};
use tally::{Backend, SystemClock};

use crate::settings::Settings;

const NAIVE: &str = "tally_bench_naive";
const BUFFERED: &str = "tally_bench_buffered";

/// What the bench is asked to do.
#[derive(Clone, Debug)]
pub struct BufferBench {
    pub sink: Option<String>,
    pub increments: u64,
    pub rows: u64,
    pub writers: u64,
    pub json: bool,
}

enum Sql {
    Pg(sqlx::PgPool),
    Lite(std::path::PathBuf),
}

impl Sql {
    async fn open(url: &str) -> Result<Self> {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Ok(Sql::Pg(
                sqlx::postgres::PgPoolOptions::new()
                    .max_connections(32)
                    .connect(url)
                    .await?,
            ))
        } else if let Some(path) = url.strip_prefix("sqlite:") {
            Ok(Sql::Lite(path.into()))
        } else {
            bail!(tally::Error::Config(format!("unknown sink URL {url:?}")))
        }
    }

    async fn reset(&self) -> Result<()> {
        for t in [NAIVE, BUFFERED] {
            let drop = format!("DROP TABLE IF EXISTS {t}");
            let create =
                format!("CREATE TABLE {t} (id bigint PRIMARY KEY, n bigint NOT NULL DEFAULT 0)");
            match self {
                Sql::Pg(pool) => {
                    sqlx::query(sqlx::AssertSqlSafe(drop)).execute(pool).await?;
                    sqlx::query(sqlx::AssertSqlSafe(create))
                        .execute(pool)
                        .await?;
                }
                Sql::Lite(path) => {
                    let conn = rusqlite::Connection::open(path)?;
                    conn.execute_batch(&format!("{drop}; {create};"))?;
                }
            }
        }
        Ok(())
    }
}

/// One naive writer's connection.
enum Writer {
    Pg(sqlx::PgPool),
    Lite(rusqlite::Connection),
}

impl Writer {
    async fn upsert(&mut self, id: i64) -> Result<()> {
        const SQL: &str = "INSERT INTO tally_bench_naive (id, n) VALUES ($1, 1) \
                           ON CONFLICT (id) DO UPDATE SET n = tally_bench_naive.n + 1";
        match self {
            Writer::Pg(pool) => {
                sqlx::query(SQL).bind(id).execute(&*pool).await?;
            }
            Writer::Lite(conn) => {
                conn.prepare_cached(&SQL.replace("$1", "?1"))?
                    .execute([id])?;
            }
        }
        Ok(())
    }
}

async fn totals(url: &str, table: &str, rows: u64) -> Result<Vec<i64>> {
    let tables = bench_tables(table)?;
    let sink = open_sink(url, &tables).await?;
    let mut out = Vec::new();
    for id in 0..rows {
        let row = sink
            .read(&RowKey {
                table: table.to_owned(),
                key: vec![id.to_string()],
            })
            .await?;
        out.push(row.and_then(|r| r.counters["n"]).unwrap_or(0));
    }
    Ok(out)
}

fn bench_tables(table: &str) -> Result<Tables> {
    Ok(Tables::new(&[TableConfig {
        name: table.to_owned(),
        key: vec!["id".into()],
        counters: vec!["n".into()],
        last_write: vec![],
    }])?)
}

/// The row of the `i`-th increment: a skewed stream (half the increments go
/// to row 0, as hot rows do in practice).
fn row_of(i: u64, rows: u64) -> i64 {
    if i.is_multiple_of(2) {
        0
    } else {
        ((i / 2) % rows) as i64
    }
}

/// Runs the bench: `bench.sink` is the sink URL (the `tally` binary fills
/// it in from its configuration when `--sink` is not given).
pub async fn run(bench: BufferBench, settings: &Settings) -> Result<()> {
    let Some(url) = bench.sink.clone() else {
        bail!(tally::Error::Config(
            "the buffer bench needs a sink: give --sink URL".into()
        ));
    };
    ensure!(
        bench.rows >= 1 && bench.writers >= 1 && bench.increments >= bench.writers,
        "need rows, writers >= 1 and increments >= writers"
    );
    let sql = Sql::open(&url).await?;
    sql.reset().await?;
    let per_writer = bench.increments / bench.writers;
    let total = per_writer * bench.writers;
    let mut expected = vec![0i64; bench.rows as usize];
    for w in 0..bench.writers {
        for j in 0..per_writer {
            expected[row_of(w * per_writer + j, bench.rows) as usize] += 1;
        }
    }

    // Naive: every increment is one upsert statement.
    let started = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..bench.writers {
        let mut writer = match &sql {
            Sql::Pg(pool) => Writer::Pg(pool.clone()),
            Sql::Lite(path) => {
                let conn = rusqlite::Connection::open(path)?;
                conn.busy_timeout(std::time::Duration::from_secs(60))?;
                Writer::Lite(conn)
            }
        };
        let rows = bench.rows;
        tasks.push(tokio::spawn(async move {
            for j in 0..per_writer {
                writer.upsert(row_of(w * per_writer + j, rows)).await?;
            }
            Ok::<_, anyhow::Error>(())
        }));
    }
    join_ok(tasks).await?;
    let naive_secs = started.elapsed().as_secs_f64();
    let naive_statements = total;

    // Buffered: the same stream into the backend, then flushed.
    let tables = bench_tables(BUFFERED)?;
    let backend = Backend::open(&settings.backend).await?;
    let buffers = Buffers::new(
        backend.buffer_store().await?,
        tables.clone(),
        Arc::new(SystemClock),
    );
    let sink = open_sink(&url, &tables).await?;
    let flusher = Flusher::new(
        buffers.clone(),
        sink,
        FlusherSettings {
            batch_rows: settings.flusher.batch_rows,
            ..FlusherSettings::default()
        },
    )?;
    let started = Instant::now();
    let statements = Arc::new(AtomicU64::new(0));
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    // A flusher ticks while the writers write, as in production.
    let background = {
        let (flusher, statements, done) = (flusher.clone(), statements.clone(), done.clone());
        tokio::spawn(async move {
            while !done.load(Ordering::SeqCst) {
                let r = flusher.tick().await?;
                statements.fetch_add(r.statements, Ordering::SeqCst);
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            Ok::<_, anyhow::Error>(())
        })
    };
    let mut tasks = Vec::new();
    for w in 0..bench.writers {
        let (buffers, rows) = (buffers.clone(), bench.rows);
        tasks.push(tokio::spawn(async move {
            for j in 0..per_writer {
                let id = row_of(w * per_writer + j, rows);
                buffers
                    .incr(&Update::new(BUFFERED).key("id", id).add("n", 1))
                    .await?;
            }
            Ok::<_, anyhow::Error>(())
        }));
    }
    join_ok(tasks).await?;
    let write_secs = started.elapsed().as_secs_f64();
    done.store(true, Ordering::SeqCst);
    background.await??;
    let r = flusher.drain().await?;
    statements.fetch_add(r.statements, Ordering::SeqCst);
    let buffered_secs = started.elapsed().as_secs_f64();
    let buffered_statements = statements.load(Ordering::SeqCst);

    let naive_totals = totals(&url, NAIVE, bench.rows).await?;
    let buffered_totals = totals(&url, BUFFERED, bench.rows).await?;
    ensure!(
        naive_totals == expected,
        "naive totals differ from what was sent"
    );
    ensure!(
        buffered_totals == expected,
        "buffered totals differ from what was sent: {buffered_totals:?} vs {expected:?}"
    );

    let result = serde_json::json!({
        "bench": "buffer",
        "sink": if matches!(sql, Sql::Pg(_)) { "postgres" } else { "sqlite" },
        "backend": backend.describe(),
        "increments": total,
        "rows": bench.rows,
        "writers": bench.writers,
        "naive": { "statements": naive_statements, "seconds": naive_secs },
        "buffered": {
            "statements": buffered_statements,
            "seconds": buffered_secs,
            "write_seconds": write_secs,
        },
        "statements_ratio": naive_statements as f64 / buffered_statements.max(1) as f64,
        "time_ratio": naive_secs / buffered_secs,
        "totals_exact": true,
    });
    if bench.json {
        println!("{result}");
    } else {
        println!(
            "{total} increments over {} rows from {} writers into {}:\n  naive:    {naive_statements} SQL statements in {naive_secs:.2} s\n  buffered: {buffered_statements} SQL statements in {buffered_secs:.2} s (writes done after {write_secs:.2} s)\n  {:.0}x fewer statements, {:.2}x the speed; totals exact in both tables",
            bench.rows,
            bench.writers,
            result["sink"].as_str().unwrap_or_default(),
            result["statements_ratio"].as_f64().unwrap_or_default(),
            result["time_ratio"].as_f64().unwrap_or_default(),
        );
    }
    Ok(())
}

/// Awaits every task, failing on the first error.
async fn join_ok(tasks: Vec<tokio::task::JoinHandle<Result<()>>>) -> Result<()> {
    for t in tasks {
        t.await??;
    }
    Ok(())
}
