//! Backends: where Tally keeps its data.
//!
//! - [`sqlite`]: the embedded default, a file in a data directory (or memory);
//! - [`redis`]: a standalone Redis server or a Redis Cluster.
//!
//! [`Backend`] names one and opens it; each feature then builds its own store
//! on the opened connection (e.g. [`Backend::counter_store`]).

pub mod redis;
pub mod sqlite;

use std::path::PathBuf;
use std::sync::Arc;

use crate::buffers::BufferStore;
use crate::clock::SharedClock;
use crate::counters::CounterStore;
use crate::error::Result;
use crate::limits::LimiterStore;
use crate::locks::LockStore;

pub use self::redis::{Layout, Redis};
pub use self::sqlite::Sqlite;

/// Where data lives, as configured.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BackendConfig {
    /// SQLite in `dir/tally.sqlite3`.
    SqliteDir(PathBuf),
    /// SQLite in memory (for tests and in-process use).
    SqliteMemory,
    /// A standalone Redis server.
    Redis {
        /// `redis://` or `rediss://` URL.
        url: String,
        /// Key layout of counters.
        layout: Layout,
    },
    /// A Redis Cluster.
    RedisCluster {
        /// Seed node URLs.
        urls: Vec<String>,
        /// Key layout of counters (must be the tagged one).
        layout: Layout,
    },
}

/// An opened backend.
#[derive(Clone, Debug)]
pub enum Backend {
    /// The embedded store.
    Sqlite(Sqlite),
    /// Redis, standalone or cluster.
    Redis {
        /// The connection.
        redis: Redis,
        /// Key layout of counters.
        layout: Layout,
    },
}

impl Backend {
    /// Opens (connects to) the configured backend.
    pub async fn open(config: &BackendConfig) -> Result<Self> {
        Ok(match config {
            BackendConfig::SqliteDir(dir) => Backend::Sqlite(Sqlite::open_dir(dir)?),
            BackendConfig::SqliteMemory => Backend::Sqlite(Sqlite::open_in_memory()?),
            BackendConfig::Redis { url, layout } => Backend::Redis {
                redis: Redis::connect(url).await?,
                layout: layout.clone(),
            },
            BackendConfig::RedisCluster { urls, layout } => Backend::Redis {
                redis: Redis::connect_cluster(urls).await?,
                layout: layout.clone(),
            },
        })
    }

    /// A short description for logs: `sqlite:/path`, `redis`, `redis-cluster`.
    pub fn describe(&self) -> String {
        match self {
            Backend::Sqlite(db) => match db.path() {
                Some(path) => format!("sqlite:{}", path.display()),
                None => "sqlite::memory:".to_owned(),
            },
            Backend::Redis { redis, .. } if redis.is_cluster() => "redis-cluster".to_owned(),
            Backend::Redis { .. } => "redis".to_owned(),
        }
    }

    /// The counter store on this backend.
    pub async fn counter_store(&self, clock: SharedClock) -> Result<Arc<dyn CounterStore>> {
        Ok(match self {
            Backend::Sqlite(db) => {
                Arc::new(sqlite::SqliteCounterStore::new(db.clone(), clock).await?)
            }
            Backend::Redis { redis, layout } => Arc::new(self::redis::RedisCounterStore::new(
                redis.clone(),
                layout.clone(),
            )?),
        })
    }

    /// The buffer store (pending rows and flush claims) on this backend.
    pub async fn buffer_store(&self) -> Result<Arc<dyn BufferStore>> {
        Ok(match self {
            Backend::Sqlite(db) => Arc::new(sqlite::SqliteBufferStore::new(db.clone()).await?),
            Backend::Redis { redis, layout } => {
                Arc::new(self::redis::RedisBufferStore::new(redis.clone(), layout))
            }
        })
    }

    /// The lock store on this backend.
    pub async fn lock_store(&self) -> Result<Arc<dyn LockStore>> {
        Ok(match self {
            Backend::Sqlite(db) => Arc::new(sqlite::SqliteLockStore::new(db.clone()).await?),
            Backend::Redis { redis, layout } => {
                Arc::new(self::redis::RedisLockStore::new(redis.clone(), layout))
            }
        })
    }

    /// The rate-limit store on this backend.
    pub async fn limiter_store(&self) -> Result<Arc<dyn LimiterStore>> {
        Ok(match self {
            Backend::Sqlite(db) => Arc::new(sqlite::SqliteLimiterStore::new(db.clone()).await?),
            Backend::Redis { redis, layout } => {
                Arc::new(self::redis::RedisLimiterStore::new(redis.clone(), layout))
            }
        })
    }
}
