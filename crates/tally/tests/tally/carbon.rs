//! The carbon listener on real sockets (TCP and UDP on one address), over
//! the gauges' aggregating writer on SQLite, with a manual clock: lines in
//! order per connection, refusals counted by reason and writing nothing,
//! long lines, the connection limit, and every line of a connection closed
//! before the shutdown written.

use std::io::Write;
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tally::server::Metrics;
use tally::server::carbon::{self, CarbonSettings};
use tally::{ManualClock, Tally};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

const NOW: f64 = 1_700_000_000.0;

/// A listener on a free port, stopped with `stop`.
struct Listener {
    tally: Tally,
    metrics: Metrics,
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl Listener {
    async fn start(settings: CarbonSettings) -> Self {
        let clock = Arc::new(ManualClock::at(NOW));
        let tally = Tally::builder()
            .precisions([1, 60])
            .samples(120)
            .clock(clock)
            .open("sqlite::memory:")
            .await
            .unwrap();
        let metrics = Metrics::default();
        let bound = carbon::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let addr = bound.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(carbon::listen(
            bound,
            tally.gauges_writer(),
            settings,
            metrics.clone(),
            async move {
                let _ = stopped.await;
            },
        ));
        Listener {
            tally,
            metrics,
            addr,
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// Stops the listener (which reads its connections out), then flushes
    /// the writer.
    async fn stop(&mut self) {
        let _ = self.stop.take().unwrap().send(());
        self.task.take().unwrap().await.unwrap();
        self.tally.gauges_writer().flush().await.unwrap();
    }

    /// Waits (up to a minute: CI is shared) until `done` holds.
    async fn until(&self, what: &str, done: impl Fn(&Metrics) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !done(&self.metrics) {
            assert!(Instant::now() < deadline, "never happened: {what}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// The gauge's slices at 1 s: (start, last) pairs.
    async fn seconds(&self, name: &str) -> Vec<(u64, f64)> {
        self.tally
            .gauges()
            .get(name, 1)
            .await
            .unwrap()
            .iter()
            .map(|s| (s.start, s.last))
            .collect()
    }
}

fn send(stream: &mut TcpStream, text: &str) {
    stream.write_all(text.as_bytes()).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_lines_set_gauges_in_order_and_bad_lines_write_nothing() {
    let mut l = Listener::start(CarbonSettings::default()).await;
    let mut c = TcpStream::connect(l.addr).unwrap();
    send(
        &mut c,
        "app.load 0.5 1700000000\n\
         app.load 0.7 1700000000.5\r\n\
         app.queue 3 1699999999\n\
         app.load 0.9 1700000000\n\
         bad.value x 1700000000\n\
         bad.nan nan 1700000000\n\
         bad.old 1 1600000000\n\
         bad.fields 1\n\
         \n",
    );
    c.write_all(b"bad.utf8\xff 1 1700000000\n").unwrap();
    send(&mut c, "app.now 4 -1\nbad.tail 1 1700000000");
    drop(c);
    l.until("every line seen", |m| {
        m.carbon_accepted_total() == 5 && m.carbon_rejected_for("unterminated") == 1
    })
    .await;
    l.stop().await;
    // The last line of the second wins: applied in the order sent.
    assert_eq!(l.seconds("app.load").await, vec![(1_700_000_000, 0.9)]);
    assert_eq!(l.seconds("app.queue").await, vec![(1_699_999_999, 3.0)]);
    assert_eq!(l.seconds("app.now").await, vec![(1_700_000_000, 4.0)]);
    for (reason, n) in [
        ("bad_value", 1),
        ("not_finite", 1),
        ("time_not_kept", 1),
        ("malformed", 2),
        ("not_utf8", 1),
        ("unterminated", 1),
    ] {
        assert_eq!(l.metrics.carbon_rejected_for(reason), n, "{reason}");
    }
    let page = l.tally.gauges().search("", None, 100).await.unwrap();
    let names: Vec<&str> = page.names.iter().map(String::as_str).collect();
    assert_eq!(names, ["app.load", "app.now", "app.queue"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_too_long_is_refused_and_the_connection_goes_on() {
    let mut l = Listener::start(CarbonSettings {
        max_line: 64,
        ..Default::default()
    })
    .await;
    let mut c = TcpStream::connect(l.addr).unwrap();
    let long = format!("{} 1 1700000000\n", "x".repeat(100));
    send(&mut c, &format!("a 1 1700000000\n{long}b 2 1700000000\n"));
    // A long line split across writes.
    send(&mut c, &"y".repeat(50));
    l.until("the first lines", |m| m.carbon_accepted_total() == 2)
        .await;
    send(&mut c, &format!("{}\nc 3 1700000000\n", "y".repeat(50)));
    drop(c);
    l.until("the last line", |m| m.carbon_accepted_total() == 3)
        .await;
    l.stop().await;
    assert_eq!(l.metrics.carbon_rejected_for("too_long"), 2);
    assert_eq!(l.seconds("c").await, vec![(1_700_000_000, 3.0)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn udp_datagrams_hold_lines() {
    let mut l = Listener::start(CarbonSettings::default()).await;
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket
        .send_to(
            b"u.a 1 1700000000\r\nu.b 2 1700000000\x0bu.a 5 1700000000\nnope\n",
            l.addr,
        )
        .unwrap();
    l.until("the datagram", |m| m.carbon_accepted_total() == 3)
        .await;
    l.stop().await;
    assert_eq!(l.metrics.carbon_rejected_for("malformed"), 1);
    assert_eq!(l.seconds("u.a").await, vec![(1_700_000_000, 5.0)]);
    assert_eq!(l.seconds("u.b").await, vec![(1_700_000_000, 2.0)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_the_connection_limit_the_next_waits_until_one_closes() {
    let mut l = Listener::start(CarbonSettings {
        max_connections: 1,
        ..Default::default()
    })
    .await;
    let mut first = TcpStream::connect(l.addr).unwrap();
    send(&mut first, "one 1 1700000000\n");
    l.until("the first connection's line", |m| {
        m.carbon_accepted_total() == 1
    })
    .await;
    // The second connects (the kernel's backlog) and sends, but is not
    // served while the first is open...
    let mut second = TcpStream::connect(l.addr).unwrap();
    send(&mut second, "two 2 1700000000\n");
    drop(second);
    send(&mut first, "one 3 1700000000\n");
    l.until("the first connection's second line", |m| {
        m.carbon_accepted_total() == 2
    })
    .await;
    assert_eq!(l.metrics.carbon_connections_open(), 1);
    // ...the first's lines came in while the second waited: it is served
    // once the first closes.
    drop(first);
    l.until("the second connection's line", |m| {
        m.carbon_accepted_total() == 3
    })
    .await;
    l.stop().await;
    assert_eq!(l.seconds("two").await, vec![(1_700_000_000, 2.0)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_line_of_a_connection_closed_before_the_shutdown_is_written() {
    let mut l = Listener::start(CarbonSettings::default()).await;
    // Enough lines that the listener is still reading when told to stop.
    let lines: String = (0..50_000)
        .map(|i| format!("drain.{} {i} 1700000000\n", i % 100))
        .collect();
    let mut c = TcpStream::connect(l.addr).unwrap();
    // An open, quiet connection does not hold the shutdown up.
    let mut quiet = TcpStream::connect(l.addr).unwrap();
    send(&mut quiet, "quiet 1 1700000000\n");
    send(&mut c, &lines);
    drop(c);
    l.stop().await;
    assert_eq!(l.metrics.carbon_accepted_total(), 50_001);
    for k in [0, 57, 99] {
        assert_eq!(
            l.seconds(&format!("drain.{k}")).await,
            vec![(1_700_000_000, f64::from(49_900 + k))]
        );
    }
    drop(quiet);
}
