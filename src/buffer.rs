//! `tally flush` and `tally buffer`: buffered counters flushed to SQL.

use std::sync::Arc;

use anyhow::{Result, bail};
use clap::Subcommand;
use tally::buffers::{Buffers, Flusher, Update, open_sink};
use tally::{Backend, SystemClock};

use crate::config::Config;

/// `tally buffer ...`
#[derive(Subcommand, Debug)]
pub enum BufferCommand {
    /// Buffer a change to a row: add deltas, set last-write values.
    Incr {
        /// The table (as mapped in [[buffers.tables]]).
        table: String,
        /// A key column's value, COLUMN=VALUE (every key column, once each).
        #[arg(long = "key", value_name = "COLUMN=VALUE", required = true)]
        key: Vec<String>,
        /// Add DELTA to a counter column, COLUMN=DELTA.
        #[arg(
            long = "add",
            value_name = "COLUMN=DELTA",
            allow_negative_numbers = true
        )]
        add: Vec<String>,
        /// Set a last-write column, COLUMN=VALUE.
        #[arg(long = "set", value_name = "COLUMN=VALUE")]
        set: Vec<String>,
    },
    /// Show a row: SQL's values plus what is pending (needs the sink).
    Get {
        /// The table.
        table: String,
        /// A key column's value, COLUMN=VALUE.
        #[arg(long = "key", value_name = "COLUMN=VALUE", required = true)]
        key: Vec<String>,
        /// The sink URL [default: from the config file].
        #[arg(long, env = "TALLY_SINK", value_name = "URL")]
        sink: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Show the backlog: pending rows, oldest pending change, claims.
    Stats {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

fn split(pair: &str, what: &str) -> Result<(String, String)> {
    match pair.split_once('=') {
        Some((c, v)) if !c.is_empty() => Ok((c.to_owned(), v.to_owned())),
        _ => bail!(tally::Error::InvalidInput(format!(
            "{what} {pair:?} is not COLUMN=VALUE"
        ))),
    }
}

async fn open_buffers(config: &Config) -> Result<Buffers> {
    let tables = config.buffers.tables()?.clone();
    let backend = Backend::open(&config.backend).await?;
    let store = backend.buffer_store().await?;
    Ok(Buffers::new(store, tables, Arc::new(SystemClock)))
}

pub async fn run(command: BufferCommand, config: &Config) -> Result<()> {
    match command {
        BufferCommand::Incr {
            table,
            key,
            add,
            set,
        } => {
            let buffers = open_buffers(config).await?;
            let mut update = Update::new(table);
            for k in &key {
                let (c, v) = split(k, "--key")?;
                update = update.key(&c, v);
            }
            for a in &add {
                let (c, v) = split(a, "--add")?;
                let d: i64 = v.parse().map_err(|_| {
                    tally::Error::InvalidCount(format!(
                        "delta {v:?} of {c} is not a 64-bit integer"
                    ))
                })?;
                update = update.add(&c, d);
            }
            for s in &set {
                let (c, v) = split(s, "--set")?;
                update = update.set(&c, v);
            }
            buffers.incr(&update).await?;
        }
        BufferCommand::Get {
            table,
            key,
            sink,
            json,
        } => {
            let buffers = open_buffers(config).await?;
            let url = config.buffers.sink_url(sink.as_deref())?;
            let sink = open_sink(&url, buffers.tables()).await?;
            let pairs = key
                .iter()
                .map(|k| split(k, "--key"))
                .collect::<Result<Vec<_>>>()?;
            let refs: Vec<(&str, &str)> = pairs
                .iter()
                .map(|(c, v)| (c.as_str(), v.as_str()))
                .collect();
            let row = buffers.read(sink.as_ref(), &table, &refs).await?;
            if json {
                println!("{}", serde_json::to_string(&row)?);
            } else {
                for (c, v) in &row.counters {
                    let pending = row.pending.counters.get(c).copied().unwrap_or(0);
                    println!("{c} = {v} ({pending} pending)");
                }
                for (c, v) in &row.last_write {
                    println!("{c} = {}", v.as_deref().unwrap_or("NULL"));
                }
            }
        }
        BufferCommand::Stats { json } => {
            let buffers = open_buffers(config).await?;
            let stats = buffers.stats().await?;
            if json {
                println!("{}", serde_json::to_string(&stats)?);
            } else {
                println!(
                    "{} pending rows (oldest change at {}), {} claims ({} expired)",
                    stats.pending_rows,
                    stats
                        .oldest_pending_ms
                        .map_or("-".to_owned(), |ms| format!("{ms} ms")),
                    stats.claims,
                    stats.expired_claims
                );
            }
        }
    }
    Ok(())
}

/// `tally flush`: one drain (`--once`) or ticks until SIGTERM / Ctrl-C.
pub async fn flush(config: &Config, sink: Option<&str>, once: bool, json: bool) -> Result<()> {
    let buffers = open_buffers(config).await?;
    let url = config.buffers.sink_url(sink)?;
    let sink = open_sink(&url, buffers.tables()).await?;
    let flusher = Flusher::new(buffers, sink, config.buffers.flusher.clone())?;
    if once {
        let report = flusher.drain().await?;
        if json {
            println!("{}", serde_json::to_string(&report)?);
        } else {
            println!(
                "flushed {} rows in {} batches ({} SQL statements); took over {} claims, {} already applied",
                report.rows,
                report.batches,
                report.statements,
                report.taken_over,
                report.already_applied
            );
        }
    } else {
        tracing::info!(
            sink = flusher.sink().describe(),
            tick_ms = config.buffers.flusher.tick.as_millis() as u64,
            "flusher running until SIGTERM or Ctrl-C"
        );
        flusher.run(crate::cli::shutdown_signal()).await;
    }
    Ok(())
}
