//! The statsd socket: a UDP socket with a large receive buffer, and the
//! kernel's count of the datagrams it dropped for that socket.
//!
//! A burst of datagrams larger than a socket's receive buffer is dropped by
//! the kernel before the listener sees it, and nothing in the process would
//! know: the default buffer (about 200 KiB on Linux) holds a few hundred
//! small datagrams. [`bind`] asks for a large buffer (SO_RCVBUFFORCE when the
//! process may, which passes `net.core.rmem_max`; else SO_RCVBUF, which the
//! kernel caps at it), reads back what the kernel gave, and logs a warning
//! naming the cap and how to raise it when it gave less. [`receive`] reads
//! the datagrams on a thread of its own, blocking, up to [`BATCH`] per
//! system call (`recvmmsg` on Linux), so that taking a datagram costs no
//! more than on a bare socket. [`SocketInfo`] identifies a socket for
//! `/metrics`, which reads its drop counter with [`kernel_drops`] from
//! `/proc/net/udp` (Linux; elsewhere there is none).
//!
//! [`receive`] also reads carbon's UDP socket ([`super::carbon`]).
//!
//! What it does not do: parse (that is [`super::statsd`] and
//! [`super::carbon`]).

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use socket2::{Domain, Protocol, SockRef, Socket, Type};

/// The receive buffer asked for when none is configured: 8 MiB, room for
/// some 10,000 small datagrams queued while the listener is busy.
pub const DEFAULT_RECV_BUFFER: usize = 8 << 20;

/// The smallest receive buffer accepted.
pub const MIN_RECV_BUFFER: usize = 4096;

/// The largest receive buffer accepted (Linux doubles the value it is given
/// into a 32-bit int).
pub const MAX_RECV_BUFFER: usize = 1 << 30;

/// Checks a receive buffer size: [`MIN_RECV_BUFFER`] to [`MAX_RECV_BUFFER`]
/// bytes, else a configuration error naming the setting.
pub fn check_recv_buffer(bytes: usize) -> crate::Result<()> {
    if (MIN_RECV_BUFFER..=MAX_RECV_BUFFER).contains(&bytes) {
        Ok(())
    } else {
        Err(crate::Error::Config(format!(
            "statsd-recv-buffer must be {MIN_RECV_BUFFER} to {MAX_RECV_BUFFER} bytes, got {bytes}"
        )))
    }
}

/// What the kernel made of the receive buffer asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReceiveBuffer {
    /// Bytes asked for.
    pub requested: usize,
    /// Bytes the kernel reports (SO_RCVBUF). Linux reports twice what it
    /// was given, the other half being its bookkeeping allowance.
    pub effective: usize,
    /// Whether SO_RCVBUFFORCE set it (the process may pass the cap).
    pub forced: bool,
    /// The cap (`net.core.rmem_max`) when it made the buffer smaller than
    /// asked.
    pub capped_at: Option<usize>,
}

/// Binds a UDP socket on `addr` with a receive buffer of `recv_buffer`
/// bytes (see [`ReceiveBuffer`]), non-blocking, registered with the current
/// Tokio runtime (call it inside one). Logs a warning when the kernel gave
/// less than asked.
pub fn bind(
    addr: SocketAddr,
    recv_buffer: usize,
) -> io::Result<(tokio::net::UdpSocket, ReceiveBuffer)> {
    check_recv_buffer(recv_buffer)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
    let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    let forced = force_recv_buffer(&socket, recv_buffer);
    if !forced {
        socket.set_recv_buffer_size(recv_buffer)?;
    }
    let effective = socket.recv_buffer_size()?;
    // Linux reports twice what it granted; elsewhere the figure is as set.
    let granted = if cfg!(target_os = "linux") {
        effective / 2
    } else {
        effective
    };
    let capped_at = (granted < recv_buffer).then(rmem_max).flatten();
    let buffer = ReceiveBuffer {
        requested: recv_buffer,
        effective,
        forced,
        capped_at,
    };
    if granted < recv_buffer {
        let cap = capped_at.map_or_else(
            || "a system limit".to_owned(),
            |c| format!("net.core.rmem_max = {c}"),
        );
        tracing::warn!(
            requested = recv_buffer,
            granted,
            "statsd receive buffer: asked for {recv_buffer} bytes, the kernel gave {granted} \
             ({cap}); a burst larger than that is dropped by the kernel (see \
             tally_statsd_kernel_drops_total). Raise the cap with \
             `sysctl -w net.core.rmem_max={recv_buffer}`, or run with CAP_NET_ADMIN"
        );
    }
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    let socket = tokio::net::UdpSocket::from_std(socket.into())?;
    Ok((socket, buffer))
}

