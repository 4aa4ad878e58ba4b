//! `tally serve`: the HTTP server, the cleaner, the statsd and carbon
//! listeners and the buffer flusher in one process, on the configured
//! backend.
//!
//! Startup wires the library's services together; shutdown (SIGTERM or
//! Ctrl-C) stops accepting, lets requests in flight finish, stops the
//! listeners (the carbon listener reads its connections out first),
//! flushes the aggregating writers, and waits for the cleaner and the
//! flusher to stop.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context as _, Result};
use clap::Args;
use tally::buffers::{Flusher, open_sink};
use tally::counters::{WhenFull, WriterSettings};
use tally::server::carbon::CarbonSettings;
use tally::server::graphite::{GraphiteApi, GraphiteSettings};
use tally::server::{AppState, Metrics, ServerSettings, Services};
use tokio::sync::watch;

use crate::config::{Config, setting};
use crate::context::{self, shutdown_signal};

/// Flags of `tally serve` (each also read from a `TALLY_*` variable).
#[derive(Args, Debug, Clone)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(
        long,
        env = "TALLY_LISTEN",
        default_value = "127.0.0.1:7070",
        value_name = "ADDR"
    )]
    pub listen: SocketAddr,

    /// Bearer token that writes need (repeat, or comma-separate, for several).
    #[arg(
        long = "token",
        env = "TALLY_TOKEN",
        value_delimiter = ',',
        value_name = "TOKEN"
    )]
    pub tokens: Vec<String>,

    /// With --token: reads need a token too.
    #[arg(long, env = "TALLY_PROTECT_READS")]
    pub protect_reads: bool,

    /// Also take statsd lines (counters, timers, histograms, gauges, sets) on this UDP address.
    #[arg(long, env = "TALLY_STATSD", value_name = "ADDR")]
    pub statsd: Option<SocketAddr>,

    /// Receive buffer of the statsd socket, bytes: what a burst may queue
    /// while the listener is busy (`statsd_recv_buffer` in the config file)
    /// [default: 8388608]. Linux caps it at net.core.rmem_max unless tally
    /// may pass the cap (root, CAP_NET_ADMIN); a warning says so.
    #[arg(long, env = "TALLY_STATSD_RECV_BUFFER", value_name = "BYTES")]
    pub statsd_recv_buffer: Option<usize>,

    /// Also take carbon's plaintext lines (`path value timestamp`, as
    /// collectd, Telegraf's graphite output or Diamond send them) over TCP
    /// and UDP on this address: each sets the gauge `path` at that time
    /// (`carbon` in the config file).
    #[arg(long, env = "TALLY_CARBON", value_name = "ADDR")]
    pub carbon: Option<SocketAddr>,

    /// Longest carbon line over TCP, bytes without its newline; a longer
    /// one is refused and the connection goes on (`carbon_max_line` in the
    /// config file) [default: 16384, carbon's own].
    #[arg(long, env = "TALLY_CARBON_MAX_LINE", value_name = "BYTES")]
    pub carbon_max_line: Option<usize>,

    /// Carbon TCP connections served at once; at the limit new ones wait
    /// until one closes (`carbon_max_connections` in the config file)
    /// [default: 1024].
    #[arg(long, env = "TALLY_CARBON_MAX_CONNECTIONS", value_name = "N")]
    pub carbon_max_connections: Option<usize>,

    /// `aggregated`: increments are merged in memory and written every flush
    /// interval (answered 202); `exact`: each request writes before its
    /// answer (200). statsd and request counting always aggregate.
    #[arg(long, env = "TALLY_WRITE_MODE", default_value = "aggregated", value_parser = ["aggregated", "exact"])]
    pub write_mode: String,

    /// Milliseconds between flushes of the aggregating writer.
    #[arg(
        long,
        env = "TALLY_FLUSH_INTERVAL_MS",
        default_value_t = 200,
        value_name = "MS"
    )]
    pub flush_interval_ms: u64,

    /// Largest request body accepted, bytes.
    #[arg(long, env = "TALLY_MAX_BODY_BYTES", default_value_t = 1 << 20, value_name = "BYTES")]
    pub max_body_bytes: usize,

    /// Most items in one batch request.
    #[arg(
        long,
        env = "TALLY_MAX_BATCH",
        default_value_t = 10_000,
        value_name = "N"
    )]
    pub max_batch: usize,

    /// Seconds a request may take before it is answered 503.
    #[arg(
        long,
        env = "TALLY_REQUEST_TIMEOUT",
        default_value_t = 10.0,
        value_name = "SECONDS"
    )]
    pub request_timeout: f64,

    /// Requests handled at once; more are answered 503.
    #[arg(
        long,
        env = "TALLY_MAX_CONCURRENCY",
        default_value_t = 1024,
        value_name = "N"
    )]
    pub max_concurrency: usize,

    /// Seconds an `Idempotency-Key` is remembered: a write sent again with
    /// the same key within it is applied once and answered with the first
    /// answer (`idempotency_retention` in the config file) [default: 86400,
    /// 24 h; at most 604800, 7 days].
    #[arg(long, env = "TALLY_IDEMPOTENCY_RETENTION", value_name = "SECONDS")]
    pub idempotency_retention: Option<f64>,

    /// Do not run the cleaner in this process (run `tally clean` elsewhere).
    #[arg(long, env = "TALLY_NO_CLEANER")]
    pub no_cleaner: bool,

    /// The Graphite API's names (`/graphite/...`): `tally` (a series `N` is
    /// the path `N`) or `statsd` (statsd's Graphite backend's names:
    /// `stats_counts.N`, `stats.timers.N.upper_90`, ...)
    /// (`graphite_namespace` in the config file) [default: tally].
    #[arg(long, env = "TALLY_GRAPHITE_NAMESPACE", value_name = "NAMESPACE", value_parser = ["tally", "statsd"])]
    pub graphite_namespace: Option<String>,

    /// The quantile leaves of statistics in the Graphite API (0.99 is
    /// `N.p99`; in the statsd namespace the percentile 99)
    /// (`graphite_quantiles` in the config file) [default: 0.5,0.9,0.99].
    #[arg(
        long,
        env = "TALLY_GRAPHITE_QUANTILES",
        value_delimiter = ',',
        value_name = "Q"
    )]
    pub graphite_quantiles: Option<Vec<f64>>,

    /// The most series one Graphite render may match; past it, a 400 naming
    /// the limit (`graphite_max_series` in the config file) [default: 10000].
    #[arg(long, env = "TALLY_GRAPHITE_MAX_SERIES", value_name = "N")]
    pub graphite_max_series: Option<usize>,

    /// The most points one Graphite render may answer, over every series
    /// (`graphite_max_points` in the config file) [default: 2000000].
    #[arg(long, env = "TALLY_GRAPHITE_MAX_POINTS", value_name = "N")]
    pub graphite_max_points: Option<usize>,

    /// The most nodes one Graphite find may answer
    /// (`graphite_max_find` in the config file) [default: 10000].
    #[arg(long, env = "TALLY_GRAPHITE_MAX_FIND", value_name = "N")]
    pub graphite_max_find: Option<usize>,
}

