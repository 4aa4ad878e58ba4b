//! Configuration of the `tally` binary: flags, `TALLY_*` variables, a TOML file.
//!
//! Precedence: a flag, else its environment variable (clap reads both), else
//! the file given by `--config` / `TALLY_CONFIG`, else the default. Every
//! value is validated once here, at start, with a message naming the setting.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;
use serde::Deserialize;
use std::collections::BTreeMap;
use tally::backend::redis::Layout;
use tally::backend::redis::layout::DEFAULT_PREFIX;
use tally::buffers::{FlusherSettings, TableConfig, Tables};
use tally::{
    Algorithm, BackendConfig, CleanerSettings, CounterSettings, DailySettings, DailyTotal,
    FailMode, Limit, ReplicationWait, TsdbSettings,
};

/// The `--help` heading of the store flags.
pub const STORE: &str = "Store options";
/// The `--help` heading of the counter flags.
pub const COUNTERS: &str = "Counter options";
/// The `--help` heading of the time-series flags.
pub const TIME_SERIES: &str = "Time-series options";
/// The `--help` heading of the daily-statistics flags.
pub const DAILY: &str = "Daily options";

/// Flags shared by every command (each also read from a `TALLY_*` variable),
/// shown under their own headings after each command's own arguments.
#[derive(Args, Clone, Debug, Default)]
pub struct GlobalArgs {
    /// Redis server URL (redis:// or rediss://, with password and db). Without
    /// it (or --redis-cluster), the embedded SQLite store is used.
    #[arg(
        long,
        env = "TALLY_REDIS",
        global = true, help_heading = STORE,
        value_name = "URL",
        conflicts_with = "data_dir"
    )]
    pub redis: Option<String>,

    /// Redis Cluster seed node URLs, comma-separated.
    #[arg(
        long,
        env = "TALLY_REDIS_CLUSTER",
        global = true, help_heading = STORE,
        value_name = "URL[,URL...]",
        value_delimiter = ',',
        conflicts_with_all = ["redis", "data_dir"]
    )]
    pub redis_cluster: Option<Vec<String>>,

    /// Directory of the embedded SQLite store (`:memory:` for a private
    /// in-memory one) [default: $XDG_DATA_HOME/tally or ~/.local/share/tally].
    #[arg(long, env = "TALLY_DATA_DIR", global = true, help_heading = STORE, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,

    /// Redis key layout: `default` (cluster-ready), `expiring` (cluster-ready,
    /// retention by Redis's expiry: no cleaner), `compact` (cluster-ready, one
    /// hash per series: for many sparse series) or `ria` (the book's keys).
    #[arg(long, env = "TALLY_LAYOUT", global = true, help_heading = STORE, value_name = "default|expiring|compact|ria")]
    pub layout: Option<String>,

    /// Key prefix of the default Redis layout [default: tally].
    #[arg(long, env = "TALLY_PREFIX", global = true, help_heading = STORE, value_name = "P")]
    pub prefix: Option<String>,

    /// Precisions in seconds, comma-separated [default: 1,5,60,300,3600,18000,86400].
    #[arg(
        long,
        env = "TALLY_PRECISIONS",
        global = true, help_heading = COUNTERS,
        value_delimiter = ',',
        value_name = "SECONDS"
    )]
    pub precisions: Option<Vec<u64>>,

    /// Slices kept per precision [default: 120].
    #[arg(long, env = "TALLY_SAMPLES", global = true, help_heading = COUNTERS, value_name = "N")]
    pub samples: Option<u64>,

    /// Seconds between cleaner passes [default: 60].
    #[arg(
        long,
        env = "TALLY_CLEAN_INTERVAL",
        global = true, help_heading = COUNTERS,
        value_name = "SECONDS"
    )]
    pub clean_interval: Option<u64>,

    /// Counters per cleaner round trip [default: 500].
    #[arg(long, env = "TALLY_CLEAN_BATCH", global = true, help_heading = COUNTERS, value_name = "N")]
    pub clean_batch: Option<usize>,

    /// Redis: after each write, wait for this many replicas to confirm it
    /// (WAIT); a write they do not confirm in time fails (retry it).
    #[arg(long, env = "TALLY_WAIT_REPLICAS", global = true, help_heading = STORE, value_name = "N")]
    pub wait_replicas: Option<u32>,

    /// How long a write waits for its replicas, in ms [default: 1000].
    #[arg(long, env = "TALLY_WAIT_TIMEOUT_MS", global = true, help_heading = STORE, value_name = "MS")]
    pub wait_timeout_ms: Option<u64>,

    /// Time-series rollups, each a precision and the slices it keeps, as
    /// SECONDS:SAMPLES pairs
    /// [default: 10:360,3600:168,86400:90].
    #[arg(long, env = "TALLY_ROLLUPS", global = true, help_heading = TIME_SERIES, value_name = "S:N,...")]
    pub rollups: Option<String>,

    /// Items kept per key and slice by the time series' most-frequent
    /// summaries [default: 64].
    #[arg(long, env = "TALLY_TOP_CAPACITY", global = true, help_heading = TIME_SERIES, value_name = "N")]
    pub top_capacity: Option<usize>,

    /// Days of daily statistics kept, today included [default: 90].
    #[arg(
        long,
        env = "TALLY_DAILY_RETENTION",
        global = true, help_heading = DAILY,
        value_name = "DAYS"
    )]
    pub daily_retention: Option<u32>,

    /// The calendar of daily statistics, as an offset from UTC: +01:00,
    /// -05:30 [default: +00:00, UTC].
    #[arg(
        long,
        env = "TALLY_UTC_OFFSET",
        global = true, help_heading = DAILY,
        value_name = "±HH:MM",
        allow_hyphen_values = true
    )]
    pub utc_offset: Option<String>,

    /// Redis key prefix of daily-statistics entities, as in
    /// `{advert:<id>}:views` [default: advert].
    #[arg(long, env = "TALLY_ENTITY_PREFIX", global = true, help_heading = DAILY, value_name = "P")]
    pub entity_prefix: Option<String>,

    /// Where Redis keeps each entity's all-time total: `hash` (the sum of
    /// the article's views hash, which the article's own code may write
    /// too) or `running` (a running total beside it: faster writes, and
    /// only Tally may write the entities) [default: hash].
    #[arg(long, env = "TALLY_DAILY_TOTAL", global = true, help_heading = DAILY, value_name = "KIND")]
    pub daily_total: Option<String>,

    /// A TOML file with any of these settings (flags and variables win).
    #[arg(long, env = "TALLY_CONFIG", global = true, help_heading = STORE, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

