//! The statsd UDP listener: lines into the aggregating writers.
//!
//! Each datagram is parsed with [`crate::statsd`]: a line is one name and
//! one or more samples (`hits:1|c:2|c`, DogStatsD's packed `lat:1:2:3|ms`),
//! every sample written under that name. Counter samples go to the
//! counters' writer, timer, histogram and distribution samples to the
//! statistics' writer (a sample rate weighs each value as `round(1/rate)`
//! observations), gauge samples to the gauges' writer (`5` sets, `+5` /
//! `-5` adjust, in the order received), set samples to the sets' writer
//! (the member counted once per slice). A `T` time is the instant a sample
//! is written at, refused as `time_not_kept` when the store of its kind
//! keeps no slice for it ([`crate::statsd::check_time`]).
//!
//! A line is all or nothing. A line of one sample goes to its writer with
//! the writer's `try_` method; a line of several goes to every writer it
//! touches at once ([`crate::engine::writer::try_add_all`]): room is taken
//! in each first, and a merge that fails puts back what the line merged
//! before. UDP has no back pressure, so a full writer refuses the line as
//! `overloaded` instead of waiting. A refused line is counted once, by
//! reason, and logged at debug level; no datagram can stop the listener.
//!
//! Tags (`|#env:prod`) are not kept: a tagged line is written under its
//! bare name, so differently tagged lines add into one series, and every
//! accepted line whose tags were dropped is counted
//! (`tally_statsd_tags_dropped_total`). Container ids and DogStatsD's other
//! origin fields are accepted and not kept.

use std::future::Future;

use tokio::net::UdpSocket;

use super::Metrics;
use super::udp::SocketInfo;
use crate::counters::{CounterWriter, Increment};
use crate::engine::plan::Item;
use crate::engine::writer::{Writer, try_add_all};
use crate::error::{Error, Result};
use crate::gauges::{GaugeOp, GaugesWriter};
use crate::sets::{SetAdd, SetsWriter};
use crate::stats::{Observation, StatsWriter};
use crate::statsd::{Line, Reading, Reject, check_time, parse_packet};

/// Where the listener's lines go: the aggregating writers of each kind.
#[derive(Clone, Debug)]
pub struct Targets {
    /// Counter lines (`c`).
    pub counters: CounterWriter,
    /// Timer, histogram and distribution lines (`ms`, `h`, `d`).
    pub stats: StatsWriter,
    /// Gauge lines (`g`).
    pub gauges: GaugesWriter,
    /// Set lines (`s`).
    pub sets: SetsWriter,
}

impl Targets {
    /// The writers of `tally` (each started on first use).
    pub fn of(tally: &crate::Tally) -> Self {
        Targets {
            counters: tally.writer(),
            stats: tally.stats_writer(),
            gauges: tally.gauges_writer(),
            sets: tally.sets_writer(),
        }
    }
}

/// Receives statsd datagrams on `socket` until `shutdown` completes.
///
/// The datagrams are read on a thread of the listener's own, many per
/// system call ([`super::udp::receive`]), and each is counted there with
/// [`handle`]. The socket is registered with `metrics`, whose `/metrics`
/// then shows its receive buffer and the datagrams the kernel dropped for
/// it. Bind it with [`super::udp::bind`] for a buffer that holds a burst.
pub async fn listen(
    socket: UdpSocket,
    targets: Targets,
    metrics: Metrics,
    shutdown: impl Future<Output = ()>,
) {
    match SocketInfo::of(&socket) {
        Ok(info) => metrics.statsd_socket(info),
        Err(e) => tracing::warn!(error = %e, "statsd socket: no kernel figures for /metrics"),
    }
    let counted = metrics.clone();
    let each = move |packet: &[u8]| {
        counted.statsd_datagrams(1);
        handle(packet, &targets, &counted);
    };
    match super::udp::receive(socket, "statsd", shutdown, each).await {
        Ok(()) => tracing::info!("statsd listener stopped"),
        Err(e) => tracing::error!(error = %e, "statsd listener failed"),
    }
}

/// Hands one datagram's lines to their writers.
pub fn handle(packet: &[u8], targets: &Targets, metrics: &Metrics) {
    for line in parse_packet(packet) {
        let taken = match &line {
            Ok(line) => take(line, targets, metrics),
            Err(reason) => Err(reason.code()),
        };
        if let Err(reason) = taken {
            tracing::debug!(reason, "statsd line rejected");
            metrics.statsd_rejected(reason);
        }
    }
}