impl ServeArgs {
    fn settings(&self) -> Result<ServerSettings> {
        if self.tokens.iter().any(|t| t.trim().len() < 8) {
            anyhow::bail!(tally::Error::Config(
                "a token must be at least 8 characters".into()
            ));
        }
        if self.max_body_bytes < 1024 || self.max_batch == 0 || self.max_concurrency == 0 {
            anyhow::bail!(tally::Error::Config(
                "max-body-bytes must be at least 1024, max-batch and max-concurrency at least 1"
                    .into()
            ));
        }
        if !(self.request_timeout.is_finite() && self.request_timeout >= 0.1) {
            anyhow::bail!(tally::Error::Config(
                "request-timeout must be at least 0.1 s".into()
            ));
        }
        Ok(ServerSettings {
            tokens: self.tokens.iter().map(|t| t.trim().to_owned()).collect(),
            protect_reads: self.protect_reads,
            max_body_bytes: self.max_body_bytes,
            max_batch: self.max_batch,
            request_timeout: Duration::from_secs_f64(self.request_timeout),
            max_concurrency: self.max_concurrency,
        })
    }

    /// The idempotency retention: the flag, else the file, else 24 h.
    fn idempotency_retention(&self, config: &Config) -> Result<Duration> {
        let retention = match self
            .idempotency_retention
            .or(config.file.idempotency_retention)
        {
            Some(secs) if secs.is_finite() && secs > 0.0 && secs <= 1e9 => {
                Duration::from_secs_f64(secs)
            }
            Some(secs) => anyhow::bail!(tally::Error::Config(format!(
                "the idempotency retention must be 1 to 604800 seconds, got {secs}"
            ))),
            None => tally::idempotency::DEFAULT_RETENTION,
        };
        tally::idempotency::check_retention(retention)?;
        Ok(retention)
    }