/// The settings file: the same names as the flags, with underscores.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    pub redis: Option<String>,
    pub redis_cluster: Option<Vec<String>>,
    pub data_dir: Option<PathBuf>,
    pub layout: Option<String>,
    pub prefix: Option<String>,
    pub precisions: Option<Vec<u64>>,
    pub samples: Option<u64>,
    pub clean_interval: Option<u64>,
    pub clean_batch: Option<usize>,
    pub wait_replicas: Option<u32>,
    pub wait_timeout_ms: Option<u64>,
    pub rollups: Option<String>,
    pub top_capacity: Option<usize>,
    pub daily_retention: Option<u32>,
    pub utc_offset: Option<String>,
    pub entity_prefix: Option<String>,
    pub daily_total: Option<String>,
    /// `tally serve`: the statsd socket's receive buffer, bytes.
    pub statsd_recv_buffer: Option<usize>,
    /// `tally serve`: the carbon listener's address (TCP and UDP).
    pub carbon: Option<SocketAddr>,
    /// `tally serve`: the longest carbon line over TCP, bytes.
    pub carbon_max_line: Option<usize>,
    /// `tally serve`: carbon TCP connections served at once.
    pub carbon_max_connections: Option<usize>,
    /// `tally serve`: seconds an `Idempotency-Key` is remembered.
    pub idempotency_retention: Option<f64>,
    /// `tally serve`: the Graphite API's namespace, quantile leaves and
    /// limits (each flag wins).
    pub graphite_namespace: Option<String>,
    pub graphite_quantiles: Option<Vec<f64>>,
    pub graphite_max_series: Option<usize>,
    pub graphite_max_points: Option<usize>,
    pub graphite_max_find: Option<usize>,
    pub buffers: Option<BuffersFile>,
    pub limits: Option<LimitsFile>,
}

