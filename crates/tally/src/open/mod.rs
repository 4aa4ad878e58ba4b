//! Tally in one line: [`Tally::open`] connects to a target and hands out
//! every service on it, with defaults; [`Tally::builder`] changes them.
//!
//! What it owns: reading a target ([`target`]), checking every setting
//! before anything is opened (bad input opens nothing and names the
//! problem), opening the backend once, building each service on it once
//! (all sharing the backend and one clock), starting the aggregating
//! writer on first use and flushing it on [`Tally::shutdown`].
//!
//! What it does not do: run the cleaner or a buffer flusher by itself
//! (they are long-running tasks the application spawns and stops:
//! [`Tally::cleaner`], [`crate::buffers::Flusher`]), or hold state of its
//! own beyond the services: each service behaves exactly as when built by
//! hand from a [`Backend`].
//!
//! The registry of spaces ([`SPACES`]): every service of named series the
//! slice engine carries for an opened [`Tally`] is listed once, beside the
//! fields it reads. Opening builds each service with its own settings;
//! from then on, whatever goes over every space iterates the list: the
//! cleaner ([`Tally::cleaner`]), shutdown ([`Tally::shutdown`] flushes each
//! started writer), the Graphite source ([`Tally::graphite_source`]),
//! `tally migrate` ([`crate::migrate`]) and the statsd listener's targets
//! ([`crate::statsd::Target`]). A new kind's service is its field
//! and accessor on [`Tally`], built in opening, and one entry in the list.

pub mod target;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::backend::redis::layout::{check_compact, check_prefix};
use crate::backend::redis::{Layout, ReplicationWait};
use crate::backend::{Backend, BackendConfig};
use crate::buffers::{BufferStore, Buffers, Tables};
use crate::clock::{SharedClock, SystemClock};
use crate::counters::{CounterSettings, CounterWriter, Counters};
use crate::daily::{DEFAULT_ENTITY_PREFIX, DailySettings, DailyStats, DailyTotal, DailyWriter};
use crate::engine::series::{PlainRules, SeriesService};
use crate::engine::{
    Cleaner, CleanerSettings, Precision, SliceStore, Space, Writer, WriterSettings,
};
use crate::error::{Error, Result};
use crate::gauges::{Gauges, GaugesWriter};
use crate::graphite::{Family, Namespace, Shape, Source};
use crate::idempotency::{self, Idempotency};
use crate::limits::Limiter;
use crate::locks::Locks;
use crate::sets::{Sets, SetsWriter};
use crate::stats::{Stats, StatsSettings, StatsWriter};
use crate::statsd::Target as StatsdTarget;
use crate::tsdb::{Tsdb, TsdbSettings};

/// The longest accepted [`ReplicationWait::timeout`] (each write may wait
/// that long).
pub const MAX_REPLICATION_TIMEOUT: Duration = Duration::from_secs(60);

