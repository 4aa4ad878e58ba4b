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

/// Datagrams taken per wake-up at most before the listener lets other tasks
/// (and its shutdown) run.
const DRAIN_BUDGET: u64 = 4096;

/// Receives statsd datagrams on `socket` until `shutdown` completes.
///
/// Each wake-up drains every datagram queued (up to [`DRAIN_BUDGET`]) with
/// non-blocking reads, so a burst costs one wake-up, not one per datagram.
/// The socket is registered with `metrics`, whose `/metrics` then shows its
/// receive buffer and the datagrams the kernel dropped for it. Bind it with
/// [`super::udp::bind`] for a buffer that holds a burst.
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
    tokio::pin!(shutdown);
    let mut buf = vec![0u8; 65_535];
    loop {
        tokio::select! {
            biased;
            _ = &mut shutdown => break,
            ready = socket.readable() => if let Err(e) = ready {
                tracing::warn!(error = %e, "statsd socket failed");
                break;
            },
        }
        let mut taken = 0;
        while taken < DRAIN_BUDGET {
            match socket.try_recv(&mut buf) {
                Ok(len) => {
                    taken += 1;
                    handle(&buf[..len], &aggregator, &metrics);
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => {
                    tracing::warn!(error = %e, "statsd receive failed");
                    break;
                }
            }
        }
        metrics.statsd_datagrams(taken);
        if taken == DRAIN_BUDGET {
            tokio::task::yield_now().await;
        }
    }
    tracing::info!("statsd listener stopped");
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
