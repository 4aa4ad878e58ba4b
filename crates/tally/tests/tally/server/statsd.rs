//! Statsd over real UDP.

use super::*;

use tally::stats::SliceSummary;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statsd_packets_over_udp() {
    let (s, listener) = listening(Kind::RedisDefault).await;
    listener
        .send(&[
            b"udp:1|c\nudp:2|c|@0.5\ntemp:21|g\nrt:3|ms\nnot a line\nudp:x|c\n",
            b"udp:10|c|#env:prod",
            &[0xff, 0xfe, b':', b'1', b'|', b'c'],
        ])
        .await;
    taken(&s, 8, 5).await;
    let temp = s.writers.gauges.service().current("temp").await.unwrap();
    assert_eq!(temp, Some(21.0));
    let rt = stat_days(&s, "rt", &[]).await;
    assert_eq!((rt[0].summary.count, rt[0].summary.sum), (1, 3.0));
    let body = s.get("/v1/counters/udp?precision=86400").await.json();
    assert_eq!(body["precisions"]["86400"][0][1], 1 + 4 + 10, "{body}");
    assert_eq!(
        s.get("/v1/counters?prefix=temp").await.json()["counters"],
        json!([])
    );
    listener.stop().await;
}

/// A statsd listener on a free UDP port feeding `s`' writers, and a
/// client socket that sends to it.
struct Listener {
    addr: std::net::SocketAddr,
    client: tokio::net::UdpSocket,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

/// A server with default settings on `kind`, and its statsd listener.
async fn listening(kind: Kind) -> (TestServer, Listener) {
    let s = server(kind, ServerSettings::default(), false).await;
    let socket = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let listener = Listener::on(socket, &s).await;
    (s, listener)
}

impl Listener {
    /// A listener on `socket`, already bound.
    async fn on(socket: tokio::net::UdpSocket, s: &TestServer) -> Self {
        let addr = socket.local_addr().unwrap();
        let client = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(tally::server::statsd::listen(
            socket,
            s.statsd.clone(),
            s.state.metrics().clone(),
            async {
                let _ = stopped.await;
            },
        ));
        Listener {
            addr,
            client,
            stop,
            task,
        }
    }

    /// Sends each of `packets` as one datagram.
    async fn send(&self, packets: &[&[u8]]) {
        for packet in packets {
            self.client.send_to(packet, self.addr).await.unwrap();
        }
    }

    /// Stops it and waits until it has.
    async fn stop(self) {
        self.stop.send(()).unwrap();
        tokio::time::timeout(tally_testkit::PATIENCE, self.task)
            .await
            .expect("listener stops")
            .unwrap();
    }
}

/// Issue 9: timers, histograms and distributions sent over UDP become
/// statistics, a sample rate weighing each value as round(1/rate)
/// observations; malformed lines are counted by reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statsd_timers_become_weighted_statistics() {
    let (s, listener) = listening(Kind::SqliteFile).await;
    // 10 + 1 + 4 + 1 observations of the timer; the rest is malformed.
    listener
        .send(&[
            b"api.rt:20|ms|@0.1\napi.rt:5|ms\napi.rt:40|h|@0.25\napi.rt:-1.5|d|#env:prod\n\
              api.rt:x|ms\napi.rt:1|ms|@2\napi.rt:1|timer\n:1|ms\n",
        ])
        .await;
    taken(&s, 8, 4).await;
    let day = stat_days(&s, "api.rt", &[0.0, 1.0]).await;
    assert_eq!(day.len(), 1);
    let d = &day[0].summary;
    assert_eq!(d.count, 16);
    assert_eq!(d.sum, 20.0 * 10.0 + 5.0 + 40.0 * 4.0 - 1.5);
    assert_eq!((d.min, d.max), (Some(-1.5), Some(40.0)));
    let text = s.get("/metrics").await.text;
    assert_rejected(
        &text,
        &["bad_value", "bad_rate", "unknown_type", "bad_name"],
        1,
    );
    listener.stop().await;
}

/// Waits until the listener has taken `lines` lines in all, asserts that
/// `accepted` of them were accepted, and flushes `s`' writers.
async fn taken(s: &TestServer, lines: u64, accepted: u64) {
    let metrics = s.state.metrics();
    assert_lines_taken(metrics, lines);
    assert_eq!(metrics.statsd_accepted_total(), accepted);
    s.flush().await;
}

