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
        .entity_prefix(config.entity_prefix.clone());
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
