//! Backends: where Tally keeps its data.
//!
//! - [`sqlite`]: the embedded default, a file in a data directory (or memory);
//! - [`redis`]: a standalone Redis server or a Redis Cluster.
//!
//! [`Backend`] names one and opens it; each feature then builds its own store
//! on the opened connection ([`Backend::slice_store`] for the slice engine's
//! spaces, and counters on it with [`Backend::counter_store`];
//! [`Backend::tsdb_store`], [`Backend::daily_store`],
//! [`Backend::idempotency_store`]...).
//!
//! Each backend is a cargo feature (`redis`, `sqlite`; both by default).
//! [`BackendConfig`] names either in any build; [`Backend::open`] refuses one
//! this build lacks with an [`crate::Error::Config`] naming the feature.
//! A build with neither (the PostgreSQL sink alone) opens no backend, so
//! every method below is unreachable there, its arguments unused.
#![cfg_attr(
    not(any(feature = "redis", feature = "sqlite")),
    allow(unreachable_code, unused_variables)
)]

pub mod redis;
#[cfg(feature = "sqlite")]
pub mod sqlite;

use std::path::PathBuf;
use std::sync::Arc;
#[cfg(feature = "redis")]
use std::time::Duration;

use crate::buffers::BufferStore;
use crate::clock::SharedClock;
#[cfg(feature = "redis")]
use crate::counters::CounterSettings;
use crate::daily::{DailyStore, DailyTotal};
use crate::engine::SliceStore;
use crate::error::Result;
use crate::idempotency::IdempotencyStore;
use crate::limits::LimiterStore;
use crate::locks::LockStore;
use crate::tsdb::TsdbStore;

#[cfg(feature = "redis")]
pub use self::redis::Redis;
pub use self::redis::{Layout, ReplicationWait};
#[cfg(feature = "sqlite")]
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
        /// Key layout of counters (`default` or `expiring`: `ria` needs a standalone server).
        layout: Layout,
    },
}

/// An opened backend.
#[derive(Clone, Debug)]
pub enum Backend {
    /// The embedded store.
    #[cfg(feature = "sqlite")]
    Sqlite(Sqlite),
    /// Redis, standalone or cluster.
    #[cfg(feature = "redis")]
    Redis {
        /// The connection.
        redis: Redis,
        /// Key layout of counters.
        layout: Layout,
    },
    /// Never made (it holds an `Infallible`): in a build with neither store
    /// backend (the PostgreSQL sink alone) it keeps the enum from being
    /// empty, so the `match`es below need no second shape.
    #[cfg(not(any(feature = "redis", feature = "sqlite")))]
    #[doc(hidden)]
    Unbuilt(std::convert::Infallible),
}

/// The error for a backend this build lacks.
#[cfg(not(all(feature = "redis", feature = "sqlite")))]
fn not_built(feature: &str) -> crate::Error {
    crate::Error::Config(format!(
        "this tally was built without the `{feature}` feature, so it has no {feature} backend"
    ))
}

/// One feature's store on a backend, as that feature's store trait:
/// `store_on!(backend, |db| on_sqlite, |redis, layout| on_redis)` builds it
/// from a SQLite database or from a Redis connection and its key layout
/// (`_` where unused); a build with neither store backend has no arm to run.
/// `store_on!(backend, SqliteType, RedisType)` builds one whose SQLite store
/// takes the database alone and whose Redis store the connection and layout.
macro_rules! store_on {
    ($backend:expr, $sqlite:ty, $redis:ty $(,)?) => {
        store_on!(
            $backend,
            |db| <$sqlite>::new(db.clone()).await?,
            |redis, layout| <$redis>::new(redis.clone(), layout)
        )
    };
    ($backend:expr, |$db:ident| $sqlite:expr, |$redis:ident, $layout:tt| $on_redis:expr $(,)?) => {
        Ok(match $backend {
            #[cfg(not(any(feature = "redis", feature = "sqlite")))]
            Backend::Unbuilt(never) => match *never {},
            #[cfg(feature = "sqlite")]
            Backend::Sqlite($db) => Arc::new($sqlite),
            #[cfg(feature = "redis")]
            Backend::Redis {
                redis: $redis,
                layout: $layout,
            } => Arc::new($on_redis),
        })
    };
}

impl Backend {
    /// Opens (connects to) the configured backend.
    pub async fn open(config: &BackendConfig) -> Result<Self> {
        Ok(match config {
            #[cfg(feature = "sqlite")]
            BackendConfig::SqliteDir(dir) => Backend::Sqlite(Sqlite::open_dir(dir)?),
            #[cfg(feature = "sqlite")]
            BackendConfig::SqliteMemory => Backend::Sqlite(Sqlite::open_in_memory()?),
            #[cfg(not(feature = "sqlite"))]
            BackendConfig::SqliteDir(_) | BackendConfig::SqliteMemory => {
                return Err(not_built("sqlite"));
            }
            #[cfg(feature = "redis")]
            BackendConfig::Redis { url, layout } => Backend::Redis {
                redis: Redis::connect(url).await?,
                layout: layout.clone(),
            },
            #[cfg(feature = "redis")]
            BackendConfig::RedisCluster { urls, layout } => Backend::Redis {
                redis: Redis::connect_cluster(urls).await?,
                layout: layout.clone(),
            },
            #[cfg(not(feature = "redis"))]
            BackendConfig::Redis { .. } | BackendConfig::RedisCluster { .. } => {
                return Err(not_built("redis"));
            }
        })
    }