/// Asserts that the listener has taken `lines` lines, accepted or rejected.
fn assert_lines_taken(metrics: &Metrics, lines: u64) {
    let seen = tally_testkit::wait_until(tally_testkit::PATIENCE, || {
        metrics.statsd_accepted_total() + metrics.statsd_rejected_total() == lines
    });
    assert!(
        seen,
        "accepted {} rejected {}",
        metrics.statsd_accepted_total(),
        metrics.statsd_rejected_total()
    );
}

/// Asserts that `/metrics`' `text` counts `n` lines rejected for each reason.
fn assert_rejected(text: &str, reasons: &[&str], n: u64) {
    for reason in reasons {
        assert!(
            text.contains(&format!(
                "tally_statsd_lines_rejected_total{{reason=\"{reason}\"}} {n}\n"
            )),
            "{reason}: {text}"
        );
    }
}

/// The day slices of statistic `name`, with `quantiles`.
async fn stat_days(s: &TestServer, name: &str, quantiles: &[f64]) -> Vec<SliceSummary> {
    s.writers
        .stats
        .service()
        .get(name, 86_400, quantiles)
        .await
        .unwrap()
}

/// The names a list route answers (`/v1/counters`, `/v1/stats`, ...).
async fn listed(s: &TestServer, what: &str) -> Vec<String> {
    let page = s.get(&format!("/v1/{what}")).await.json();
    serde_json::from_value(page[what].clone()).unwrap_or_else(|e| panic!("{e}: {page}"))
}

/// Issue 21: a line's name ends at its first `:`, every sample after it is
/// written under that name (statsd's `hits:1|c:2|c`, DogStatsD's packed
/// `pk:1:2|h`), DogStatsD's container id and time fields are taken, tags
/// are dropped and counted, and a line is all or nothing: nothing lands
/// under any other name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_21_statsd_lines_write_only_under_their_name() {
    let s = server(Kind::SqliteFile, ServerSettings::default(), false).await;
    let now = s.f.clock.now().whole_secs();
    let metrics = s.state.metrics();
    let packet = format!(
        "pk:1:2|h\nhits:1|c:2|c\nct:1|c|c:abc123\nts:1|c|T{}\ntg:1|c|#env:prod\n\
         mix:4|c|@0.5:2|ms:3|g:ann|s|#k:v\n\
         part:1|c:2|ms:x|g\nold:1|c|T1000\nahead:1|c|T{}\nu:a:b|s\n\
         _sc|Redis connection|2|#env:dev|m:timed out\n_e{{5,4}}:title|text\n",
        now - 60,
        now + 3600,
    );
    tally::server::statsd::handle(packet.as_bytes(), &s.statsd, metrics);
    assert_eq!(metrics.statsd_accepted_total(), 6);
    assert_eq!(metrics.statsd_tags_dropped_total(), 2);
    s.flush().await;
    // Nothing was written under any other name.
    assert_eq!(
        listed(&s, "counters").await,
        ["ct", "hits", "mix", "tg", "ts"]
    );
    assert_eq!(listed(&s, "stats").await, ["mix", "pk"]);
    assert_eq!(listed(&s, "gauges").await, ["mix"]);
    assert_eq!(listed(&s, "sets").await, ["mix"]);
    for (name, total) in [("hits", 3), ("ct", 1), ("ts", 1), ("tg", 1), ("mix", 8)] {
        let days = s
            .get(&format!("/v1/counters/{name}?precision=86400"))
            .await
            .json();
        assert_eq!(day_total(&days), total, "{name}: {days}");
    }
    // `ts` went into the minute of its `T` time, a minute before now.
    let minutes = s.get("/v1/counters/ts?precision=60").await.json();
    assert_eq!(
        minutes["precisions"]["60"],
        json!([[now - 60, 1]]),
        "{minutes}"
    );
    let pk = stat_days(&s, "pk", &[]).await;
    assert_eq!((pk[0].summary.count, pk[0].summary.sum), (2, 3.0));
    assert_eq!(
        (pk[0].summary.min, pk[0].summary.max),
        (Some(1.0), Some(2.0))
    );
    let mix = stat_days(&s, "mix", &[]).await;
    assert_eq!((mix[0].summary.count, mix[0].summary.sum), (1, 2.0));
    assert_eq!(
        s.writers.gauges.service().current("mix").await.unwrap(),
        Some(3.0)
    );
    let members = s.get("/v1/sets/mix?precision=86400").await.json();
    assert_eq!(members["union"]["count"], 1, "{members}");
    let text = s.get("/metrics").await.text;
    assert_rejected(
        &text,
        &["bad_value", "time_not_kept", "event_or_service_check"],
        2,
    );
    assert!(
        text.contains("tally_statsd_tags_dropped_total 2\n"),
        "{text}"
    );
    // 2 (hits) + 1 + 1 + 1 + 1 (mix): counter samples, not lines.
    assert!(
        text.contains("tally_increments_accepted_total 6\n"),
        "{text}"
    );
}