    /// The carbon listener's limits: each flag, else the file, else the
    /// default.
    fn carbon_settings(&self, config: &Config) -> Result<CarbonSettings> {
        let d = CarbonSettings::default();
        let file = &config.file;
        Ok(CarbonSettings {
            max_line: setting(self.carbon_max_line, file.carbon_max_line, d.max_line),
            max_connections: setting(
                self.carbon_max_connections,
                file.carbon_max_connections,
                d.max_connections,
            ),
        }
        .validate()?)
    }

    /// The Graphite API's settings: each flag, else the file, else the
    /// default.
    fn graphite(&self, config: &Config) -> Result<GraphiteSettings> {
        let file = &config.file;
        let defaults = GraphiteSettings::default();
        let namespace = match self
            .graphite_namespace
            .as_deref()
            .or(file.graphite_namespace.as_deref())
        {
            Some(ns) => ns.parse()?,
            None => defaults.namespace,
        };
        Ok(GraphiteSettings {
            namespace,
            quantiles: setting(
                self.graphite_quantiles.clone(),
                file.graphite_quantiles.clone(),
                defaults.quantiles,
            ),
            max_series: setting(
                self.graphite_max_series,
                file.graphite_max_series,
                defaults.max_series,
            ),
            max_points: setting(
                self.graphite_max_points,
                file.graphite_max_points,
                defaults.max_points,
            ),
            max_find: setting(
                self.graphite_max_find,
                file.graphite_max_find,
                defaults.max_find,
            ),
        }
        .validate()?)
    }

    /// The statsd receive buffer: the flag, else the file, else the default.
    fn statsd_recv_buffer(&self, config: &Config) -> Result<usize> {
        let bytes = setting(
            self.statsd_recv_buffer,
            config.file.statsd_recv_buffer,
            tally::server::udp::DEFAULT_RECV_BUFFER,
        );
        tally::server::udp::check_recv_buffer(bytes)?;
        Ok(bytes)
    }
}