/// An open Tally: one backend and every service on it. Cheap to clone
/// (clones share the services).
///
/// # Example
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> tally::Result<()> {
/// let tally = tally::Tally::open("sqlite::memory:").await?;
///
/// tally.counters().incr("hits", 1).await?; // written before it returns
/// tally.writer().add("hits", 2, None).await?; // merged in memory, flushed in batches
/// tally.shutdown().await; // flushes the writer
///
/// let total: i64 = tally.counters().get("hits", 86_400).await?.iter().map(|s| s.count).sum();
/// assert_eq!(total, 3);
/// # Ok(())
/// # }
/// ```
///
/// The same line opens `redis://127.0.0.1/`, a cluster
/// (`redis+cluster://h1:7000,h2:7001`) or a data directory: see
/// [`target`] for every form.
#[derive(Clone, Debug)]
pub struct Tally {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    backend: Backend,
    clock: SharedClock,
    cleaner: CleanerSettings,
    writer_settings: WriterSettings,
    counters: Counters,
    writer: OnceLock<CounterWriter>,
    tsdb: Tsdb,
    daily: DailyStats,
    daily_writer: OnceLock<DailyWriter>,
    buffer_store: Arc<dyn BufferStore>,
    limiter: Limiter,
    locks: Locks,
    stats: Stats,
    stats_writer: OnceLock<StatsWriter>,
    gauges: Gauges,
    gauges_writer: OnceLock<GaugesWriter>,
    sets: Sets,
    sets_writer: OnceLock<SetsWriter>,
    idempotency: Idempotency,
}

/// One space of an opened [`Tally`]: its service's store and space, its
/// started writer, its place in the Graphite namespace and in a migration.
pub struct SpaceEntry {
    /// The space's id ([`Space::id`]): `counters`, `stats`, `gauges`, `sets`.
    pub id: &'static str,
    /// The lane of a migration's write ids for this space (stored in the
    /// target's write-id records: never renumber an entry).
    pub lane: u32,
    /// Where its Graphite families come in the source (paths that meet
    /// are answered by the lower rank first).
    pub graphite_rank: u8,
    /// The space of the service.
    pub space: fn(&Tally) -> Arc<Space>,
    /// The store it is kept in.
    pub store: fn(&Tally) -> Arc<dyn SliceStore>,
    /// Its Graphite shapes in a namespace (statistics: a leaf per quantile).
    pub shapes: fn(&Tally, Namespace, &[f64]) -> Vec<Shape>,
    /// Its aggregating writer's engine, if it was started.
    pub started_writer: fn(&Tally) -> Option<Writer>,
    /// Its aggregating writer (started) as the statsd listener's target,
    /// if the kind has a statsd type: which readings it takes, and how.
    pub statsd: Option<fn(&Tally) -> StatsdTarget>,
}

impl std::fmt::Debug for SpaceEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpaceEntry")
            .field("id", &self.id)
            .field("lane", &self.lane)
            .finish_non_exhaustive()
    }
}

/// The [`SpaceEntry`] of a kind of series whose service an opened
/// [`Tally`] holds as `inner.$service` and whose aggregating writer it
/// hands out as `$writer` (held as `inner.$writer`); its Graphite shapes
/// ([`SpaceEntry::shapes`]) are `$shapes`, by default the service's
/// `graphite_shapes` in the namespace.
macro_rules! entry {
    ($id:expr, lane $lane:literal, rank $rank:literal, $service:ident, $writer:ident) => {
        entry!($id, lane $lane, rank $rank, $service, $writer,
               |t, ns, _| t.inner.$service.graphite_shapes(ns))
    };
    ($id:expr, lane $lane:literal, rank $rank:literal, $service:ident, $writer:ident,
     $shapes:expr) => {
        SpaceEntry {
            id: $id,
            lane: $lane,
            graphite_rank: $rank,
            space: |t| t.inner.$service.space().clone(),
            store: |t| t.inner.$service.store().clone(),
            shapes: $shapes,
            started_writer: |t| t.inner.$writer.get().map(|w| w.engine().clone()),
            statsd: Some(|t| StatsdTarget::of(t.$writer())),
        }
    };
}

/// Every space, in the order a migration copies them and the cleaner
/// trims them.
pub const SPACES: &[SpaceEntry] = &[
    entry! { Space::COUNTERS, lane 0, rank 0, counters, writer },
    entry! { crate::stats::SPACE, lane 1, rank 3, stats, stats_writer,
    |t, ns, quantiles| t.inner.stats.graphite_shapes(ns, quantiles) },
    entry! { crate::gauges::SPACE, lane 2, rank 1, gauges, gauges_writer },
    entry! { crate::sets::SPACE, lane 3, rank 2, sets, sets_writer },
];

