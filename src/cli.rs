//! The command line: flags, subcommands, and what each one does.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Result, bail};
use clap::{Parser, Subcommand};
use tally::{Backend, Counters, SystemClock, Timestamp};

use crate::bench::BenchCommand;
use crate::buffer::BufferCommand;
use crate::config::{Config, GlobalArgs};
use crate::limit::{LimitCommand, LockCommand};
use crate::output;

/// Counters at several precisions with retention, on Redis or an embedded
/// SQLite store.
#[derive(Parser, Debug)]
#[command(name = "tally", version, about, max_term_width = 100)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Add COUNT (default 1, may be negative) to a counter at every precision.
    Incr {
        /// The counter.
        name: String,
        /// The amount.
        #[arg(default_value_t = 1, allow_negative_numbers = true)]
        count: i64,
        /// When it happened, Unix seconds with a fraction [default: now].
        #[arg(long, value_name = "UNIX_SECONDS", allow_negative_numbers = true)]
        at: Option<f64>,
    },
    /// Show a counter's samples: every precision, or one.
    Get {
        /// The counter.
        name: String,
        /// Only this precision, in seconds.
        #[arg(long, value_name = "SECONDS")]
        precision: Option<u64>,
        /// Print JSON: `[[slice_start, count], ...]` for one precision, or an
        /// object keyed by precision for all.
        #[arg(long)]
        json: bool,
    },
    /// List counters in name order.
    Counters {
        /// Print a JSON array of names.
        #[arg(long)]
        json: bool,
        /// Only names after this one (a cursor).
        #[arg(long, value_name = "NAME")]
        after: Option<String>,
        /// At most this many names [default: all].
        #[arg(long, value_name = "N")]
        limit: Option<usize>,
    },
    /// Delete a counter (all its precisions).
    Delete {
        /// The counter.
        name: String,
        /// Print `{"deleted": true|false}`.
        #[arg(long)]
        json: bool,
    },
    /// Trim old samples: passes every --clean-interval until SIGTERM or Ctrl-C.
    Clean {
        /// Run one pass (visiting every precision) and exit.
        #[arg(long)]
        once: bool,
        /// Measure cutoffs from this instant instead of the clock (Unix seconds).
        #[arg(
            long,
            value_name = "UNIX_SECONDS",
            requires = "once",
            allow_negative_numbers = true
        )]
        now: Option<f64>,
        /// Print the pass's report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// The time-series store: counts, distinct counts and most frequent
    /// items per model and key, at several rollups.
    #[command(subcommand)]
    Ts(crate::ts::TsCommand),
    /// Per-entity daily statistics: views per day, last N days, total.
    #[command(subcommand)]
    Daily(crate::daily::DailyCommand),
    /// Flush buffered rows into SQL: ticks until SIGTERM or Ctrl-C.
    Flush {
        /// Flush everything pending once and exit.
        #[arg(long)]
        once: bool,
        /// The sink URL (postgres://... or sqlite:PATH) [default: from the config file].
        #[arg(long, env = "TALLY_SINK", value_name = "URL")]
        sink: Option<String>,
        /// Print the report of --once as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Buffered counters: buffer a change, read a row, show the backlog.
    #[command(subcommand)]
    Buffer(BufferCommand),
    /// Rate limits: check a key against a limit or a named policy.
    #[command(subcommand)]
    Limit(LimitCommand),
    /// Locks with a lease and a fencing token.
    #[command(subcommand)]
    Lock(LockCommand),
    /// Serve the HTTP API, the dashboard, /metrics and (optionally) statsd,
    /// with the cleaner running inside, until SIGTERM or Ctrl-C.
    Serve(crate::serve::ServeArgs),
    /// Benchmarks (see BENCHMARKS.md).
    #[command(subcommand)]
    Bench(BenchCommand),
}

