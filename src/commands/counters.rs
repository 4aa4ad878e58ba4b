//! `tally incr|get|counters|delete|clean`: the counters from the command line.
//!
//! Each command opens the counters through [`context::open`], does one thing and
//! prints it (JSON with `--json`). `clean` without `--once` runs the cleaner
//! until SIGTERM or Ctrl-C.

use anyhow::{Result, bail};
use clap::{Args, Subcommand};
use tally::Timestamp;

use super::{At, DeleteArgs, GetArgs, Series, print_deleted};
use crate::config::Config;
use crate::context::{self, shutdown_signal};
use crate::output;

/// The counter commands (top-level subcommands of `tally`).
#[derive(Subcommand, Debug)]
pub enum CounterCommand {
    /// Add COUNT (default 1, may be negative) to a counter at every precision.
    #[command(mut_arg("at", |a| a.help("When it happened, Unix seconds with a fraction [default: now]")))]
    Incr(IncrArgs),
    /// Show a counter's slices: every precision, or one.
    #[command(
        mut_arg("name", |a| a.help("The counter")),
        mut_arg("json", |a| a.help("Print JSON: `[[slice_start, count], ...]` for one precision, or an object keyed by precision for all")),
    )]
    Get(GetArgs),
    /// List counters in name order.
    Counters(ListArgs),
    /// Delete a counter (all its precisions).
    #[command(mut_arg("name", |a| a.help("The counter")))]
    Delete(DeleteArgs),
    /// Trim old slices: passes every --clean-interval until SIGTERM or Ctrl-C.
    Clean(CleanArgs),
}

/// `tally incr`.
#[derive(Args, Debug)]
pub struct IncrArgs {
    /// The counter.
    name: String,
    /// The amount.
    #[arg(default_value_t = 1, allow_negative_numbers = true)]
    count: i64,
    #[command(flatten)]
    at: At,
}

/// `tally counters`.
#[derive(Args, Debug)]
pub struct ListArgs {
    /// Print a JSON array of names.
    #[arg(long)]
    json: bool,
    /// Only names after this one (a cursor).
    #[arg(long, value_name = "NAME")]
    after: Option<String>,
    /// At most this many names [default: all].
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
}

/// `tally clean`.
#[derive(Args, Debug)]
pub struct CleanArgs {
    /// Run one pass (visiting every precision) and exit.
    #[arg(long)]
    pub once: bool,
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
}

impl CounterCommand {
    /// Whether the command runs until stopped (and so logs at `info`).
    pub fn runs_until_stopped(&self) -> bool {
        matches!(self, CounterCommand::Clean(args) if !args.once)
    }
}

pub async fn run(command: CounterCommand, config: &Config) -> Result<()> {
    if let CounterCommand::Counters(ListArgs { limit: Some(0), .. }) = command {
        bail!(tally::Error::InvalidInput(
            "--limit must be at least 1".into()
        ));
    }
    let tally = context::open(config).await?;
    let counters = tally.counters();
    match command {
        CounterCommand::Incr(IncrArgs { name, count, at }) => match at.at {
            Some(at) => counters.incr_at(&name, count, at).await?,
            None => counters.incr(&name, count).await?,
        },
        CounterCommand::Get(GetArgs {
            series: Series {
                name,
                precision: Some(p),
            },
            json,
        }) => {
            let samples = counters.get(&name, p).await?;
            output::print(&samples, json, |s| {
                print!("{}", output::samples_table(&name, p, s))
            })?;
        }
        CounterCommand::Get(GetArgs {
            series: Series {
                name,
                precision: None,
            },
            json,
        }) => {
            let series = counters.get_all(&name).await?;
            if json {
                println!("{}", output::series_json(&series));
            } else {
                print!("{}", output::series_table(&name, &series));
            }
        }
        CounterCommand::Counters(ListArgs { json, after, limit }) => {
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
            output::print(&names, json, |names| {
                for name in names {
                    println!("{name}");
                }
            })?;
        }
        CounterCommand::Delete(DeleteArgs { name, json }) => {
            print_deleted(&name, counters.delete(&name).await?, json, "counter")?;
        }
        CounterCommand::Clean(CleanArgs { once, now, json }) => {
            let mut cleaner = tally.cleaner();
            if once {
                let report = match now {
                    Some(now) => cleaner.pass_at(Timestamp::from_secs_f64(now)?).await?,
                    None => cleaner.pass().await?,
                };
                output::print(&report, json, |report| {
                    println!(
                        "scanned {} registry entries, removed {} samples and {} entries in {} round trips",
                        report.scanned,
                        report.samples_removed,
                        report.counters_removed,
                        report.round_trips
                    )
                })?;
            } else {
                tracing::info!(
                    interval_s = config.cleaner.interval.as_secs(),
                    "cleaner running until SIGTERM or Ctrl-C"
                );
                cleaner.run(shutdown_signal()).await;
            }
        }
    }
    Ok(())
}
