//! `tally limit check` and `tally lock acquire|extend|release`.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Result, bail};
use clap::{Args, Subcommand};
use tally::{Acquisition, Algorithm, Backend, FailMode, Limit, Limiter, Locks, SystemClock};

use crate::config::{Config, window_ms};

/// Exit code of a check that was denied, or of a lock that is held.
pub const EXIT_LIMITED: u8 = 3;

/// `tally limit ...`
#[derive(Subcommand, Debug)]
pub enum LimitCommand {
    /// Check COST units for KEY against a limit, counting them if admitted.
    /// Exits 0 when admitted, 3 when limited.
    Check(CheckArgs),
}

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

pub async fn limit(command: LimitCommand, config: &Config) -> Result<ExitCode> {
    let LimitCommand::Check(args) = command;
    let limit = limit_of(&args, config)?;
    let backend = Backend::open(&config.backend).await?;
    let limiter = Limiter::new(backend.limiter_store().await?, Arc::new(SystemClock));
    let d = limiter.check(&args.key, &limit, args.cost).await?;
    if args.json {
        println!("{}", serde_json::to_string(&d)?);
    } else {
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
        );
    }
    Ok(if d.allowed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_LIMITED)
    })
}

/// `tally lock ...`
#[derive(Subcommand, Debug)]
pub enum LockCommand {
    /// Take a lock; prints its token and fencing number. Exits 3 when held.
    Acquire {
        /// The lock's name.
        name: String,
        /// Lease, seconds.
        #[arg(long, value_name = "SECONDS")]
        ttl: f64,
        /// Wait up to this long for the lock (jittered backoff) [default: 0].
        #[arg(long, value_name = "SECONDS", default_value_t = 0.0)]
        wait: f64,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Extend a lock held with TOKEN. Exits 3 when TOKEN does not hold it.
    Extend {
        /// The lock's name.
        name: String,
        /// The token from `acquire`.
        token: String,
        /// New lease from now, seconds.
        #[arg(long, value_name = "SECONDS")]
        ttl: f64,
    },
    /// Release a lock held with TOKEN. Exits 3 when TOKEN does not hold it.
    Release {
        /// The lock's name.
        name: String,
        /// The token from `acquire`.
        token: String,
    },
}

fn secs(v: f64, what: &str) -> Result<Duration> {
    if !v.is_finite() || !(0.0..1e9).contains(&v) {
        bail!(tally::Error::InvalidInput(format!(
            "{what} must be a number of seconds, got {v}"
        )));
    }
    Ok(Duration::from_secs_f64(v))
}

pub async fn lock(command: LockCommand, config: &Config) -> Result<ExitCode> {
    let backend = Backend::open(&config.backend).await?;
    let locks = Locks::new(backend.lock_store().await?, Arc::new(SystemClock));
    let ok = match command {
        LockCommand::Acquire {
            name,
            ttl,
            wait,
            json,
        } => {
            let (ttl, wait) = (secs(ttl, "--ttl")?, secs(wait, "--wait")?);
            let got = if wait.is_zero() {
                locks.acquire_once(&name, ttl).await?
            } else {
                match locks.acquire(&name, ttl, wait).await? {
                    // The CLI hands the lease to the caller: no release on drop.
                    Some(guard) => {
                        let lease = guard.lease().clone();
                        std::mem::forget(guard);
                        Acquisition::Acquired(lease)
                    }
                    None => locks.acquire_once(&name, ttl).await?,
                }
            };
            if json {
                println!("{}", serde_json::to_string(&got)?);
            } else {
                match &got {
                    Acquisition::Acquired(l) => println!("{} {}", l.token, l.fence),
                    Acquisition::Held { retry_after_ms } => {
                        println!("held, free in at most {retry_after_ms} ms")
                    }
                }
            }
            matches!(got, Acquisition::Acquired(_))
        }
        LockCommand::Extend { name, token, ttl } => {
            locks.extend(&name, &token, secs(ttl, "--ttl")?).await?
        }
        LockCommand::Release { name, token } => locks.release(&name, &token).await?,
    };
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_LIMITED)
    })
}
