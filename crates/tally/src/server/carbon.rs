//! The carbon listener: carbon's plaintext lines (`path value timestamp`),
//! over TCP and UDP on one address, into the gauges' aggregating writer.
//!
//! Each line is parsed with [`crate::carbon`] and, when accepted, handed to
//! the gauges' writer as `GaugeOp::set(path, value).at(timestamp)`; a
//! rejected line writes nothing and is counted by reason in `/metrics`
//! (`tally_carbon_lines_rejected_total{reason}`), as is a line the writer
//! refuses (`overloaded`, `invalid`).
//!
//! TCP: one task per connection reads it into a [`LineBuffer`] and takes
//! its lines in order, waiting for room in the writer when it is full (the
//! back pressure reaches the sender through TCP). At most
//! [`CarbonSettings::max_connections`] connections are served at once: at
//! the limit the listener stops accepting until one closes (new
//! connections wait in the kernel's backlog), as carbon does. A line longer
//! than [`CarbonSettings::max_line`] bytes is refused (`too_long`) and the
//! connection goes on from the next `\n`; an unterminated rest at the end
//! of a stream is refused (`unterminated`). Each connection holds a buffer
//! of `max_line` + [`crate::carbon::READ_CHUNK`] bytes.
//!
//! UDP: a datagram holds lines, read on a thread of the listener's own
//! ([`super::udp::receive`]) and taken without waiting (UDP has no back
//! pressure): a full writer refuses the line as `overloaded`.
//!
//! Shutdown: when `shutdown` completes the listener stops accepting (the
//! connections already waiting in the kernel's backlog are taken too, past
//! the limit: their client may have sent its lines and left) and each
//! connection reads on until its end, or until nothing has arrived
//! for [`DRAIN_IDLE`] (an open, quiet connection), or [`DRAIN_GRACE`] has
//! passed (a connection that never stops sending); every line read is
//! handed to the writer before [`listen`] returns. So every line of a
//! connection closed before the shutdown is taken; `tally serve` then
//! flushes the writer.
//!
//! What it does not do: parse (that is [`crate::carbon`]), or carbon's
//! pickle protocol.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio_util::task::TaskTracker;

use super::Metrics;
use crate::carbon::{
    DEFAULT_MAX_LINE, LineBuffer, Point, Reject, Window, datagram_lines, parse_line,
};
use crate::error::{Error, Result};
use crate::gauges::{GaugeOp, GaugesWriter};

/// TCP connections served at once when none is configured.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;

/// The most TCP connections that may be configured.
pub const MAX_CONNECTIONS: usize = 65_536;

/// The shortest line limit that may be configured, bytes.
pub const MIN_MAX_LINE: usize = 64;

/// The longest line limit that may be configured, bytes (1 MiB).
pub const MAX_MAX_LINE: usize = 1 << 20;

/// At shutdown, how long a connection may stay quiet before it is closed.
pub const DRAIN_IDLE: Duration = Duration::from_millis(250);

/// At shutdown, how long connections are read at most.
pub const DRAIN_GRACE: Duration = Duration::from_secs(10);

/// The listener's limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CarbonSettings {
    /// The longest TCP line accepted, bytes without its `\n` (default
    /// [`DEFAULT_MAX_LINE`], carbon's; [`MIN_MAX_LINE`] to
    /// [`MAX_MAX_LINE`]).
    pub max_line: usize,
    /// TCP connections served at once (default
    /// [`DEFAULT_MAX_CONNECTIONS`]; 1 to [`MAX_CONNECTIONS`]).
    pub max_connections: usize,
}

impl Default for CarbonSettings {
    fn default() -> Self {
        CarbonSettings {
            max_line: DEFAULT_MAX_LINE,
            max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }
}

impl CarbonSettings {
    /// Checks the limits; the error names the setting.
    pub fn validate(self) -> Result<Self> {
        if !(MIN_MAX_LINE..=MAX_MAX_LINE).contains(&self.max_line) {
            return Err(Error::Config(format!(
                "carbon-max-line must be {MIN_MAX_LINE} to {MAX_MAX_LINE} bytes, got {}",
                self.max_line
            )));
        }
        if !(1..=MAX_CONNECTIONS).contains(&self.max_connections) {
            return Err(Error::Config(format!(
                "carbon-max-connections must be 1 to {MAX_CONNECTIONS}, got {}",
                self.max_connections
            )));
        }
        Ok(self)
    }
}

/// The listener's sockets: TCP and UDP on one address.
#[derive(Debug)]
pub struct Bound {
    tcp: TcpListener,
    udp: UdpSocket,
}

impl Bound {
    /// The address both listen on.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.tcp.local_addr()
    }
}

