//! The statsd UDP listener: lines into the aggregating writers.
//!
//! Each datagram is parsed with [`crate::statsd`]; counter lines go to the
//! counters' aggregator with [`Aggregator::try_add`], timer, histogram and
//! distribution lines to the statistics' writer with
//! [`StatsWriter::try_record_weighted`] (a sample rate weighs each value as
//! `round(1/rate)` observations), gauge lines to the gauges' writer with
//! [`GaugesWriter::try_apply`] (`5` sets, `+5` / `-5` adjust, in the order
//! received), set lines to the sets' writer with [`SetsWriter::try_add`]
//! (the member counted once per slice). UDP has no back pressure, so a full writer
//! rejects the line as `overloaded` instead of waiting. Malformed lines are
//! counted as rejected (by reason) and logged at debug level; nothing a
//! rejected line holds is written, and no datagram can stop the listener.

use std::future::Future;

use tokio::net::UdpSocket;

use super::Metrics;
use super::udp::SocketInfo;
use crate::counters::Aggregator;
use crate::error::{Error, Result};
use crate::gauges::{GaugeOp, GaugesWriter};
use crate::sets::{SetAdd, SetsWriter};
use crate::stats::StatsWriter;
use crate::statsd::{Line, parse_packet};

/// Where the listener's lines go: the aggregating writers of each kind.
#[derive(Clone, Debug)]
pub struct Targets {
    /// Counter lines (`c`).
    pub counters: Aggregator,
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
        let taken = match line {
            Line::Counter { name, count } => targets
                .counters
                .try_add(name, count, None)
                .inspect(|()| metrics.increments_accepted(1)),
            Line::Observation {
                name,
                value,
                weight,
            } => targets.stats.try_record_weighted(name, value, weight, None),
            Line::Gauge {
                name,
                value,
                relative,
            } => targets.gauges.try_apply(&if relative {
                GaugeOp::adjust(name, value)
            } else {
                GaugeOp::set(name, value)
            }),
            Line::Set { name, member } => targets.sets.try_add(&SetAdd::new(name, [member])),
            Line::Rejected(reason) => {
                tracing::debug!(reason = reason.code(), "statsd line rejected");
                metrics.statsd_rejected(reason.code());
                continue;
            }
        };
        count(taken, metrics);
    }
}

/// Counts a line a writer took (or refused).
fn count(taken: Result<()>, metrics: &Metrics) {
    match taken {
        Ok(()) => metrics.statsd_accepted(1),
        Err(Error::Overloaded(_)) => metrics.statsd_rejected("overloaded"),
        Err(e) => {
            tracing::debug!(error = %e, "statsd line refused");
            metrics.statsd_rejected(if matches!(e, Error::Overflow { .. }) {
                "overflow"
            } else {
                "invalid"
            });
        }
    }
}