/// The `[limits]` section: named rate-limit policies.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsFile {
    #[serde(default)]
    pub policies: BTreeMap<String, PolicyFile>,
}

/// One named policy: `[limits.policies.api]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyFile {
    pub algorithm: Algorithm,
    pub limit: u64,
    /// Seconds.
    pub window: f64,
    pub burst: Option<u64>,
    #[serde(default)]
    pub on_error: FailMode,
}

/// A window in seconds as whole milliseconds, or an error naming `what`.
pub fn window_ms(secs: f64, what: &str) -> Result<u64> {
    let ms = secs * 1000.0;
    if !ms.is_finite() || !(1.0..=1e15).contains(&ms) {
        bail!(tally::Error::InvalidInput(format!(
            "{what}: a window must be at least 1 ms, got {secs} s"
        )));
    }
    Ok(ms.round() as u64)
}

/// The `[buffers]` section: where flushed rows go and how.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BuffersFile {
    /// `postgres://...` or `sqlite:PATH`.
    pub sink: Option<String>,
    /// Seconds between flush ticks [default: 10].
    pub tick: Option<f64>,
    /// Rows per flush batch [default: 500].
    pub batch_rows: Option<usize>,
    /// Seconds a claim is held before another flusher may take it over [default: 60].
    pub lease: Option<f64>,
    /// Seconds a claim may still be applied; batch ids are kept twice as long [default: 604800].
    pub retention: Option<f64>,
    /// Batches per tick at most [default: 1000].
    pub max_batches: Option<usize>,
    /// The mapped tables.
    #[serde(default)]
    pub tables: Vec<TableConfig>,
}

/// The buffers' validated settings.
#[derive(Clone, Debug)]
pub struct BuffersConfig {
    pub sink: Option<String>,
    pub tables: Tables,
    pub flusher: FlusherSettings,
}

impl BuffersConfig {
    fn resolve(file: Option<BuffersFile>) -> Result<Self> {
        let file = file.unwrap_or_default();
        let secs = |v: Option<f64>, name: &str, default: Duration| -> Result<Duration> {
            match v {
                None => Ok(default),
                Some(s) if s.is_finite() && s > 0.0 && s < 1e9 => Ok(Duration::from_secs_f64(s)),
                Some(s) => bail!("buffers.{name} must be a positive number of seconds, got {s}"),
            }
        };
        let d = FlusherSettings::default();
        let flusher = FlusherSettings {
            tick: secs(file.tick, "tick", d.tick)?,
            batch_rows: file.batch_rows.unwrap_or(d.batch_rows),
            lease: secs(file.lease, "lease", d.lease)?,
            max_batches: file.max_batches.unwrap_or(d.max_batches),
            retention: secs(file.retention, "retention", d.retention)?,
        }
        .validate()?;
        Ok(BuffersConfig {
            sink: file.sink,
            tables: Tables::new(&file.tables)?,
            flusher,
        })
    }

    /// The sink URL, or an error saying how to set it.
    pub fn sink_url(&self, flag: Option<&str>) -> Result<String> {
        match flag.or(self.sink.as_deref()) {
            Some(url) => Ok(url.to_owned()),
            None => bail!(tally::Error::Config(
                "no sink: give --sink URL, TALLY_SINK or `sink` in the [buffers] section of \
                 the config file"
                    .into()
            )),
        }
    }

    /// The tables, or an error when none is mapped.
    pub fn tables(&self) -> Result<&Tables> {
        if self.tables.is_empty() {
            bail!(tally::Error::Config(
                "no buffered table is mapped: add [[buffers.tables]] sections (name, key, \
                 counters, last_write) to the config file"
                    .into()
            ));
        }
        Ok(&self.tables)
    }
}

impl FileConfig {
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read config file {}", path.display()))?;
        toml::from_str(&text).with_context(|| format!("invalid config file {}", path.display()))
    }
}