/// The accessors of [`Tally`], each named after the field of `Inner` it
/// hands out: `name: Type;` a clone of the service; `name: Type, started
/// over service;` the aggregating writer over `self.service()`, started on
/// first use ([`Tally::started`]).
macro_rules! accessors {
    () => {};
    ($(#[$attr:meta])* $name:ident: $ty:ty; $($rest:tt)*) => {
        $(#[$attr])*
        pub fn $name(&self) -> $ty {
            self.inner.$name.clone()
        }
        accessors! { $($rest)* }
    };
    ($(#[$attr:meta])* $name:ident: $ty:ty, started over $service:ident; $($rest:tt)*) => {
        $(#[$attr])*
        pub fn $name(&self) -> $ty {
            self.started(&self.inner.$name, |s| <$ty>::start(self.$service(), s))
        }
        accessors! { $($rest)* }
    };
}

impl Tally {
    /// Opens `target` with every setting at its default: a Redis URL
    /// (`redis://`, `rediss://`), a cluster (`redis+cluster://h1:p1,h2:p2`),
    /// `sqlite::memory:` or a data directory (a path or `sqlite:///path`);
    /// [`target`] lists the forms. A target that is none of them is
    /// [`Error::Config`] naming what is wrong and listing the forms; a
    /// server that cannot be reached is [`Error::Unavailable`].
    ///
    /// On Redis, opening also reads the servers' `hash-max-listpack-*`
    /// limits and logs a warning when counter hashes would outgrow them
    /// (see [`Backend::check_counter_encoding`]).
    pub async fn open(target: &str) -> Result<Tally> {
        Tally::builder().open(target).await
    }

    /// A builder to change settings before opening.
    pub fn builder() -> TallyBuilder {
        TallyBuilder::default()
    }

    accessors! {
        /// The counters ("Redis in Action" 5.2): exact writes, one round trip each.
        counters: Counters;

        /// The time-series store (Sentry's TSDB: rollups, distinct counts, most
        /// frequent items).
        tsdb: Tsdb;

        /// Daily statistics per entity.
        daily: DailyStats;

        /// The rate limiter (one per `Tally`, so its metrics count every check).
        limiter: Limiter;

        /// Locks with a lease.
        locks: Locks;

        /// Statistics (count, sum, min, max, mean, standard deviation and
        /// quantiles per slice): exact writes, one round trip each.
        stats: Stats;

        /// Gauges (set and adjusted values; last, min and max per slice at the
        /// counters' precisions and samples): exact writes, one round trip each.
        gauges: Gauges;

        /// Sets (distinct counts per slice at the counters' precisions and
        /// samples): exact writes, one round trip each.
        sets: Sets;

        /// Idempotency records (the `Idempotency-Key` protocol), kept for the
        /// configured retention (default 24 h): pass it to
        /// [`CounterWriter::add_many_once`]; [`Counters::incr_many_once`] needs
        /// none.
        idempotency: Idempotency;

        /// The aggregating writer over [`Tally::counters`], started on the
        /// current Tokio runtime the first time it is asked for; every later
        /// call returns the same writer. [`Tally::shutdown`] flushes and stops
        /// it; after that, its `add` fails as shut down.
        ///
        /// # Panics
        ///
        /// When first called outside a Tokio runtime (it spawns its flusher).
        #[doc(alias = "aggregator")]
        writer: CounterWriter, started over counters;

        /// The aggregating writer over [`Tally::daily`] (views of an entity
        /// and day merged in memory, written in batches, each exactly once),
        /// started on the first call with the Tally's writer settings; every
        /// later call returns the same writer. [`Tally::shutdown`] flushes and
        /// stops it.
        daily_writer: DailyWriter, started over daily;

        /// The aggregating writer over [`Tally::stats`], started on the
        /// current Tokio runtime the first time it is asked for (with the
        /// writer settings); every later call returns the same writer.
        /// [`Tally::shutdown`] flushes and stops it.
        ///
        /// # Panics
        ///
        /// When first called outside a Tokio runtime (it spawns its flusher).
        stats_writer: StatsWriter, started over stats;

        /// The aggregating writer over [`Tally::gauges`] (the statsd listener's
        /// path), started on the current Tokio runtime the first time it is
        /// asked for; [`Tally::shutdown`] flushes and stops it.
        ///
        /// # Panics
        ///
        /// When first called outside a Tokio runtime (it spawns its flusher).
        gauges_writer: GaugesWriter, started over gauges;

        /// The aggregating writer over [`Tally::sets`] (the statsd listener's
        /// path), started on the current Tokio runtime the first time it is
        /// asked for; [`Tally::shutdown`] flushes and stops it.
        ///
        /// # Panics
        ///
        /// When first called outside a Tokio runtime (it spawns its flusher).
        sets_writer: SetsWriter, started over sets;
    }

    /// The writer in `cell`, started on first use by `start` with the
    /// writer settings (checked when the Tally was opened).
    fn started<W: Clone>(
        &self,
        cell: &OnceLock<W>,
        start: impl FnOnce(WriterSettings) -> Result<W>,
    ) -> W {
        cell.get_or_init(|| {
            start(self.inner.writer_settings.clone())
                .expect("the writer settings were validated when Tally was opened")
        })
        .clone()
    }

    /// A cleaner of every space ([`SPACES`]) with the configured settings,
    /// to run as a task of the application (`tally.cleaner().spawn(shutdown)`);
    /// each call makes a new one, which has run no pass yet.
    pub fn cleaner(&self) -> Cleaner {
        Cleaner::new(self.inner.clock.clone(), self.inner.cleaner.clone())
            .and_then(|c| {
                SPACES
                    .iter()
                    .try_fold(c, |c, e| c.with_space((e.store)(self), (e.space)(self)))
            })
            .expect("the cleaner settings were validated when Tally was opened")
    }

    /// Buffered counters of the mapped SQL `tables` (build them with
    /// [`Tables::new`]); flush them with a [`crate::buffers::Flusher`].
    pub fn buffers(&self, tables: Tables) -> Buffers {
        Buffers::new(
            self.inner.buffer_store.clone(),
            tables,
            self.inner.clock.clone(),
        )
    }

    /// Every series of the counters, gauges, sets and statistics as the
    /// Graphite API sees them in namespace `ns` (statistics with a leaf per
    /// quantile of `quantiles`), read from this handle's stores: the
    /// source `tally serve` answers `/graphite/render` and
    /// `/graphite/metrics/find` from.
    pub fn graphite_source(&self, ns: Namespace, quantiles: &[f64]) -> Source {
        let mut entries: Vec<&SpaceEntry> = SPACES.iter().collect();
        entries.sort_by_key(|e| e.graphite_rank);
        let mut families = Vec::new();
        for entry in entries {
            for shape in (entry.shapes)(self, ns, quantiles) {
                families.push(Family::new((entry.space)(self), (entry.store)(self), shape));
            }
        }
        Source::new(families)
    }

    /// The open backend (for [`Backend::describe`], or to build a store by hand).
    pub fn backend(&self) -> &Backend {
        &self.inner.backend
    }

    /// The clock every service reads.
    pub fn clock(&self) -> &SharedClock {
        &self.inner.clock
    }

    /// Flushes the aggregating writers, those that were started, and
    /// stops them. The other services hold no buffered data.
    pub async fn shutdown(&self) {
        for entry in SPACES {
            if let Some(writer) = (entry.started_writer)(self) {
                writer.shutdown().await;
            }
        }
        if let Some(writer) = self.inner.daily_writer.get() {
            writer.shutdown().await;
        }
    }
}

/// Settings for [`Tally`], each at its default until set; checked together
/// when opening, before anything is connected.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> tally::Result<()> {
/// use std::sync::Arc;
///
/// let clock = tally::ManualClock::at(1_700_000_000.0);
/// let tally = tally::Tally::builder()
///     .prefix("shop") // Redis keys {shop:...}; .layout(Layout::Ria) for the book's
///     .precisions([1, 60, 3600])
///     .samples(240)
///     .tsdb_precisions(tally::tsdb::precision::parse("60:1440,3600:720")?)
///     .daily_retention(30)
///     .utc_offset_minutes(60)
///     .clock(Arc::new(clock.clone())) // tests
///     .open("sqlite::memory:")
///     .await?;
/// tally.counters().incr("orders", 1).await?;
/// assert_eq!(tally.counters().get("orders", 60).await?[0].count, 1);
///
/// let bad = tally::Tally::builder().samples(0).open("sqlite::memory:").await;
/// assert!(matches!(bad, Err(tally::Error::Config(_))));
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct TallyBuilder {
    layout: Option<Layout>,
    counters: CounterSettings,
    cleaner: CleanerSettings,
    writer_settings: WriterSettings,
    tsdb: TsdbSettings,
    daily: DailySettings,
    stats: Option<StatsSettings>,
    entity_prefix: String,
    daily_total: DailyTotal,
    clock: SharedClock,
    wait: Option<ReplicationWait>,
    idempotency_retention: Duration,
}

impl Default for TallyBuilder {
    fn default() -> Self {
        TallyBuilder {
            layout: None,
            counters: CounterSettings::default(),
            cleaner: CleanerSettings::default(),
            writer_settings: WriterSettings::default(),
            tsdb: TsdbSettings::default(),
            daily: DailySettings::default(),
            stats: None,
            entity_prefix: DEFAULT_ENTITY_PREFIX.to_owned(),
            daily_total: DailyTotal::Hash,
            idempotency_retention: idempotency::DEFAULT_RETENTION,
            clock: Arc::new(SystemClock),
            wait: None,
        }
    }
}

/// Setters of [`TallyBuilder`]: `name(arg: Type) => setting = value;` is
/// `pub fn name(mut self, arg: Type) -> Self`, setting `self.setting` to
/// `value`.
macro_rules! setters {
    ($($(#[$attr:meta])* $name:ident($arg:ident: $ty:ty) => $($field:ident).+ = $value:expr;)*) => {
        $(
            $(#[$attr])*
            pub fn $name(mut self, $arg: $ty) -> Self {
                self.$($field).+ = $value;
                self
            }
        )*
    };
}

impl TallyBuilder {
    /// The default Redis layout under `prefix` (1 to 64 printable
    /// characters without braces): keys `{<prefix>:<shard>}:...`.
    pub fn prefix(self, prefix: impl Into<String>) -> Self {
        self.layout(Layout::Default {
            prefix: prefix.into(),
        })
    }

    setters! {
        /// The Redis key layout (default: [`Layout::Default`] under `tally`).
        /// [`Layout::Ria`] needs a standalone Redis server.
        layout(layout: Layout) => layout = Some(layout);

        /// Every counter setting at once.
        counter_settings(settings: CounterSettings) => counters = settings;

        /// The counters' precisions in seconds (default: the book's, 1 s to 1 day).
        precisions(precisions: impl IntoIterator<Item = u64>) =>
            counters.precisions = precisions.into_iter().collect();

        /// Samples kept per counter precision (default 120).
        samples(samples: u64) => counters.samples = samples;

        /// The cleaner's cadence and batch ([`Tally::cleaner`]).
        cleaner_settings(settings: CleanerSettings) => cleaner = settings;

        /// The aggregating writer's settings ([`Tally::writer`]).
        writer_settings(settings: WriterSettings) => writer_settings = settings;

        /// Every time-series setting at once.
        tsdb_settings(settings: TsdbSettings) => tsdb = settings;

        /// The time-series store's precisions (`--rollups`; default: 10 s × 360,
        /// 1 h × 168, 1 day × 90).
        tsdb_precisions(precisions: impl IntoIterator<Item = Precision>) =>
            tsdb.precisions = precisions.into_iter().collect();

        /// Every daily-statistics setting at once.
        daily_settings(settings: DailySettings) => daily = settings;

        /// Days of daily statistics kept, today included (default 90).
        daily_retention(days: u32) => daily.retention_days = days;

        /// Where daily statistics' days start: minutes east of UTC (default 0).
        utc_offset_minutes(minutes: i32) => daily.utc_offset_minutes = minutes;

        /// Every statistics setting at once (default: the counters'
        /// precisions and samples, 1 % accuracy, a sketch at every precision;
        /// see [`StatsSettings`]).
        stats_settings(settings: StatsSettings) => stats = Some(settings);

        /// The Redis key prefix of daily-statistics entities (default `advert`:
        /// `{advert:<id>}:views`).
        entity_prefix(prefix: impl Into<String>) => entity_prefix = prefix.into();

        /// Where Redis keeps each entity's all-time total (default
        /// [`DailyTotal::Hash`], the article's; see [`DailyTotal`]).
        daily_total(total: DailyTotal) => daily_total = total;

        /// The clock every service reads (default: the system's; a
        /// [`crate::ManualClock`] in tests).
        clock(clock: SharedClock) => clock = clock;

        /// On Redis, every write waits for replicas (see [`ReplicationWait`]:
        /// at least one, for 1 ms to [`MAX_REPLICATION_TIMEOUT`]); refused on
        /// SQLite.
        replication_wait(wait: ReplicationWait) => wait = Some(wait);

        /// How long idempotency records are kept (1 s to 7 days; default 24 h).
        idempotency_retention(retention: Duration) => idempotency_retention = retention;
    }

    /// Checks the settings, then opens `target` (see [`Tally::open`]).
    pub async fn open(self, target: &str) -> Result<Tally> {
        let layout = self.layout.clone().unwrap_or_default();
        let config = target::parse(target, layout)?;
        self.checked_open(config).await
    }

    /// Checks the settings, then opens the backend `config` names, for a
    /// caller that already holds one (such as the `tally` command). Its
    /// layout is the config's own: setting another with
    /// [`TallyBuilder::layout`] is an error.
    pub async fn open_backend(self, config: BackendConfig) -> Result<Tally> {
        if let (
            Some(set),
            BackendConfig::Redis { layout, .. } | BackendConfig::RedisCluster { layout, .. },
        ) = (&self.layout, &config)
            && set != layout
        {
            return Err(Error::Config(format!(
                "the builder's layout {set:?} differs from the backend config's {layout:?}; \
                 set the layout in the config"
            )));
        }
        self.checked_open(config).await
    }

    async fn checked_open(self, config: BackendConfig) -> Result<Tally> {
        let settings = self.validate(&config)?;
        let backend = Backend::open(&config)
            .await?
            .with_replication_wait(self.wait)?;
        #[cfg(feature = "redis")]
        backend
            .check_counter_encoding(&settings.counters, settings.cleaner.interval)
            .await;
        let clock = self.clock;
        let counters = Counters::with_clock(
            backend.counter_store(clock.clone()).await?,
            settings.counters.clone(),
            clock.clone(),
        )?;
        let tsdb = Tsdb::with_clock(
            backend.tsdb_store(clock.clone()).await?,
            settings.tsdb,
            clock.clone(),
        )?;
        let daily = DailyStats::with_clock(
            backend
                .daily_store(&self.entity_prefix, self.daily_total)
                .await?,
            settings.daily,
            clock.clone(),
        )?;
        let buffer_store = backend.buffer_store().await?;
        let limiter = Limiter::new(backend.limiter_store().await?, clock.clone());
        let locks = Locks::new(backend.lock_store().await?, clock.clone());
        let stats = Stats::with_clock(
            backend.slice_store(clock.clone()).await?,
            settings.stats,
            clock.clone(),
        )?;
        let gauges: Gauges = beside_stats(&stats, &settings.counters, &clock)?;
        let sets: Sets = beside_stats(&stats, &settings.counters, &clock)?;
        let idempotency = Idempotency::new(
            backend.idempotency_store().await?,
            clock.clone(),
            self.idempotency_retention,
        )?;
        Ok(Tally {
            inner: Arc::new(Inner {
                backend,
                clock,
                cleaner: settings.cleaner,
                writer_settings: settings.writer_settings,
                counters,
                writer: OnceLock::new(),
                tsdb,
                daily,
                daily_writer: OnceLock::new(),
                buffer_store,
                limiter,
                locks,
                stats,
                stats_writer: OnceLock::new(),
                gauges,
                gauges_writer: OnceLock::new(),
                sets,
                sets_writer: OnceLock::new(),
                idempotency,
            }),
        })
    }

    /// Every setting checked against the backend `config` names, before
    /// anything is opened.
    fn validate(&self, config: &BackendConfig) -> Result<Validated> {
        let sqlite = matches!(
            config,
            BackendConfig::SqliteDir(_) | BackendConfig::SqliteMemory
        );
        let (layout, standalone_redis) = match config {
            BackendConfig::Redis { layout, .. } => (Some(layout), true),
            BackendConfig::RedisCluster { layout, .. } => (Some(layout), false),
            BackendConfig::SqliteDir(_) | BackendConfig::SqliteMemory => {
                if self.wait.is_some() {
                    return Err(Error::Config(
                        "waiting for replicas only applies to Redis".into(),
                    ));
                }
                (self.layout.as_ref(), false)
            }
        };
        match layout {
            Some(Layout::Default { prefix }) => check_prefix("key prefix", prefix)?,
            Some(Layout::Expiring { .. }) if sqlite => {
                return Err(Error::Config(
                    "the `expiring` layout is a Redis key layout (Redis's expiry does the \
                     cleaning); the embedded store has no layouts"
                        .into(),
                ));
            }
            Some(Layout::Expiring { prefix }) => check_prefix("key prefix", prefix)?,
            Some(Layout::Compact { .. }) if sqlite => {
                return Err(Error::Config(
                    "the `compact` layout is a Redis key layout (one hash per series); the \
                     embedded store has no layouts"
                        .into(),
                ));
            }
            Some(Layout::Compact { prefix }) => check_prefix("key prefix", prefix)?,
            Some(Layout::Ria) if !standalone_redis => {
                return Err(Error::Config(
                    "the `ria` layout keeps every counter in one key, so it needs a standalone \
                     Redis server (not a cluster, not SQLite)"
                        .into(),
                ));
            }
            Some(Layout::Ria) | None => {}
        }
        if let Some(wait) = self.wait
            && (wait.replicas == 0
                || wait.timeout < Duration::from_millis(1)
                || wait.timeout > MAX_REPLICATION_TIMEOUT)
        {
            return Err(Error::Config(format!(
                "a replication wait needs at least one replica and a timeout of 1 ms to 60 s, \
                 got {} replicas and {:?}",
                wait.replicas, wait.timeout
            )));
        }
        check_prefix("entity prefix", &self.entity_prefix)?;
        let counters = self.counters.clone().validate()?;
        let stats = match &self.stats {
            Some(s) => s.clone(),
            None => StatsSettings::like(&counters),
        };
        idempotency::check_retention(self.idempotency_retention)?;
        if layout.is_some_and(Layout::is_compact) {
            // Its fields hold each precision in an integer's high bits.
            check_compact("counter", counters.precisions.iter().copied())?;
            check_compact("statistics", stats.precisions.iter().copied())?;
        }
        Ok(Validated {
            stats: stats.validate()?,
            counters,
            cleaner: self.cleaner.clone().validate()?,
            writer_settings: self.writer_settings.clone().validate()?,
            tsdb: self.tsdb.clone().validate()?,
            daily: self.daily.clone().validate()?,
        })
    }
}

/// The service of a kind of series kept beside the statistics, in their
/// store, at the counters' precisions and samples (gauges, sets).
fn beside_stats<R: PlainRules>(
    stats: &Stats,
    counters: &CounterSettings,
    clock: &SharedClock,
) -> Result<SeriesService<R>> {
    SeriesService::<R>::with_clock(
        stats.store().clone(),
        &counters.precisions,
        counters.samples,
        clock.clone(),
    )
}

/// The builder's settings after their checks.
struct Validated {
    counters: CounterSettings,
    cleaner: CleanerSettings,
    writer_settings: WriterSettings,
    tsdb: TsdbSettings,
    daily: DailySettings,
    stats: StatsSettings,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn entries_name_their_spaces_and_lanes_stay() {
        let tally = Tally::open("sqlite::memory:").await.unwrap();
        for entry in SPACES {
            assert_eq!((entry.space)(&tally).id, entry.id);
        }
        // Lanes are in stored write ids: they never change.
        let lanes: Vec<_> = SPACES.iter().map(|e| (e.id, e.lane)).collect();
        assert_eq!(
            lanes,
            [("counters", 0), ("stats", 1), ("gauges", 2), ("sets", 3)]
        );
    }
}