/// Binds TCP on `addr`, then UDP on the address TCP got (the same port
/// when `addr`'s is 0).
pub async fn bind(addr: SocketAddr) -> io::Result<Bound> {
    let tcp = TcpListener::bind(addr).await?;
    let udp = UdpSocket::bind(tcp.local_addr()?).await?;
    Ok(Bound { tcp, udp })
}

/// What every connection shares.
#[derive(Debug)]
struct Shared {
    writer: GaugesWriter,
    metrics: Metrics,
    max_line: usize,
}

impl Shared {
    /// The timestamps accepted now.
    fn window(&self) -> Window {
        let service = self.writer.service();
        Window::new(service.clock().now(), &service.space().precisions)
    }

    fn rejected(&self, reason: Reject) {
        tracing::debug!(reason = reason.code(), "carbon line rejected");
        self.metrics.carbon_rejected(reason.code());
    }

    /// Counts a line the writer refused.
    fn refused(&self, e: &Error) {
        tracing::debug!(error = %e, "carbon line refused");
        self.metrics.carbon_rejected(match e {
            Error::Overloaded(_) => "overloaded",
            _ => "invalid",
        });
    }
}

/// The operation a line stands for.
fn op(p: &Point<'_>) -> GaugeOp {
    GaugeOp::set(p.path, p.value).at(p.at)
}

