//! The statsd UDP listener: counter lines into the aggregating writer.
//!
//! Each datagram is parsed with [`crate::statsd`]; counter lines go to the
//! aggregator with [`Aggregator::try_add`] (UDP has no back pressure, so a
//! full aggregator rejects the line as `overloaded` instead of waiting).
//! Everything else is counted as rejected (by reason) and logged at debug
//! level; nothing a rejected line holds is written, and no datagram can stop
//! the listener.

use std::future::Future;

use tokio::net::UdpSocket;

use super::Metrics;
use super::udp::SocketInfo;
use crate::counters::Aggregator;
use crate::error::Error;
use crate::statsd::{Line, parse_packet};

/// Receives statsd datagrams on `socket` until `shutdown` completes.
///
/// The datagrams are read on a thread of the listener's own, many per
/// system call ([`super::udp::receive`]), and each is counted there with
/// [`handle`]. The socket is registered with `metrics`, whose `/metrics`
/// then shows its receive buffer and the datagrams the kernel dropped for
/// it. Bind it with [`super::udp::bind`] for a buffer that holds a burst.
pub async fn listen(
    socket: UdpSocket,
    aggregator: Aggregator,
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
        handle(packet, &aggregator, &counted);
    };
    match super::udp::receive(socket, shutdown, each).await {
        Ok(()) => tracing::info!("statsd listener stopped"),
        Err(e) => tracing::error!(error = %e, "statsd listener failed"),
    }
}

/// Counts one datagram's lines.
pub fn handle(packet: &[u8], aggregator: &Aggregator, metrics: &Metrics) {
    for line in parse_packet(packet) {
        match line {
            Line::Counter { name, count } => match aggregator.try_add(name, count, None) {
                Ok(()) => {
                    metrics.statsd_accepted(1);
                    metrics.increments_accepted(1);
                }
                Err(Error::Overloaded(_)) => metrics.statsd_rejected("overloaded"),
                Err(e) => {
                    tracing::debug!(error = %e, "statsd line refused");
                    metrics.statsd_rejected(if matches!(e, Error::Overflow { .. }) {
                        "overflow"
                    } else {
                        "invalid"
                    });
                }
            },
            Line::Rejected(reason) => {
                tracing::debug!(reason = reason.code(), "statsd line rejected");
                metrics.statsd_rejected(reason.code());
            }
        }
    }
}