/// Issue 9: gauge lines over UDP set (`5|g`) and adjust (`+3|g`, `-6|g`)
/// in the order sent; a negative value is set with `0|g` then `-5|g`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statsd_gauges_set_and_adjust_in_order() {
    let (s, listener) = listening(Kind::RedisDefault).await;
    listener
        .send(&[b"q:5|g\nq:+3|g\nq:-6|g|#env:prod\nq:x|g\n"])
        .await;
    taken(&s, 4, 3).await;
    let gauges = s.writers.gauges.service();
    let day = gauges.get("q", 86_400).await.unwrap();
    assert_eq!((day[0].last, day[0].min, day[0].max), (2.0, 2.0, 8.0));
    listener.send(&[b"q:0|g\nq:-5|g"]).await;
    taken(&s, 6, 5).await;
    let day = gauges.get("q", 86_400).await.unwrap();
    assert_eq!((day[0].last, day[0].min, day[0].max), (-5.0, -5.0, 8.0));
    assert_eq!(gauges.current("q").await.unwrap(), Some(-5.0));
    assert_eq!(s.state.metrics().statsd_rejected_total(), 1);
    listener.stop().await;
}

/// Issue 9: set lines over UDP (`users:ann|s`) count each member once per
/// slice and show up in `GET /v1/sets/{name}`; a member too long is
/// rejected as invalid and writes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statsd_sets_count_distinct_members() {
    let (s, listener) = listening(Kind::RedisDefault).await;
    let long = format!("users:{}|s", "x".repeat(256));
    let packet = format!("users:ann|s\nusers:bob|s|#env:prod\nusers:ann|s\n{long}\nusers:|s\n");
    listener.send(&[packet.as_bytes()]).await;
    taken(&s, 5, 3).await;
    let read = s.get("/v1/sets/users?precision=86400").await.json();
    assert_eq!(read["precisions"]["86400"][0]["count"], 2, "{read}");
    assert_eq!(read["union"]["count"], 2, "{read}");
    let text = s.get("/metrics").await.text;
    assert_rejected(&text, &["invalid", "bad_value"], 1);
    assert!(!text.contains("unsupported"), "{text}");
    listener.stop().await;
}

/// The issue's loss: a burst larger than the socket's receive buffer is
/// dropped by the kernel, and `/metrics` must show it. Datagrams sent before
/// the listener runs queue in a tiny buffer; the rest are dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statsd_kernel_drops_show_in_metrics() {
    let s = server(Kind::SqliteFile, ServerSettings::default(), false).await;
    let (socket, buffer) = tally::server::udp::bind("127.0.0.1:0".parse().unwrap(), 4096).unwrap();
    assert_eq!(buffer.requested, 4096);
    let addr = socket.local_addr().unwrap();
    let client = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let sent = 500u64;
    for _ in 0..sent {
        client.send_to(b"flood:1|c", addr).unwrap();
    }
    let metrics = s.state.metrics().clone();
    let listener = Listener::on(socket, &s).await;
    // Each datagram was queued or dropped by the kernel: wait until the
    // listener has drained and handled what was queued (not until the count
    // merely stood still for a while, which a stalled listener also does).
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let (received, drops) = loop {
        let received = metrics.statsd_datagrams_total();
        let drops = metrics.statsd_kernel_drops().await;
        let drained = drops.is_some_and(|d| received + d == sent)
            && metrics.statsd_accepted_total() == received;
        if drained || std::time::Instant::now() > deadline {
            break (received, drops.expect("a drop counter"));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert!(
        received > 0 && drops > 0,
        "received {received}, dropped {drops}"
    );
    assert_eq!(drops, sent - received, "received {received} of {sent}");
    assert_eq!(metrics.statsd_accepted_total(), received);
    let a = s.get("/metrics").await;
    openmetrics_parser::prometheus::parse_prometheus(&a.text)
        .unwrap_or_else(|e| panic!("invalid exposition text ({e:?}):\n{}", a.text));
    assert!(
        a.text
            .contains(&format!("tally_statsd_kernel_drops_total {drops}\n")),
        "{}",
        a.text
    );
    assert!(
        a.text.contains(&format!(
            "tally_statsd_datagrams_received_total {received}\n"
        )),
        "{}",
        a.text
    );
    assert!(
        a.text.contains(&format!(
            "tally_statsd_receive_buffer_bytes {}\n",
            buffer.effective
        )),
        "{}",
        a.text
    );
    listener.stop().await;
}