/// Everything a command needs, validated.
#[derive(Clone, Debug)]
pub struct Config {
    pub backend: BackendConfig,
    pub counters: CounterSettings,
    pub cleaner: CleanerSettings,
    /// Redis only: wait for replicas after each write.
    pub wait: Option<ReplicationWait>,
    pub tsdb: TsdbSettings,
    pub daily: DailySettings,
    pub entity_prefix: String,
    pub daily_total: DailyTotal,
    /// The Redis key prefix (`--prefix`), also where the backend is not
    /// Redis (`tally migrate` opens Redis stores of its own).
    pub prefix: String,
    pub buffers: BuffersConfig,
    pub policies: BTreeMap<String, Limit>,
    /// The settings file as read, every key in it. The keys above are
    /// resolved there with their flags; `tally serve` resolves its own
    /// (`statsd_recv_buffer`, `carbon`, `graphite_*`, ...) from this.
    pub file: FileConfig,
}

impl Config {
    pub fn resolve(args: &GlobalArgs) -> Result<Self> {
        let file = match &args.config {
            Some(path) => FileConfig::load(path)?,
            None => FileConfig::default(),
        };
        let buffers = BuffersConfig::resolve(file.buffers.clone())?;
        let mut policies = BTreeMap::new();
        for (name, p) in file.limits.clone().unwrap_or_default().policies {
            let what = format!("limits.policies.{name}");
            let limit = Limit {
                algorithm: p.algorithm,
                limit: p.limit,
                window_ms: window_ms(p.window, &what)?,
                burst: p.burst,
                on_error: p.on_error,
            };
            limit
                .validate()
                .map_err(|e| anyhow::anyhow!(tally::Error::Config(format!("{what}: {e}"))))?;
            policies.insert(name, limit);
        }
        let prefix = setting(
            args.prefix.clone(),
            file.prefix.clone(),
            DEFAULT_PREFIX.to_owned(),
        );
        let layout_name = setting(args.layout.clone(), file.layout.clone(), "default".into());
        let layout = Layout::parse(&layout_name, &prefix)?;
        let redis_only = layout.is_expiring() || layout.is_compact();
        let from_flags =
            args.redis.is_some() || args.redis_cluster.is_some() || args.data_dir.is_some();
        let (redis, cluster, data_dir) = if from_flags {
            (
                args.redis.clone(),
                args.redis_cluster.clone(),
                args.data_dir.clone(),
            )
        } else {
            (
                file.redis.clone(),
                file.redis_cluster.clone(),
                file.data_dir.clone(),
            )
        };
        let backend = match (redis, cluster, data_dir) {
            (Some(_), Some(_), _) | (Some(_), _, Some(_)) | (_, Some(_), Some(_)) => {
                bail!("choose one backend: redis, redis_cluster or data_dir")
            }
            (Some(url), None, None) => BackendConfig::Redis { url, layout },
            (None, Some(urls), None) => {
                if layout == Layout::Ria {
                    bail!("the `ria` layout needs a standalone Redis server, not a cluster");
                }
                BackendConfig::RedisCluster { urls, layout }
            }
            (None, None, Some(dir)) if dir.as_os_str() == ":memory:" => BackendConfig::SqliteMemory,
            (None, None, Some(dir)) => BackendConfig::SqliteDir(dir),
            (None, None, None) => BackendConfig::SqliteDir(default_data_dir()),
        };
        if layout_name == "ria" && !matches!(backend, BackendConfig::Redis { .. }) {
            bail!("--layout ria only applies to a Redis backend (give --redis URL)");
        }
        if redis_only
            && !matches!(
                backend,
                BackendConfig::Redis { .. } | BackendConfig::RedisCluster { .. }
            )
        {
            bail!(
                "--layout {layout_name} only applies to a Redis backend (give --redis URL or \
                 --redis-cluster URLS)"
            );
        }
        let defaults = CounterSettings::default();
        let counters = CounterSettings {
            precisions: setting(
                args.precisions.clone(),
                file.precisions.clone(),
                defaults.precisions,
            ),
            samples: setting(args.samples, file.samples, defaults.samples),
        }
        .validate()?;
        let defaults = CleanerSettings::default();
        let cleaner = CleanerSettings {
            interval: args
                .clean_interval
                .or(file.clean_interval)
                .map(Duration::from_secs)
                .unwrap_or(defaults.interval),
            batch: setting(args.clean_batch, file.clean_batch, defaults.batch),
            ..defaults
        }
        .validate()?;
        let wait = match args.wait_replicas.or(file.wait_replicas) {
            None | Some(0) => None,
            Some(replicas) => {
                if matches!(
                    backend,
                    BackendConfig::SqliteDir(_) | BackendConfig::SqliteMemory
                ) {
                    bail!("--wait-replicas only applies to Redis");
                }
                let ms = setting(args.wait_timeout_ms, file.wait_timeout_ms, 1000);
                if ms == 0 || ms > 60_000 {
                    bail!("--wait-timeout-ms must be 1 to 60000, got {ms}");
                }
                Some(ReplicationWait {
                    replicas,
                    timeout: Duration::from_millis(ms),
                })
            }
        };
        let tsdb_defaults = TsdbSettings::default();
        let tsdb = TsdbSettings {
            precisions: match args.rollups.clone().or(file.rollups.clone()) {
                Some(text) => tally::tsdb::precision::parse(&text)?,
                None => tsdb_defaults.precisions,
            },
            top_capacity: setting(
                args.top_capacity,
                file.top_capacity,
                tsdb_defaults.top_capacity,
            ),
        }
        .validate()?;
        let daily = DailySettings {
            retention_days: setting(
                args.daily_retention,
                file.daily_retention,
                tally::daily::DEFAULT_RETENTION_DAYS,
            ),
            utc_offset_minutes: match args.utc_offset.clone().or(file.utc_offset.clone()) {
                Some(text) => parse_offset(&text)?,
                None => 0,
            },
        }
        .validate()?;
        let entity_prefix = setting(
            args.entity_prefix.clone(),
            file.entity_prefix.clone(),
            tally::daily::DEFAULT_ENTITY_PREFIX.to_owned(),
        );
        let daily_total = match args.daily_total.clone().or(file.daily_total.clone()) {
            Some(text) => DailyTotal::parse(&text)?,
            None => DailyTotal::Hash,
        };
        if daily_total == DailyTotal::Running
            && !matches!(
                backend,
                BackendConfig::Redis { .. } | BackendConfig::RedisCluster { .. }
            )
        {
            bail!(
                "--daily-total running only applies to a Redis backend (give --redis URL or \
                 --redis-cluster URLS)"
            );
        }
        Ok(Config {
            backend,
            counters,
            cleaner,
            wait,
            tsdb,
            daily,
            entity_prefix,
            daily_total,
            prefix,
            buffers,
            policies,
            file,
        })
    }
}

