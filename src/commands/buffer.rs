//! `tally flush` and `tally buffer`: buffered counters flushed to SQL.
//!
//! Both check the mapped tables before opening the backend, so a missing
//! mapping opens nothing; `flush` without `--once` ticks until SIGTERM or
//! Ctrl-C.

use std::sync::Arc;

use anyhow::{Result, bail};
use clap::{Args, Subcommand};
use tally::buffers::{Buffers, Flusher, Sink, Update, open_sink};

use crate::config::Config;
use crate::context::{self, shutdown_signal};
use crate::output;

/// The buffer commands (top-level subcommands of `tally`).
#[derive(Subcommand, Debug)]
pub enum BufferGroup {
    /// Flush buffered rows into SQL: ticks until SIGTERM or Ctrl-C.
    Flush(FlushArgs),
    /// Buffered counters: buffer a change, read a row, show the backlog.
    #[command(subcommand)]
    Buffer(BufferCommand),
}

/// `tally flush`.
#[derive(Args, Debug)]
pub struct FlushArgs {
    /// Flush everything pending once and exit.
    #[arg(long)]
    pub once: bool,
    /// The sink URL (postgres://... or sqlite:PATH) [default: from the config file].
    #[arg(long, env = "TALLY_SINK", value_name = "URL")]
    sink: Option<String>,
    /// Print the report of --once as JSON.
    #[arg(long)]
    json: bool,
}

impl BufferGroup {
    /// Whether the command runs until stopped (and so logs at `info`).
    pub fn runs_until_stopped(&self) -> bool {
        matches!(self, BufferGroup::Flush(args) if !args.once)
    }
}

pub async fn run(command: BufferGroup, config: &Config) -> Result<()> {
    match command {
        BufferGroup::Flush(args) => flush(args, config).await,
        BufferGroup::Buffer(command) => buffer(command, config).await,
    }
}

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

/// The buffers of the mapped tables (an error, before opening anything,
/// when none is mapped).
async fn open_buffers(config: &Config) -> Result<Buffers> {
    let tables = config.buffers.tables()?.clone();
    Ok(context::open(config).await?.buffers(tables))
}

/// The buffers and the sink (the flag, else the config file's), both
/// checked before anything is opened.
async fn open_with_sink(config: &Config, sink: Option<&str>) -> Result<(Buffers, Arc<dyn Sink>)> {
    let tables = config.buffers.tables()?.clone();
    let url = config.buffers.sink_url(sink)?;
    let buffers = context::open(config).await?.buffers(tables);
    let sink = open_sink(&url, buffers.tables()).await?;
    Ok((buffers, sink))
}

async fn buffer(command: BufferCommand, config: &Config) -> Result<()> {
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
            let (buffers, sink) = open_with_sink(config, sink.as_deref()).await?;
            let pairs = key
                .iter()
                .map(|k| split(k, "--key"))
                .collect::<Result<Vec<_>>>()?;
            let refs: Vec<(&str, &str)> = pairs
                .iter()
                .map(|(c, v)| (c.as_str(), v.as_str()))
                .collect();
            let row = buffers.read(sink.as_ref(), &table, &refs).await?;
            output::print(&row, json, |row| {
                for (c, v) in &row.counters {
                    let pending = row.pending.counters.get(c).copied().unwrap_or(0);
                    println!("{c} = {v} ({pending} pending)");
                }
                for (c, v) in &row.last_write {
                    println!("{c} = {}", v.as_deref().unwrap_or("NULL"));
                }
            })?;
        }
        BufferCommand::Stats { json } => {
            let buffers = open_buffers(config).await?;
            let stats = buffers.stats().await?;
            output::print(&stats, json, |stats| {
                println!(
                    "{} pending rows (oldest change at {}), {} claims ({} expired)",
                    stats.pending_rows,
                    stats
                        .oldest_pending_ms
                        .map_or("-".to_owned(), |ms| format!("{ms} ms")),
                    stats.claims,
                    stats.expired_claims
                )
            })?;
        }
    }
    Ok(())
}

/// `tally flush`: one drain (`--once`) or ticks until SIGTERM / Ctrl-C.
async fn flush(args: FlushArgs, config: &Config) -> Result<()> {
    let FlushArgs { once, sink, json } = args;
    let (buffers, sink) = open_with_sink(config, sink.as_deref()).await?;
    let flusher = Flusher::new(buffers, sink, config.buffers.flusher.clone())?;
    if once {
        let report = flusher.drain().await?;
        output::print(&report, json, |report| {
            println!(
                "flushed {} rows in {} batches ({} SQL statements); took over {} claims, {} already applied",
                report.rows,
                report.batches,
                report.statements,
                report.taken_over,
                report.already_applied
            )
        })?;
    } else {
        tracing::info!(
            sink = flusher.sink().describe(),
            tick_ms = config.buffers.flusher.tick.as_millis() as u64,
            "flusher running until SIGTERM or Ctrl-C"
        );
        flusher.run(shutdown_signal()).await;
    }
    Ok(())
}
