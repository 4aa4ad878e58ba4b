//! `tally limit check`: a rate-limit decision from the command line.
//!
//! The limit (a named policy, or --algorithm, --limit and --window) is
//! checked before the backend is opened; the exit code carries the answer
//! (0 admitted, 3 limited).

use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::{Args, Subcommand};
use tally::{Algorithm, FailMode, Limit};

use crate::config::{Config, window_ms};
use crate::context;
use crate::output::{self, EXIT_LIMITED};

/// `tally limit ...`
#[derive(Subcommand, Debug)]
pub enum LimitCommand {
    /// Check COST units for KEY against a limit, counting them if admitted.
    /// Exits 0 when admitted, 3 when limited.
    Check(CheckArgs),
}

/// `tally limit check`.
#[derive(Args, Debug)]
pub struct CheckArgs {
    /// The key (a user, a client address, a token...).
    key: String,
    /// A named policy from the config file's [limits.policies.NAME].
    #[arg(long, conflicts_with_all = ["algorithm", "limit", "window", "burst"])]
    policy: Option<String>,
    /// fixed | sliding | gcra.
    #[arg(long, value_name = "fixed|sliding|gcra", value_parser = parse_algorithm)]
    algorithm: Option<Algorithm>,
    /// Units per window.
    #[arg(long, value_name = "N")]
    limit: Option<u64>,
    /// The window in seconds (fractions allowed, rounded to ms).
    #[arg(long, value_name = "SECONDS")]
    window: Option<f64>,
    /// GCRA only: the largest burst [default: the limit].
    #[arg(long, value_name = "N")]
    burst: Option<u64>,
    /// Units this check counts.
    #[arg(long, default_value_t = 1, value_name = "N")]
    cost: u64,
    /// Answer `closed` (deny) instead of `open` (admit) when the backend fails.
    #[arg(long, value_name = "open|closed")]
    on_error: Option<FailModeArg>,
    /// Print the decision as JSON.
    #[arg(long)]
    json: bool,
}

impl std::str::FromStr for FailModeArg {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "open" => Ok(FailModeArg(FailMode::Open)),
            "closed" => Ok(FailModeArg(FailMode::Closed)),
            _ => Err(format!("expected open or closed, got {s:?}")),
        }
    }
}

/// Parses `open` / `closed`.
#[derive(Clone, Copy, Debug)]
pub struct FailModeArg(pub FailMode);

fn parse_algorithm(s: &str) -> std::result::Result<Algorithm, String> {
    s.parse().map_err(|e: tally::Error| e.to_string())
}

fn limit_of(args: &CheckArgs, config: &Config) -> Result<Limit> {
    let mut limit = match &args.policy {
        Some(name) => match config.policies.get(name) {
            Some(limit) => *limit,
            None => bail!(tally::Error::InvalidInput(format!(
                "no policy {name:?} in the config file (policies: {})",
                config
                    .policies
                    .keys()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        },
        None => {
            let (Some(algorithm), Some(n), Some(window)) =
                (args.algorithm, args.limit, args.window)
            else {
                bail!(tally::Error::InvalidInput(
                    "give --policy NAME, or --algorithm, --limit and --window".into()
                ));
            };
            Limit {
                algorithm,
                limit: n,
                window_ms: window_ms(window, "--window")?,
                burst: args.burst,
                on_error: FailMode::Open,
            }
        }
    };
    if let Some(FailModeArg(mode)) = args.on_error {
        limit.on_error = mode;
    }
    Ok(limit)
}

pub async fn run(command: LimitCommand, config: &Config) -> Result<ExitCode> {
    let LimitCommand::Check(args) = command;
    let limit = limit_of(&args, config)?;
    let limiter = context::open(config).await?.limiter();
    let d = limiter.check(&args.key, &limit, args.cost).await?;
    output::print(&d, args.json, |d| {
        let retry = match d.retry_after_ms {
            Some(0) => String::new(),
            Some(ms) => format!(", retry after {ms} ms"),
            None => ", never (the cost exceeds the limit)".to_owned(),
        };
        println!(
            "{}: {} of {} remaining, resets at {} ms{retry}{}",
            if d.allowed { "allowed" } else { "limited" },
            d.remaining,
            d.limit,
            d.reset_at_ms,
            if d.degraded {
                " (backend down: fail mode)"
            } else {
                ""
            }
        )
    })?;
    Ok(if d.allowed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_LIMITED)
    })
}