pub async fn run(args: ServeArgs, config: &Config) -> Result<()> {
    let settings = args.settings()?;
    let statsd_recv_buffer = args.statsd_recv_buffer(config)?;
    let carbon_settings = args.carbon_settings(config)?;
    // Caught from here on: a SIGTERM right after "serving on" is a shutdown.
    let signal = shutdown_signal();
    let idempotency_retention = args.idempotency_retention(config)?;
    let graphite = args.graphite(config)?;
    let tally = context::builder(config)
        .idempotency_retention(idempotency_retention)
        .writer_settings(WriterSettings {
            flush_interval: Duration::from_millis(args.flush_interval_ms),
            when_full: WhenFull::Wait,
            ..WriterSettings::default()
        })
        .open_backend(config.backend.clone())
        .await?;
    let writer = tally.writer();
    let services = Services {
        counters: tally.counters(),
        counter_writer: Some(writer.clone()),
        exact_writes: args.write_mode == "exact",
        limiter: Some((tally.limiter(), config.policies.clone())),
        locks: Some(tally.locks()),
        tsdb: Some(tally.tsdb()),
        daily: Some(tally.daily()),
        gauges: Some(tally.gauges()),
        sets: Some(tally.sets()),
        buffers: None,
        stats: Some(tally.stats()),
        stats_writer: Some(tally.stats_writer()),
        idempotency: Some(tally.idempotency()),
        graphite: Some(GraphiteApi::new(&tally, &graphite)),
    };
    let metrics = Metrics::default();
    let mut services = services;
    let mut flusher_task = None;
    if !config.buffers.tables.is_empty() {
        let buffers = tally.buffers(config.buffers.tables.clone());
        let flusher = match &config.buffers.sink {
            Some(url) => {
                let sink = open_sink(url, buffers.tables()).await?;
                let flusher = Flusher::new(buffers.clone(), sink, config.buffers.flusher.clone())?;
                flusher_task = Some(flusher.clone());
                Some(flusher)
            }
            None => None,
        };
        services.buffers = Some((buffers, flusher));
    }
    let state = AppState::new(services, settings, metrics.clone());

    let (stop_tx, stop_rx) = watch::channel(false);
    let stopped = move || {
        let mut rx = stop_rx.clone();
        async move {
            let _ = rx.wait_for(|stop| *stop).await;
        }
    };

    let mut tasks = Vec::new();
    if !args.no_cleaner {
        let cleaner = tally.cleaner().with_observer(metrics.cleaner_observer());
        tasks.push(("cleaner", cleaner.spawn(stopped())));
    }
    if let Some(addr) = args.statsd {
        let (socket, buffer) = tally::server::udp::bind(addr, statsd_recv_buffer)
            .with_context(|| format!("cannot listen for statsd on udp://{addr}"))?;
        tracing::info!(
            %addr,
            recv_buffer = buffer.effective,
            forced = buffer.forced,
            "statsd listener on udp"
        );
        tasks.push((
            "statsd",
            tokio::spawn(tally::server::statsd::listen(
                socket,
                tally::server::statsd::Targets::of(&tally),
                metrics.clone(),
                stopped(),
            )),
        ));
    }
    if let Some(addr) = args.carbon.or(config.file.carbon) {
        let bound = tally::server::carbon::bind(addr)
            .await
            .with_context(|| format!("cannot listen for carbon on tcp and udp {addr}"))?;
        tracing::info!(
            addr = %bound.local_addr()?,
            max_line = carbon_settings.max_line,
            max_connections = carbon_settings.max_connections,
            "carbon listener on tcp and udp"
        );
        tasks.push((
            "carbon",
            tokio::spawn(tally::server::carbon::listen(
                bound,
                tally.gauges_writer(),
                carbon_settings,
                metrics.clone(),
                stopped(),
            )),
        ));
    }
    if let Some(flusher) = flusher_task {
        tasks.push(("flusher", flusher.spawn(stopped())));
    }

    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let addr = listener.local_addr()?;
    println!(
        "tally: serving on http://{addr}/ (dashboard), API under http://{addr}/v1/, backend {}",
        tally.backend().describe()
    );
    tally::server::serve(listener, state.clone(), {
        let stop_tx = stop_tx.clone();
        async move {
            signal.await;
            let _ = stop_tx.send(true);
        }
    })
    .await?;
    // Requests are done: stop the rest, then write what is buffered.
    let _ = stop_tx.send(true);
    for (name, task) in tasks {
        if let Err(e) = task.await {
            tracing::error!(task = name, error = %e, "background task failed");
        }
    }
    tally.shutdown().await;
    // A keyed handler that outlived the wait: its add is refused now, and
    // it gives its claim up so that a retry elsewhere runs it.
    state.finish_requests().await;
    let stats = writer.stats();
    tracing::info!(
        accepted = stats.accepted,
        written = stats.written,
        "stopped"
    );
    Ok(())
}