/// Serves `bound` until `shutdown` completes, handing lines to `writer`;
/// then stops accepting, reads the open connections out (see the module's
/// doc) and returns once every line read is in the writer.
pub async fn listen(
    bound: Bound,
    writer: GaugesWriter,
    settings: CarbonSettings,
    metrics: Metrics,
    shutdown: impl Future<Output = ()>,
) {
    let shared = Arc::new(Shared {
        writer,
        metrics,
        max_line: settings.max_line,
    });
    let (stop_tx, stop_rx) = watch::channel(false);
    let udp = tokio::spawn(receive_datagrams(bound.udp, shared.clone(), {
        let mut rx = stop_rx.clone();
        async move {
            let _ = rx.wait_for(|stop| *stop).await;
        }
    }));
    let connections = TaskTracker::new();
    let permits = Arc::new(Semaphore::new(settings.max_connections));
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            p = permits.clone().acquire_owned() => p.expect("the semaphore is never closed"),
            () = &mut shutdown => break,
        };
        let accepted = tokio::select! {
            a = bound.tcp.accept() => a,
            () = &mut shutdown => break,
        };
        match accepted {
            Ok((stream, peer)) => {
                serve(&connections, stream, peer, &shared, &stop_rx, Some(permit))
            }
            Err(e) => {
                // Out of file descriptors, say: wait a little, do not spin.
                tracing::warn!(error = %e, "carbon: accepting a connection failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    let _ = stop_tx.send(true);
    // Connections the kernel completed but nobody accepted yet may hold
    // lines of a client that already left: take them too, past the limit.
    match bound.tcp.into_std() {
        Ok(listener) => {
            while let Ok((stream, peer)) = listener.accept() {
                match stream
                    .set_nonblocking(true)
                    .and_then(|()| TcpStream::from_std(stream))
                {
                    Ok(stream) => serve(&connections, stream, peer, &shared, &stop_rx, None),
                    Err(e) => {
                        tracing::warn!(error = %e, %peer, "carbon: a waiting connection is lost")
                    }
                }
            }
        }
        Err(e) => tracing::warn!(error = %e, "carbon: waiting connections are lost"),
    }
    connections.close();
    connections.wait().await;
    if let Err(e) = udp.await {
        tracing::error!(error = %e, "carbon UDP listener failed");
    }
    tracing::info!("carbon listener stopped");
}

/// Serves one accepted connection in a task of `connections`, holding
/// `permit` (a place under the limit) until it closes.
fn serve(
    connections: &TaskTracker,
    stream: TcpStream,
    peer: SocketAddr,
    shared: &Arc<Shared>,
    stop: &watch::Receiver<bool>,
    permit: Option<OwnedSemaphorePermit>,
) {
    let (shared, stop) = (shared.clone(), stop.clone());
    connections.spawn(async move {
        shared.metrics.carbon_connection_opened();
        tracing::debug!(%peer, "carbon connection opened");
        connection(stream, &shared, stop).await;
        shared.metrics.carbon_connection_closed();
        tracing::debug!(%peer, "carbon connection closed");
        drop(permit);
    });
}

/// Reads one connection until it ends, or until it is drained after
/// `stop` (see the module's doc).
async fn connection(mut stream: TcpStream, shared: &Shared, mut stop: watch::Receiver<bool>) {
    let mut lines = LineBuffer::new(shared.max_line);
    let mut draining = false;
    let mut drain_until = None;
    loop {
        let read = if draining {
            let deadline =
                *drain_until.get_or_insert_with(|| tokio::time::Instant::now() + DRAIN_GRACE);
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                tracing::warn!("carbon: a connection still sending at shutdown is closed");
                break;
            }
            match tokio::time::timeout(DRAIN_IDLE.min(left), stream.read(lines.spare())).await {
                Ok(read) => read,
                Err(_) => break, // quiet, or out of time
            }
        } else {
            tokio::select! {
                read = stream.read(lines.spare()) => read,
                _ = stop.wait_for(|stop| *stop) => {
                    draining = true;
                    continue;
                }
            }
        };
        match read {
            Ok(0) => {
                if let Some(reason) = lines.finish() {
                    shared.rejected(reason);
                }
                break;
            }
            Ok(n) => {
                lines.filled(n);
                take_lines(&mut lines, shared).await;
            }
            Err(e) => {
                tracing::debug!(error = %e, "carbon connection failed");
                break;
            }
        }
    }
}

/// Hands every complete line in `lines` to the writer, in order.
async fn take_lines(lines: &mut LineBuffer, shared: &Shared) {
    let window = shared.window();
    let mut accepted = 0;
    while let Some(line) = lines.next_line() {
        match line.and_then(|l| parse_line(l, &window)) {
            Ok(point) => match shared.writer.take(&op(&point)).await {
                Ok(()) => accepted += 1,
                Err(e) => shared.refused(&e),
            },
            Err(reason) => shared.rejected(reason),
        }
    }
    shared.metrics.carbon_accepted(accepted);
}

/// Receives datagrams until `shutdown` completes.
async fn receive_datagrams(
    socket: UdpSocket,
    shared: Arc<Shared>,
    shutdown: impl Future<Output = ()>,
) {
    let each = move |datagram: &[u8]| {
        shared.metrics.carbon_datagrams(1);
        let window = shared.window();
        let mut accepted = 0;
        datagram_lines(datagram, |line| match parse_line(line, &window) {
            Ok(point) => match shared.writer.try_apply(&op(&point)) {
                Ok(()) => accepted += 1,
                Err(e) => shared.refused(&e),
            },
            Err(reason) => shared.rejected(reason),
        });
        shared.metrics.carbon_accepted(accepted);
    };
    if let Err(e) = super::udp::receive(socket, "carbon", shutdown, each).await {
        tracing::error!(error = %e, "carbon UDP listener failed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_are_checked_and_errors_name_them() {
        assert!(CarbonSettings::default().validate().is_ok());
        let too_short = CarbonSettings {
            max_line: 10,
            ..Default::default()
        };
        let none = CarbonSettings {
            max_connections: 0,
            ..Default::default()
        };
        for (settings, expected) in [
            (
                too_short,
                "carbon-max-line must be 64 to 1048576 bytes, got 10",
            ),
            (none, "carbon-max-connections must be 1 to 65536, got 0"),
        ] {
            let e = settings.validate().unwrap_err();
            assert!(e.to_string().contains(expected), "{e}");
        }
    }
}