/// Hands one line's samples to their writers, all or nothing, and counts
/// it; the reason it was refused otherwise.
fn take(line: &Line<'_>, targets: &Targets, metrics: &Metrics) -> Result<(), &'static str> {
    if line.timed {
        targets.check_times(line).map_err(Reject::code)?;
    }
    let counted = if line.len() == 1 {
        targets.take_one(line)
    } else {
        targets.take_all(line)
    }
    .map_err(|e| reason(&e))?;
    metrics.statsd_accepted(1);
    if counted > 0 {
        metrics.increments_accepted(counted);
    }
    if line.tagged {
        metrics.statsd_tags_dropped(1);
    }
    Ok(())
}

/// The reason code of a line a writer refused.
fn reason(e: &Error) -> &'static str {
    match e {
        Error::Overloaded(_) => "overloaded",
        Error::Overflow { .. } => "overflow",
        e => {
            tracing::debug!(error = %e, "statsd line refused");
            "invalid"
        }
    }
}

impl Targets {
    /// Checks the `T` time of every sample of `line` against what the store
    /// of its kind keeps.
    fn check_times(&self, line: &Line<'_>) -> Result<(), Reject> {
        for sample in line.samples() {
            let Some(at) = sample.at else { continue };
            let (space, clock) = match sample.reading {
                Reading::Count(_) => (
                    self.counters.counters().space(),
                    self.counters.counters().clock(),
                ),
                Reading::Observation { .. } => {
                    (self.stats.service().space(), self.stats.service().clock())
                }
                Reading::Gauge { .. } => {
                    (self.gauges.service().space(), self.gauges.service().clock())
                }
                Reading::Member(_) => (self.sets.service().space(), self.sets.service().clock()),
            };
            check_time(at, clock.now(), &space.precisions)?;
        }
        Ok(())
    }

    /// Hands a line of one sample to its writer; the counter increments
    /// taken.
    fn take_one(&self, line: &Line<'_>) -> Result<u64> {
        let Some(sample) = line.samples().next() else {
            return Ok(0);
        };
        let (name, at) = (line.name, sample.at.map(|t| t as f64));
        match sample.reading {
            Reading::Count(count) => self.counters.try_add(name, count, at).map(|()| 1),
            Reading::Observation { value, weight } => self
                .stats
                .try_record_weighted(name, value, weight, at)
                .map(|()| 0),
            Reading::Gauge { value, relative } => self
                .gauges
                .try_apply(&GaugeOp {
                    at,
                    ..gauge(name, value, relative)
                })
                .map(|()| 0),
            Reading::Member(member) => self
                .sets
                .try_add(&SetAdd {
                    at,
                    ..SetAdd::new(name, [member])
                })
                .map(|()| 0),
        }
    }

    /// Hands a line of several samples to every writer it touches at once,
    /// all or nothing; the counter increments taken.
    fn take_all(&self, line: &Line<'_>) -> Result<u64> {
        let (mut counts, mut observations, mut gauges, mut sets) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for sample in line.samples() {
            let (name, at) = (line.name, sample.at.map(|t| t as f64));
            match sample.reading {
                Reading::Count(count) => counts.push(Increment {
                    at,
                    ..Increment::new(name, count)
                }),
                Reading::Observation { value, weight } => observations.push(Observation {
                    at,
                    ..Observation::new(name, value).weight(weight)
                }),
                Reading::Gauge { value, relative } => gauges.push(GaugeOp {
                    at,
                    ..gauge(name, value, relative)
                }),
                Reading::Member(member) => sets.push(SetAdd {
                    at,
                    ..SetAdd::new(name, [member])
                }),
            }
        }
        let items: [(&Writer, Vec<Item>); 4] = [
            (self.counters.engine(), self.counters.items(&counts)?),
            (self.stats.engine(), self.stats.items(&observations)?),
            (self.gauges.engine(), self.gauges.items(&gauges)?),
            (self.sets.engine(), self.sets.items(&sets)?),
        ];
        let mut parts: Vec<(&Writer, &[Item])> = items
            .iter()
            .filter(|(_, items)| !items.is_empty())
            .map(|(writer, items)| (*writer, items.as_slice()))
            .collect();
        try_add_all(&mut parts)?;
        Ok(counts.len() as u64)
    }
}

/// The gauge operation of a gauge sample: `+5` / `-5` adjust, `5` sets.
fn gauge(name: &str, value: f64, relative: bool) -> GaugeOp {
    if relative {
        GaugeOp::adjust(name, value)
    } else {
        GaugeOp::set(name, value)
    }
}