/// One setting by the precedence above: the flag (or its variable), else
/// the file's key, else the default.
pub fn setting<T>(flag: Option<T>, file: Option<T>, default: T) -> T {
    flag.or(file).unwrap_or(default)
}

/// Parses a UTC offset: `+01:00`, `-05:30`, `+0100`, `Z` or `UTC`.
pub fn parse_offset(text: &str) -> Result<i32> {
    let t = text.trim();
    if t.eq_ignore_ascii_case("z") || t.eq_ignore_ascii_case("utc") {
        return Ok(0);
    }
    let bad = || {
        anyhow::anyhow!(tally::Error::Config(format!(
            "UTC offset {text:?} must look like +01:00 or -05:30"
        )))
    };
    let (sign, rest) = match t.chars().next() {
        Some('+') => (1, &t[1..]),
        Some('-') => (-1, &t[1..]),
        _ => return Err(bad()),
    };
    let digits: String = rest.chars().filter(|c| *c != ':').collect();
    if digits.len() != 4 || !digits.chars().all(|c| c.is_ascii_digit()) {
        return Err(bad());
    }
    let (h, m): (i32, i32) = (digits[..2].parse()?, digits[2..].parse()?);
    if h > 14 || m > 59 {
        return Err(bad());
    }
    Ok(sign * (h * 60 + m))
}

/// `$XDG_DATA_HOME/tally`, else `~/.local/share/tally`, else `./tally-data`.
pub fn default_data_dir() -> PathBuf {
    if let Some(xdg) = std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(xdg).join("tally");
    }
    if let Some(home) = std::env::var_os("HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(home).join(".local/share/tally");
    }
    PathBuf::from("tally-data")
}
