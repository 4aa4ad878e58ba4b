//! What the commands share: the configured backend opened once, each
//! service on it, and the shutdown signal.
//!
//! Every command opens its store through [`Context`], so every service sees
//! the same backend (with the replication wait, if configured) and the same
//! clock. Validation of the command's own input comes first, in the command,
//! so bad input opens nothing. This module imports no command and not the
//! dispatcher.

use std::sync::Arc;

use anyhow::Result;
use tally::buffers::{Buffers, Tables};
use tally::clock::SharedClock;
use tally::{Backend, Counters, DailyStats, Limiter, Locks, SystemClock, Tsdb};

use crate::config::Config;

/// The configured backend, open, with the configuration and the clock.
pub struct Context<'a> {
    /// The validated configuration.
    pub config: &'a Config,
    /// The open backend.
    pub backend: Backend,
    /// The clock every service reads (the system's).
    pub clock: SharedClock,
}

impl<'a> Context<'a> {
    /// Opens the configured backend, with the replication wait if any.
    pub async fn open(config: &'a Config) -> Result<Self> {
        let backend = Backend::open(&config.backend)
            .await?
            .with_replication_wait(config.wait)?;
        Ok(Context {
            config,
            backend,
            clock: Arc::new(SystemClock),
        })
    }

    /// The counters, after a warning if the Redis server's hash encoding
    /// would make them costly.
    pub async fn counters(&self) -> Result<Counters> {
        self.backend
            .check_counter_encoding(&self.config.counters, self.config.cleaner.interval)
            .await;
        let store = self.backend.counter_store(self.clock.clone()).await?;
        Ok(Counters::with_clock(
            store,
            self.config.counters.clone(),
            self.clock.clone(),
        )?)
    }

    /// The time-series store.
    pub async fn tsdb(&self) -> Result<Tsdb> {
        let store = self.backend.tsdb_store(self.clock.clone()).await?;
        Ok(Tsdb::with_clock(
            store,
            self.config.tsdb.clone(),
            self.clock.clone(),
        )?)
    }

    /// The daily statistics.
    pub async fn daily(&self) -> Result<DailyStats> {
        let store = self.backend.daily_store(&self.config.entity_prefix).await?;
        Ok(DailyStats::with_clock(
            store,
            self.config.daily.clone(),
            self.clock.clone(),
        )?)
    }

    /// The buffers of the mapped `tables`.
    pub async fn buffers(&self, tables: Tables) -> Result<Buffers> {
        let store = self.backend.buffer_store().await?;
        Ok(Buffers::new(store, tables, self.clock.clone()))
    }

    /// The rate limiter.
    pub async fn limiter(&self) -> Result<Limiter> {
        Ok(Limiter::new(
            self.backend.limiter_store().await?,
            self.clock.clone(),
        ))
    }

    /// The locks.
    pub async fn locks(&self) -> Result<Locks> {
        Ok(Locks::new(
            self.backend.lock_store().await?,
            self.clock.clone(),
        ))
    }
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
