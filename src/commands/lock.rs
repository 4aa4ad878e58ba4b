//! `tally lock acquire|extend|release`: locks with a lease and a fencing
//! token from the command line.
//!
//! The lease is handed to the caller (nothing is released when the command
//! exits); the exit code carries the answer (0 done, 3 held or not the
//! holder).

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Result, bail};
use clap::Subcommand;
use tally::Acquisition;

use crate::config::Config;
use crate::context;
use crate::output::{self, EXIT_LIMITED};

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

pub async fn run(command: LockCommand, config: &Config) -> Result<ExitCode> {
    let locks = context::open(config).await?.locks();
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
            output::print(&got, json, |got| match got {
                Acquisition::Acquired(l) => println!("{} {}", l.token, l.fence),
                Acquisition::Held { retry_after_ms } => {
                    println!("held, free in at most {retry_after_ms} ms")
                }
            })?;
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