/// SO_RCVBUFFORCE (Linux, with CAP_NET_ADMIN): true when it took.
#[cfg(target_os = "linux")]
fn force_recv_buffer(socket: &Socket, bytes: usize) -> bool {
    nix::sys::socket::setsockopt(socket, nix::sys::socket::sockopt::RcvBufForce, &bytes).is_ok()
}

#[cfg(not(target_os = "linux"))]
fn force_recv_buffer(_socket: &Socket, _bytes: usize) -> bool {
    false
}

/// Datagrams taken per system call at most.
pub const BATCH: usize = 32;

/// The largest datagram read whole (the most a UDP datagram can carry).
const MAX_DATAGRAM: usize = 65_536;

/// How often a receive with nothing to read looks for the shutdown.
const STOP_CHECK: Duration = Duration::from_millis(100);

/// Calls `each` with every datagram that arrives on `socket` until
/// `shutdown` completes, then waits for the last one to be handled.
///
/// The socket is read on a thread of its own (named `tally-<listener>`,
/// `listener` being `statsd` or `carbon`, which also names it in logs) with
/// blocking calls that take up to [`BATCH`] queued datagrams at once: a
/// burst costs neither a wake-up nor a system call per datagram, and the
/// async runtime never waits on it. Its buffers take [`BATCH`] x 64 KiB.
/// An error from a receive is logged and the loop goes on; a failure to set
/// up the thread, or its panic, is returned.
pub async fn receive(
    socket: tokio::net::UdpSocket,
    listener: &'static str,
    shutdown: impl Future<Output = ()>,
    each: impl FnMut(&[u8]) + Send + 'static,
) -> io::Result<()> {
    let socket = socket.into_std()?;
    socket.set_nonblocking(false)?;
    socket.set_read_timeout(Some(STOP_CHECK))?;
    let stop = Arc::new(AtomicBool::new(false));
    let (done, finished) = tokio::sync::oneshot::channel::<()>();
    std::thread::Builder::new()
        .name(format!("tally-{listener}"))
        .spawn({
            let stop = stop.clone();
            move || {
                receive_until(&socket, listener, &stop, each);
                let _ = done.send(());
            }
        })?;
    shutdown.await;
    stop.store(true, Ordering::Relaxed);
    finished
        .await
        .map_err(|_| io::Error::other(format!("the {listener} receive thread panicked")))
}

/// The receive loop: batches of datagrams until `stop` is set.
#[cfg(target_os = "linux")]
fn receive_until(
    socket: &std::net::UdpSocket,
    listener: &str,
    stop: &AtomicBool,
    mut each: impl FnMut(&[u8]),
) {
    use nix::errno::Errno;
    use nix::sys::socket::{MsgFlags, MultiHeaders, recvmmsg};
    use std::io::IoSliceMut;
    use std::os::fd::AsRawFd;

    let mut bufs = vec![0u8; BATCH * MAX_DATAGRAM];
    let mut headers = MultiHeaders::<()>::preallocate(BATCH, None);
    let mut lens = [0usize; BATCH];
    while !stop.load(Ordering::Relaxed) {
        let taken = {
            let mut chunks = bufs.chunks_mut(MAX_DATAGRAM);
            let mut slices: [[IoSliceMut<'_>; 1]; BATCH] =
                std::array::from_fn(|_| [IoSliceMut::new(chunks.next().expect("BATCH chunks"))]);
            // Blocks (up to STOP_CHECK) for the first datagram, then takes
            // what is queued behind it without waiting.
            match recvmmsg(
                socket.as_raw_fd(),
                &mut headers,
                slices.iter_mut(),
                MsgFlags::MSG_WAITFORONE,
                None,
            ) {
                Ok(results) => {
                    let mut taken = 0;
                    for (len, msg) in lens.iter_mut().zip(results) {
                        *len = msg.bytes;
                        taken += 1;
                    }
                    taken
                }
                Err(Errno::EAGAIN | Errno::EINTR) => 0,
                Err(e) => {
                    tracing::warn!(error = %e, listener, "receive failed");
                    0
                }
            }
        };
        for (chunk, &len) in bufs.chunks(MAX_DATAGRAM).zip(&lens[..taken]) {
            each(&chunk[..len]);
        }
    }
}

/// The receive loop: one datagram per call until `stop` is set.
#[cfg(not(target_os = "linux"))]
fn receive_until(
    socket: &std::net::UdpSocket,
    listener: &str,
    stop: &AtomicBool,
    mut each: impl FnMut(&[u8]),
) {
    let mut buf = vec![0u8; MAX_DATAGRAM];
    while !stop.load(Ordering::Relaxed) {
        match socket.recv(&mut buf) {
            Ok(len) => each(&buf[..len]),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) => {}
            Err(e) => tracing::warn!(error = %e, listener, "receive failed"),
        }
    }
}

/// `net.core.rmem_max`, where the system has it.
fn rmem_max() -> Option<usize> {
    std::fs::read_to_string("/proc/sys/net/core/rmem_max")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// What identifies a UDP socket to the kernel's tables, and its buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SocketInfo {
    /// The socket's inode (Linux; 0 where unknown).
    pub inode: u64,
    /// Whether it is an IPv6 socket (listed in `/proc/net/udp6`).
    pub ipv6: bool,
    /// Its receive buffer as the kernel reports it (SO_RCVBUF).
    pub recv_buffer: usize,
}

impl SocketInfo {
    /// The figures of `socket`.
    pub fn of(socket: &tokio::net::UdpSocket) -> io::Result<Self> {
        let sock = SockRef::from(socket);
        Ok(SocketInfo {
            inode: inode(socket)?,
            ipv6: socket.local_addr()?.is_ipv6(),
            recv_buffer: sock.recv_buffer_size()?,
        })
    }
}

#[cfg(target_os = "linux")]
fn inode(socket: &tokio::net::UdpSocket) -> io::Result<u64> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::MetadataExt;
    Ok(std::fs::metadata(format!("/proc/self/fd/{}", socket.as_raw_fd()))?.ino())
}

