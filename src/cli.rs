//! The dispatcher: the `tally` command line ([`Cli`]), one variant per
//! command group, and the `match` that runs the chosen command.
//!
//! Each group's arguments and behaviour live in [`crate::commands`]; what
//! they share (configuration, the open store, output) in [`crate::config`],
//! [`crate::context`] and [`crate::output`]. Nothing imports this module but
//! `main`.

use std::process::ExitCode;

use anyhow::Result;
use clap::{CommandFactory, Parser, Subcommand};

#[cfg(feature = "bench")]
use crate::commands::bench::BenchCommand;
use crate::commands::buffer::BufferGroup;
use crate::commands::completions::CompletionsArgs;
use crate::commands::counters::CounterCommand;
use crate::commands::daily::DailyCommand;
use crate::commands::limit::LimitCommand;
use crate::commands::lock::LockCommand;
use crate::commands::migrate::MigrateArgs;
use crate::commands::serve::ServeArgs;
use crate::commands::sets::SetsCommand;
use crate::commands::stats::StatsCommand;
use crate::commands::ts::TsCommand;
use crate::commands::{self};
use crate::config::{Config, GlobalArgs};

/// Counters at several precisions with retention, on Redis or an embedded
/// SQLite store.
#[derive(Parser, Debug)]
#[command(
    name = "tally",
    version,
    about,
    max_term_width = 100,
    after_help = "Logs go to stderr: RUST_LOG sets their level (e.g. RUST_LOG=debug)."
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    // incr, get, counters, delete, clean
    #[command(flatten)]
    Counters(CounterCommand),
    /// The time-series store: counts, distinct counts and most frequent
    /// items per model and key, at several precisions (its rollups).
    #[command(subcommand)]
    Ts(TsCommand),
    /// Per-entity daily statistics: views per day, last N days, total.
    #[command(subcommand)]
    Daily(DailyCommand),
    // flush, buffer
    #[command(flatten)]
    Buffers(BufferGroup),
    /// Statistics: record values, read count, sum, min, max, mean, stddev
    /// and quantiles per slice, rank statistics.
    #[command(subcommand)]
    Stats(StatsCommand),
    /// Sets: add members, read distinct counts per slice and over
    /// everything kept.
    #[command(subcommand)]
    Sets(SetsCommand),
    /// Rate limits: check a key against a limit or a named policy.
    #[command(subcommand)]
    Limit(LimitCommand),
    /// Locks with a lease and a fencing token.
    #[command(subcommand)]
    Lock(LockCommand),
    /// Serve the HTTP API, the dashboard, /metrics and (optionally) statsd and
    /// carbon, with the cleaner running inside, until SIGTERM or Ctrl-C.
    Serve(Box<ServeArgs>),
    /// Copy every counter, statistic, gauge and set from one store into another
    /// (resumable: run it again to finish an interrupted migration).
    Migrate(MigrateArgs),
    /// Benchmarks (see BENCHMARKS.md). Only in a build with the `bench`
    /// feature: without it `tally bench` is a usage error saying how to build it.
    #[cfg(feature = "bench")]
    #[command(subcommand)]
    Bench(BenchCommand),
    /// Print shell completions (bash, zsh, fish...) to stdout.
    Completions(CompletionsArgs),
}

impl Command {
    /// Whether the command runs until SIGTERM or Ctrl-C (and so logs at
    /// `info` by default, else `warn`).
    fn runs_until_stopped(&self) -> bool {
        match self {
            Command::Counters(c) => c.runs_until_stopped(),
            Command::Buffers(c) => c.runs_until_stopped(),
            Command::Serve(_) => true,
            _ => false,
        }
    }
}

/// Parses the command line, exiting on a usage error. Without the `bench`
/// feature, `tally bench` is such an error, and it says how to build it in.
pub fn parse() -> Cli {
    Cli::try_parse().unwrap_or_else(|e| {
        #[cfg(not(feature = "bench"))]
        commands::bench::explain_missing(&e);
        e.exit()
    })
}

pub fn init_tracing(cli: &Cli) {
    let default = if cli.command.runs_until_stopped() {
        "info"
    } else {
        "warn"
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

/// Runs the command: resolves the configuration (but not for
/// `completions`, which needs none), then hands over to the command's group.
pub async fn run(cli: Cli) -> Result<ExitCode> {
    let Cli { global, command } = cli;
    if let Command::Completions(args) = command {
        commands::completions::run(args, Cli::command());
        return Ok(ExitCode::SUCCESS);
    }
    let config = Config::resolve(&global)?;
    match command {
        Command::Counters(c) => commands::counters::run(c, &config).await?,
        Command::Ts(c) => commands::ts::run(c, &config).await?,
        Command::Daily(c) => commands::daily::run(c, &config).await?,
        Command::Buffers(c) => commands::buffer::run(c, &config).await?,
        Command::Stats(c) => commands::stats::run(c, &config).await?,
        Command::Sets(c) => commands::sets::run(c, &config).await?,
        Command::Limit(c) => return commands::limit::run(c, &config).await,
        Command::Lock(c) => return commands::lock::run(c, &config).await,
        Command::Serve(args) => commands::serve::run(*args, &config).await?,
        Command::Migrate(args) => commands::migrate::run(args, &config).await?,
        #[cfg(feature = "bench")]
        Command::Bench(c) => commands::bench::run(c, &config).await?,
        Command::Completions(_) => {} // answered above, before the config
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    /// Every argument and option of every command says what it is, so that
    /// each `--help` describes all it accepts.
    #[test]
    fn every_argument_is_described() {
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            if cmd.get_about().is_none() {
                missing.push(format!("{path} (the command)"));
            }
            for arg in cmd.get_arguments() {
                if arg.get_help().is_none() {
                    missing.push(format!("{path}: {}", arg.get_id()));
                }
            }
            for sub in cmd.get_subcommands() {
                walk(sub, &format!("{path} {}", sub.get_name()), missing);
            }
        }
        let mut cmd = Cli::command();
        cmd.build();
        let mut missing = Vec::new();
        walk(&cmd, "tally", &mut missing);
        assert!(missing.is_empty(), "undescribed: {missing:#?}");
    }
}