pub fn init_tracing(cli: &Cli) {
    let default = match cli.command {
        Command::Clean { once: false, .. }
        | Command::Flush { once: false, .. }
        | Command::Serve(_) => "info",
        _ => "warn",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

/// Opens the configured backend, with the replication wait if any.
pub async fn open_backend(config: &Config) -> Result<Backend> {
    Ok(Backend::open(&config.backend)
        .await?
        .with_replication_wait(config.wait)?)
}

async fn open_counters(config: &Config) -> Result<Counters> {
    let backend = open_backend(config).await?;
    let clock = Arc::new(SystemClock);
    backend
        .check_counter_encoding(&config.counters, config.cleaner.interval)
        .await;
    let store = backend.counter_store(clock.clone()).await?;
    Ok(Counters::with_clock(store, config.counters.clone(), clock)?)
}

pub async fn run(cli: Cli) -> Result<ExitCode> {
    let config = Config::resolve(&cli.global)?;
    match cli.command {
        Command::Incr { name, count, at } => {
            let counters = open_counters(&config).await?;
            match at {
                Some(at) => counters.incr_at(&name, count, at).await?,
                None => counters.incr(&name, count).await?,
            }
        }
        Command::Get {
            name,
            precision,
            json,
        } => {
            let counters = open_counters(&config).await?;
            match precision {
                Some(p) => {
                    let samples = counters.get(&name, p).await?;
                    if json {
                        println!("{}", serde_json::to_string(&samples)?);
                    } else {
                        print!("{}", output::samples_table(&name, p, &samples));
                    }
                }
                None => {
                    let series = counters.get_all(&name).await?;
                    if json {
                        println!("{}", output::series_json(&series));
                    } else {
                        print!("{}", output::series_table(&name, &series));
                    }
                }
            }
        }
        Command::Counters { json, after, limit } => {
            let counters = open_counters(&config).await?;
            if limit == Some(0) {
                bail!(tally::Error::InvalidInput(
                    "--limit must be at least 1".into()
                ));
            }
            let mut names = Vec::new();
            let mut cursor = after;
            loop {
                let want = limit.map_or(1000, |l| (l - names.len()).min(1000));
                let page = counters.list(cursor.as_deref(), want).await?;
                names.extend(page.names);
                match page.next {
                    Some(next) if limit.is_none_or(|l| names.len() < l) => cursor = Some(next),
                    _ => break,
                }
            }
            if json {
                println!("{}", serde_json::to_string(&names)?);
            } else {
                for name in names {
                    println!("{name}");
                }
            }
        }
        Command::Delete { name, json } => {
            let counters = open_counters(&config).await?;
            let deleted = counters.delete(&name).await?;
            if json {
                println!("{}", serde_json::json!({ "deleted": deleted }));
            } else if deleted {
                println!("deleted {name}");
            } else {
                println!("{name}: no such counter");
            }
        }
        Command::Clean { once, now, json } => {
            let counters = open_counters(&config).await?;
            let mut cleaner = counters.cleaner(config.cleaner.clone())?;
            if once {
                let report = match now {
                    Some(now) => cleaner.pass_at(Timestamp::from_secs_f64(now)?).await?,
                    None => cleaner.pass().await?,
                };
                if json {
                    println!("{}", serde_json::to_string(&report)?);
                } else {
                    println!(
                        "scanned {} registry entries, removed {} samples and {} entries in {} round trips",
                        report.scanned,
                        report.samples_removed,
                        report.counters_removed,
                        report.round_trips
                    );
                }
            } else {
                tracing::info!(
                    interval_s = config.cleaner.interval.as_secs(),
                    "cleaner running until SIGTERM or Ctrl-C"
                );
                cleaner.run(shutdown_signal()).await;
            }
        }
        Command::Ts(command) => crate::ts::run(command, &config).await?,
        Command::Daily(command) => crate::daily::run(command, &config).await?,
        Command::Flush { once, sink, json } => {
            crate::buffer::flush(&config, sink.as_deref(), once, json).await?
        }
        Command::Buffer(command) => crate::buffer::run(command, &config).await?,
        Command::Limit(command) => return crate::limit::limit(command, &config).await,
        Command::Lock(command) => return crate::limit::lock(command, &config).await,
        Command::Serve(args) => crate::serve::run(args, &config).await?,
        Command::Bench(command) => crate::bench::run(command, &config).await?,
    }
    Ok(ExitCode::SUCCESS)
}

/// Completes on Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
    tracing::info!("shutdown signal received");
}