#[cfg(not(target_os = "linux"))]
fn inode(_socket: &tokio::net::UdpSocket) -> io::Result<u64> {
    Ok(0)
}

/// One row of `/proc/net/udp` (or `udp6`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UdpRow {
    /// The local port.
    pub local_port: u16,
    /// Bytes queued for the reader (as the kernel accounts them).
    pub rx_queue: u64,
    /// The socket's inode.
    pub inode: u64,
    /// Datagrams the kernel dropped for this socket (a full buffer, a bad
    /// checksum) since it was opened.
    pub drops: u64,
}

/// The rows of a `/proc/net/udp` or `/proc/net/udp6` table; lines that do
/// not parse are skipped.
pub fn udp_rows(table: &str) -> impl Iterator<Item = UdpRow> + '_ {
    table.lines().skip(1).filter_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 13 {
            return None;
        }
        let (_, port) = f[1].rsplit_once(':')?;
        let (_, rx) = f[4].split_once(':')?;
        Some(UdpRow {
            local_port: u16::from_str_radix(port, 16).ok()?,
            rx_queue: u64::from_str_radix(rx, 16).ok()?,
            inode: f[9].parse().ok()?,
            drops: f[12].parse().ok()?,
        })
    })
}

/// The kernel's drop counter of the socket `info` names (Linux), read from
/// `/proc/net/udp` or `udp6`; `None` where the system has no such table or
/// the socket is not in it.
pub async fn kernel_drops(info: SocketInfo) -> Option<u64> {
    if info.inode == 0 {
        return None;
    }
    let path = if info.ipv6 {
        "/proc/net/udp6"
    } else {
        "/proc/net/udp"
    };
    let table = tokio::fs::read_to_string(path).await.ok()?;
    udp_rows(&table)
        .find(|r| r.inode == info.inode)
        .map(|r| r.drops)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_drop_column_of_proc_net_udp() {
        let table = "   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops            \n\
          123: 0100007F:1F90 00000000:0000 07 00000000:00004800 00:00000000 00000000     0        0 98765 2 0000000000000000 17        \n\
          124: 00000000:0035 00000000:0000 07 00000000:00000000 00:00000000 00000000   101        0 555 2 0000000000000000 0\n\
          garbage\n";
        let rows: Vec<UdpRow> = udp_rows(table).collect();
        assert_eq!(
            rows,
            vec![
                UdpRow {
                    local_port: 8080,
                    rx_queue: 0x4800,
                    inode: 98765,
                    drops: 17
                },
                UdpRow {
                    local_port: 53,
                    rx_queue: 0,
                    inode: 555,
                    drops: 0
                },
            ]
        );
    }

    #[test]
    fn reads_ipv6_rows() {
        let table = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops\n\
           10: 00000000000000000000000001000000:1F91 00000000000000000000000000000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 4242 2 0000000000000000 3\n";
        let row = udp_rows(table).next().unwrap();
        assert_eq!((row.local_port, row.inode, row.drops), (8081, 4242, 3));
    }
}