    /// On Redis, follows every write with a wait for replicas (see
    /// [`ReplicationWait`]); refused on SQLite, whose commits are durable.
    pub fn with_replication_wait(self, wait: Option<ReplicationWait>) -> Result<Self> {
        match (self, wait) {
            (backend, None) => Ok(backend),
            #[cfg(feature = "redis")]
            (Backend::Redis { redis, layout }, wait) => Ok(Backend::Redis {
                redis: redis.with_replication_wait(wait),
                layout,
            }),
            #[cfg(feature = "sqlite")]
            (Backend::Sqlite(_), Some(_)) => Err(crate::Error::Config(
                "waiting for replicas only applies to Redis".into(),
            )),
            #[cfg(not(any(feature = "redis", feature = "sqlite")))]
            (Backend::Unbuilt(never), Some(_)) => match never {},
        }
    }

    /// A short description for logs: `sqlite:/path`, `redis`, `redis-cluster`.
    pub fn describe(&self) -> String {
        match self {
            #[cfg(not(any(feature = "redis", feature = "sqlite")))]
            Backend::Unbuilt(never) => match *never {},
            #[cfg(feature = "sqlite")]
            Backend::Sqlite(db) => db.describe(),
            #[cfg(feature = "redis")]
            Backend::Redis { redis, .. } if redis.is_cluster() => "redis-cluster".to_owned(),
            #[cfg(feature = "redis")]
            Backend::Redis { .. } => "redis".to_owned(),
        }
    }

    /// The slice engine's store on this backend: every space (counters,
    /// and the others) in one store per backend and key layout.
    pub async fn slice_store(&self, clock: SharedClock) -> Result<Arc<dyn SliceStore>> {
        store_on!(
            self,
            |db| sqlite::SqliteSliceStore::new(db.clone(), clock).await?,
            |redis, layout| self::redis::RedisSliceStore::new(
                redis.clone(),
                layout.clone(),
                clock
            )?
        )
    }

    /// The store counters are kept in: [`Backend::slice_store`] (counters
    /// are the engine's sum kind; [`crate::Counters::new`] takes it).
    pub async fn counter_store(&self, clock: SharedClock) -> Result<Arc<dyn SliceStore>> {
        self.slice_store(clock).await
    }

    /// On Redis, checks that counter hashes written with `settings` and
    /// cleaned every `clean_interval` stay in the compact listpack encoding
    /// on every master ([`self::redis::encoding`]), and logs a warning naming
    /// each node whose `hash-max-listpack-*` limits are too small (or, at
    /// debug level, why the limits could not be read). `None` on SQLite, or
    /// when the limits could not be read. (With the `redis` feature only.)
    #[cfg(feature = "redis")]
    pub async fn check_counter_encoding(
        &self,
        settings: &CounterSettings,
        clean_interval: Duration,
    ) -> Option<self::redis::ListpackCheck> {
        #[cfg_attr(not(feature = "sqlite"), allow(irrefutable_let_patterns))]
        let Backend::Redis { redis, .. } = self else {
            return None;
        };
        let needed = settings.peak_samples(clean_interval);
        match self::redis::encoding::check(redis, needed).await {
            Ok(check) => {
                for problem in check.problems() {
                    tracing::warn!("{problem}");
                }
                Some(check)
            }
            Err(e) => {
                tracing::debug!(error = %e, "could not read the listpack limits of the Redis server");
                None
            }
        }
    }

    /// The daily-statistics store on this backend; on Redis, entity keys go
    /// under `entity_prefix` (`{<prefix>:<id>}:views`, as in the article
    /// of docs/reference.md), with the all-time total kept as `total` says
    /// (SQLite keeps it in a column either way).
    #[cfg_attr(not(feature = "redis"), allow(unused_variables))]
    pub async fn daily_store(
        &self,
        entity_prefix: &str,
        total: DailyTotal,
    ) -> Result<Arc<dyn DailyStore>> {
        store_on!(
            self,
            |db| sqlite::SqliteDailyStore::new(db.clone()).await?,
            |redis, _| self::redis::RedisDailyStore::new(redis.clone(), entity_prefix, total)?
        )
    }

    /// The time-series store on this backend; on Redis, keys go under the
    /// counters' prefix (`{<prefix>:ts:<model>:<vshard>}`).
    #[cfg_attr(not(feature = "sqlite"), allow(unused_variables))]
    pub async fn tsdb_store(&self, clock: SharedClock) -> Result<Arc<dyn TsdbStore>> {
        store_on!(
            self,
            |db| sqlite::SqliteTsdbStore::new(db.clone(), clock).await?,
            |redis, layout| self::redis::RedisTsdbStore::new(redis.clone(), layout.prefix())?
        )
    }

    /// The buffer store (pending rows and flush claims) on this backend.
    pub async fn buffer_store(&self) -> Result<Arc<dyn BufferStore>> {
        store_on!(
            self,
            sqlite::SqliteBufferStore,
            self::redis::RedisBufferStore
        )
    }

    /// The lock store on this backend.
    pub async fn lock_store(&self) -> Result<Arc<dyn LockStore>> {
        store_on!(self, sqlite::SqliteLockStore, self::redis::RedisLockStore)
    }

    /// The idempotency records' store on this backend; on Redis, records go
    /// under the default layout's prefix (`{<prefix>:idem:<key hash>}`).
    pub async fn idempotency_store(&self) -> Result<Arc<dyn IdempotencyStore>> {
        store_on!(
            self,
            sqlite::SqliteIdempotencyStore,
            self::redis::RedisIdempotencyStore
        )
    }

    /// The rate-limit store on this backend.
    pub async fn limiter_store(&self) -> Result<Arc<dyn LimiterStore>> {
        store_on!(
            self,
            sqlite::SqliteLimiterStore,
            self::redis::RedisLimiterStore
        )
    }
}
