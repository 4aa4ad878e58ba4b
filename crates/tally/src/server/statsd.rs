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
use crate::counters::Aggregator;
use crate::error::Error;
use crate::statsd::{Line, parse_packet};

/// Receives statsd datagrams on `socket` until `shutdown` completes.
pub async fn listen(
    socket: UdpSocket,
    aggregator: Aggregator,
    metrics: Metrics,
    shutdown: impl Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    let mut buf = vec![0u8; 65_535];
    loop {
        let received = tokio::select! {
            _ = &mut shutdown => break,
            r = socket.recv_from(&mut buf) => r,
        };
        let len = match received {
            Ok((len, _)) => len,
            Err(e) => {
                tracing::warn!(error = %e, "statsd receive failed");
                continue;
            }
        };
        handle(&buf[..len], &aggregator, &metrics);
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
