//! What the commands share: the configured [`Tally`] (the backend opened
//! once, every service on it) and the shutdown signal.
//!
//! Every command opens its services through [`open`], so every service sees
//! the same backend (with the replication wait, if configured) and the same
//! clock. Validation of the command's own input comes first, in the command,
//! so bad input opens nothing. This module imports no command and not the
//! dispatcher.

use anyhow::Result;
use tally::{Tally, TallyBuilder};

use crate::config::Config;

/// A builder with every setting of the configuration (the commands that
/// need more, like `serve`, add theirs before opening).
pub fn builder(config: &Config) -> TallyBuilder {
    let builder = Tally::builder()
        .counter_settings(config.counters.clone())
        .cleaner_settings(config.cleaner.clone())
        .tsdb_settings(config.tsdb.clone())
        .daily_settings(config.daily.clone())
        .entity_prefix(config.entity_prefix.clone())
        .daily_total(config.daily_total);
    match config.wait {
        Some(wait) => builder.replication_wait(wait),
        None => builder,
    }
}

/// Opens the configured backend and its services (on Redis, after a
/// warning if the server's hash encoding would make the counters costly).
pub async fn open(config: &Config) -> Result<Tally> {
    Ok(builder(config).open_backend(config.backend.clone()).await?)
}

/// Completes on Ctrl-C or SIGTERM. The signals are caught from this call
/// on (not from the first poll): call it before telling anyone the process
/// is up, so that a SIGTERM sent right after is a shutdown, not a kill.
pub fn shutdown_signal() -> impl std::future::Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    let signals = {
        use tokio::signal::unix::{SignalKind, signal};
        [
            signal(SignalKind::terminate()).ok(),
            signal(SignalKind::interrupt()).ok(),
        ]
    };
    async move {
        #[cfg(unix)]
        {
            let [term, int] = signals;
            let wait = |s: Option<tokio::signal::unix::Signal>| async move {
                match s {
                    Some(mut s) => {
                        s.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                _ = wait(term) => {},
                _ = wait(int) => {},
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
        tracing::info!("shutdown signal received");
    }
}
