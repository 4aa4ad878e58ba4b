//! `tally serve` end to end, as a user drives it: the real binary on free
//! ports, fed with `curl`, with statsd packets sent by `nc -u` (issue 21's
//! among them) and with carbon lines sent by `nc`, refusing an
//! unauthenticated write, flushing what it holds on SIGTERM (every line of
//! a carbon connection closed before it included), and taking its statsd
//! receive buffer from the flag, the config file or the default.

use crate::support;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use support::{Serve, settings_file};

fn tool(name: &str) -> String {
    tally_testkit::require_binary(
        name,
        &[],
        &format!(
            "Install it with `sudo apt-get install {}`",
            if name == "nc" { "netcat-openbsd" } else { name }
        ),
    )
    .to_string_lossy()
    .into_owned()
}

/// Starts `tally serve` on the SQLite store in `dir`, with statsd on
/// `statsd` and a 50 ms flush interval unless `extra` sets one.
fn serve(dir: &Path, statsd: Option<u16>, extra: &[&str]) -> Serve {
    let mut args: Vec<String> = extra.iter().map(|a| a.to_string()).collect();
    if !extra.contains(&"--flush-interval-ms") {
        args.extend(["--flush-interval-ms".into(), "50".into()]);
    }
    if let Some(statsd) = statsd {
        args.extend(["--statsd".into(), format!("127.0.0.1:{statsd}")]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    support::serve(&["--data-dir", dir.to_str().unwrap()], &args)
}

fn curl(args: &[&str]) -> (u16, String) {
    let out: Output = Command::new(tool("curl"))
        .args(["-s", "-w", "\n%{http_code}"])
        .args(args)
        .output()
        .expect("run curl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (code.trim().parse().unwrap_or(0), body.to_owned())
}

/// `curl -X POST` of the JSON `body` to `url`: the status and the body.
fn post_json(url: &str, body: &str) -> (u16, String) {
    curl(&[
        "-X",
        "POST",
        "-H",
        "Content-Type: application/json",
        "-d",
        body,
        url,
    ])
}

/// Sends `payload` as one datagram with `nc -u WAIT 127.0.0.1 PORT`, its
/// standard input a file holding the payload: with `-w0`, nc gives up as
/// soon as a poll of its input finds nothing to read, so a pipe written
/// after nc starts can lose the race on a loaded machine (nothing is sent).
fn nc_udp(wait: &str, port: u16, payload: &[u8]) {
    let mut file = tempfile::tempfile().unwrap();
    std::io::Write::write_all(&mut file, payload).unwrap();
    std::io::Seek::rewind(&mut file).unwrap();
    let status = Command::new(tool("nc"))
        .args(["-u", wait, "127.0.0.1", &port.to_string()])
        .stdin(Stdio::from(file))
        .status()
        .expect("run nc");
    assert!(status.success(), "nc: {status}");
}

fn day_total(base: &str, name: &str) -> i64 {
    let (code, body) = curl(&[&format!("{base}/v1/counters/{name}?precision=86400")]);
    assert_eq!(code, 200, "{body}");
    support::day_sum(&body)
}

#[test]
fn curl_and_nc_feed_a_counter_that_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let statsd = tally_testkit::free_port();
    let s = serve(dir.path(), Some(statsd), &[]);
    let (code, body) = curl(&["-X", "POST", &format!("{}/v1/counters/e2e/incr", s.base)]);
    assert_eq!((code, body.as_str()), (202, r#"{"accepted":1}"#));
    let (code, _) = post_json(
        &format!("{}/v1/counters/e2e/incr", s.base),
        r#"{"count": 4}"#,
    );
    assert_eq!(code, 202);
    nc_udp(
        "-w1",
        statsd,
        b"e2e:10|c\ne2e:1|zz\ne2e.depth:5|g\ne2e.depth:-2|g\n\
          e2e.lat:10|ms\ne2e.lat:20|ms\ne2e.lat:30|ms|@0.5\n\
          e2e.users:ann|s\ne2e.users:bob|s\ne2e.users:ann|s\n",
    );
    let deadline = Instant::now() + tally_testkit::PATIENCE;
    while day_total(&s.base, "e2e") != 15 {
        assert!(
            Instant::now() < deadline,
            "e2e never reached 15: {}",
            day_total(&s.base, "e2e")
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // The gauge lines: set to 5, then adjusted down by 2.
    let gauge = || {
        let (code, body) = curl(&[&format!("{}/v1/gauges/e2e.depth?precision=60", s.base)]);
        assert_eq!(code, 200, "{body}");
        serde_json::from_str::<serde_json::Value>(&body).unwrap()
    };
    while gauge()["current"] != 3.0 {
        assert!(Instant::now() < deadline, "e2e.depth: {}", gauge());
        std::thread::sleep(Duration::from_millis(50));
    }
    let minute = &gauge()["precisions"]["60"][0];
    assert_eq!((&minute["min"], &minute["max"]), (&3.0.into(), &5.0.into()));
    // The timer lines: statistics (30 at a rate of 0.5 weighs 2).
    let lat = || {
        let (code, body) = curl(&[&format!("{}/v1/stats/e2e.lat?precision=86400", s.base)]);
        (
            code,
            serde_json::from_str::<serde_json::Value>(&body).unwrap_or_default(),
        )
    };
    while lat().1["precisions"]["86400"][0]["count"] != 4 {
        assert!(Instant::now() < deadline, "e2e.lat: {:?}", lat());
        std::thread::sleep(Duration::from_millis(50));
    }
    let day = &lat().1["precisions"]["86400"][0];
    assert_eq!(
        (&day["sum"], &day["min"], &day["max"]),
        (&90.0.into(), &10.0.into(), &30.0.into())
    );
    // The set lines: two distinct members.
    let users = || {
        let (code, body) = curl(&[&format!("{}/v1/sets/e2e.users", s.base)]);
        (
            code,
            serde_json::from_str::<serde_json::Value>(&body).unwrap_or_default(),
        )
    };
    while users().1["union"]["count"] != 2 {
        assert!(Instant::now() < deadline, "e2e.users: {:?}", users());
        std::thread::sleep(Duration::from_millis(50));
    }
    let (code, metrics) = curl(&[&format!("{}/metrics", s.base)]);
    assert_eq!(code, 200);
    assert!(
        metrics.contains("tally_statsd_lines_accepted_total 9\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("tally_statsd_lines_rejected_total{reason=\"unknown_type\"} 1\n"),
        "{metrics}"
    );
    let (code, page) = curl(&[&format!("{}/", s.base)]);
    assert_eq!(code, 200);
    assert!(page.contains("<html"), "{page}");
}

/// Sends `tally serve` SIGTERM and waits until it has exited cleanly.
fn terminate(s: &mut Serve) {
    support::terminate(&mut s.child, "tally serve");
}

/// A `/metrics` figure without labels (`0` when absent).
fn metric(base: &str, name: &str) -> u64 {
    let (code, text) = curl(&[&format!("{base}/metrics")]);
    assert_eq!(code, 200, "{text}");
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .map_or(0, |v| v.parse().unwrap())
}

/// A JSON answer of `tally serve`.
fn json(base: &str, path: &str) -> serde_json::Value {
    let (code, body) = curl(&[&format!("{base}{path}")]);
    assert_eq!(code, 200, "{path}: {body}");
    serde_json::from_str(&body).unwrap()
}

/// Issue 21's "done when", as a user runs it: the packet the issue sends
/// with `nc -u` writes `pk` two observations, `hits` 3, `ct` 1, `ts` 1 in
/// the minute of its `T` time, `tg` 1 with one dropped-tags count, and no
/// other name. The writers flush only at SIGTERM; a second server on the
/// same data directory reads what was written.
#[test]
fn issue_21_statsd_lines_land_under_their_own_name() {
    let dir = tempfile::tempdir().unwrap();
    let statsd = tally_testkit::free_port();
    let mut s = serve(dir.path(), Some(statsd), &["--flush-interval-ms", "60000"]);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let ts = now - 60;
    nc_udp(
        "-w0",
        statsd,
        format!("pk:1:2|h\nhits:1|c:2|c\nct:1|c|c:abc123\nts:1|c|T{ts}\ntg:1|c|#env:prod\n")
            .as_bytes(),
    );
    // The listener took all five lines (UDP: wait for them to arrive).
    assert!(
        tally_testkit::wait_until(tally_testkit::PATIENCE, || {
            metric(&s.base, "tally_statsd_lines_accepted_total") == 5
        }),
        "accepted {}",
        metric(&s.base, "tally_statsd_lines_accepted_total")
    );
    let (_, text) = curl(&[&format!("{}/metrics", s.base)]);
    assert!(
        text.contains("tally_statsd_tags_dropped_total 1\n"),
        "{text}"
    );
    assert!(
        !text.contains("tally_statsd_lines_rejected_total{"),
        "{text}"
    );
    // SIGTERM flushes every writer before the server exits.
    terminate(&mut s);

    let r = serve(dir.path(), None, &[]);
    // Every name written, but the server's own request counters.
    let names = |what: &str| -> Vec<String> {
        let page = json(&r.base, &format!("/v1/{what}"));
        serde_json::from_value::<Vec<String>>(page[what].clone())
            .unwrap()
            .into_iter()
            .filter(|n| !n.starts_with("tally:http:"))
            .collect()
    };
    assert_eq!(names("counters"), ["ct", "hits", "tg", "ts"]);
    assert_eq!(names("stats"), ["pk"]);
    assert!(names("gauges").is_empty());
    assert!(names("sets").is_empty());
    for (name, total) in [("hits", 3), ("ct", 1), ("ts", 1), ("tg", 1)] {
        assert_eq!(day_total(&r.base, name), total, "{name}");
    }
    let minute = json(&r.base, "/v1/counters/ts?precision=60");
    assert_eq!(
        minute["precisions"]["60"],
        serde_json::json!([[ts / 60 * 60, 1]]),
        "{minute}"
    );
    let pk = json(&r.base, "/v1/stats/pk?precision=86400");
    let day = &pk["precisions"]["86400"][0];
    assert_eq!(
        (&day["count"], &day["sum"], &day["min"], &day["max"]),
        (&2.into(), &3.0.into(), &1.0.into(), &2.0.into()),
        "{pk}"
    );
}

#[test]
fn a_token_server_refuses_unauthenticated_writes() {
    let dir = tempfile::tempdir().unwrap();
    let s = serve(
        dir.path(),
        None,
        &["--token", "correct-horse", "--write-mode", "exact"],
    );
    let url = format!("{}/v1/counters/guarded/incr", s.base);
    let incr_as = |token: &str| {
        let auth = format!("Authorization: Bearer {token}");
        curl(&["-X", "POST", "-H", &auth, &url]).0
    };
    let (code, body) = curl(&["-X", "POST", &url]);
    assert_eq!(code, 401, "{body}");
    assert!(body.contains(r#""code":"unauthorized""#), "{body}");
    assert_eq!(incr_as("wrong-horse"), 401);
    assert_eq!(day_total(&s.base, "guarded"), 0);
    let (code, list) = curl(&[&format!("{}/v1/counters?prefix=guarded", s.base)]);
    assert_eq!(
        (code, list.as_str()),
        (200, r#"{"counters":[],"next":null}"#)
    );
    assert_eq!(incr_as("correct-horse"), 200);
    assert_eq!(day_total(&s.base, "guarded"), 1);
}

#[test]
fn sigterm_flushes_what_was_accepted() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = serve(dir.path(), None, &["--flush-interval-ms", "60000"]);
    let body = r#"{"increments": [{"name": "late", "count": 7}, {"name": "late"}]}"#;
    let (code, _) = post_json(&format!("{}/v1/incr", s.base), body);
    assert_eq!(code, 202);
    // The flush interval is a minute: only the shutdown flush can write it.
    terminate(&mut s);
    let out = Command::new(env!("CARGO_BIN_EXE_tally"))
        .arg("--data-dir")
        .arg(dir.path())
        .args(["get", "late", "--precision", "86400", "--json"])
        .output()
        .unwrap();
    let samples: Vec<(u64, i64)> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(samples.iter().map(|s| s.1).sum::<i64>(), 8, "{samples:?}");
}

/// Runs `tally --data-dir DIR serve --listen 127.0.0.1:0 ARGS`, which must
/// refuse to start; its stderr.
fn refused_at_start(dir: &Path, args: &[&str]) -> String {
    let out = support::tally()
        .arg("--data-dir")
        .arg(dir)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .args(args)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{stderr}");
    stderr
}

/// The statsd socket's receive buffer as `/metrics` shows it.
fn recv_buffer_gauge(base: &str) -> u64 {
    let (code, text) = curl(&[&format!("{base}/metrics")]);
    assert_eq!(code, 200, "{text}");
    text.lines()
        .find_map(|l| l.strip_prefix("tally_statsd_receive_buffer_bytes "))
        .unwrap_or_else(|| panic!("no receive buffer gauge in {text}"))
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn the_statsd_receive_buffer_comes_from_the_flag_the_file_or_the_default() {
    let dir = tempfile::tempdir().unwrap();
    let config = settings_file(dir.path(), "statsd_recv_buffer = 65536\n");
    let config_flag = config.to_str().unwrap();
    // Linux reports twice the size it was given (its bookkeeping half).
    let from_file = serve(
        dir.path(),
        Some(tally_testkit::free_port()),
        &["--config", config_flag],
    );
    assert_eq!(recv_buffer_gauge(&from_file.base), 2 * 65536);
    drop(from_file);
    let from_flag = serve(
        dir.path(),
        Some(tally_testkit::free_port()),
        &["--config", config_flag, "--statsd-recv-buffer", "32768"],
    );
    assert_eq!(recv_buffer_gauge(&from_flag.base), 2 * 32768);
    drop(from_flag);
    // The default (8 MiB) takes what the kernel allows: all of it with
    // CAP_NET_ADMIN, else up to net.core.rmem_max.
    let rmem_max: u64 = std::fs::read_to_string("/proc/sys/net/core/rmem_max")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let default = serve(dir.path(), Some(tally_testkit::free_port()), &[]);
    assert!(recv_buffer_gauge(&default.base) >= 2 * rmem_max.min(8 << 20));
    drop(default);
    // A size out of range is refused at start, from the flag or the file.
    std::fs::write(&config, "statsd_recv_buffer = 10\n").unwrap();
    for extra in [
        &["--statsd-recv-buffer", "100"][..],
        &["--config", config_flag][..],
    ] {
        let stderr = refused_at_start(dir.path(), &[&["--statsd", "127.0.0.1:0"], extra].concat());
        assert!(
            stderr.contains("statsd-recv-buffer must be 4096 to 1073741824 bytes, got 1"),
            "{stderr}"
        );
    }
}

/// Without CAP_NET_ADMIN the kernel caps the buffer at net.core.rmem_max:
/// the server says so at start, naming the cap and the command that raises
/// it (as root, the test drops the capability with `setpriv`).
#[test]
fn a_capped_statsd_receive_buffer_is_warned_about() {
    let rmem_max: usize = std::fs::read_to_string("/proc/sys/net/core/rmem_max")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let asked = (2 * rmem_max).min(1 << 30);
    assert!(
        asked > rmem_max,
        "rmem_max {rmem_max} is already the largest buffer"
    );
    let root = std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"));
    let mut cmd = if root {
        let mut c = Command::new(tool("setpriv"));
        c.args(["--bounding-set", "-net_admin"])
            .arg(env!("CARGO_BIN_EXE_tally"));
        c
    } else {
        Command::new(env!("CARGO_BIN_EXE_tally"))
    };
    let dir = tempfile::tempdir().unwrap();
    let port = tally_testkit::free_port();
    let mut child = cmd
        .env("RUST_LOG", "warn")
        .arg("--data-dir")
        .arg(dir.path())
        .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
        .args(["--statsd", "127.0.0.1:0"])
        .args(["--statsd-recv-buffer", &asked.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let mut s = Serve {
        child,
        base: format!("http://127.0.0.1:{port}"),
    };
    assert!(line.contains("serving on"), "{line:?}");
    assert_eq!(recv_buffer_gauge(&s.base) as usize, 2 * rmem_max);
    s.child.kill().unwrap();
    s.child.wait().unwrap();
    let mut out = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut out).unwrap();
    assert!(
        out.contains(&format!(
            "asked for {asked} bytes, the kernel gave {rmem_max} (net.core.rmem_max = {rmem_max})"
        )) && out.contains(&format!("sysctl -w net.core.rmem_max={asked}")),
        "{out}"
    );
}

/// Runs `script` with `sh -c` (a pipeline into `nc`, as the README shows).
fn sh(script: &str) {
    tool("nc");
    let status = Command::new("sh").args(["-c", script]).status().unwrap();
    assert!(status.success(), "{script}: {status}");
}

/// `GET /v1/gauges/{name}`: its `current` value (`null` for a gauge with
/// nothing written).
fn gauge_now(base: &str, name: &str) -> serde_json::Value {
    let (code, body) = curl(&[&format!("{base}/v1/gauges/{name}")]);
    assert_eq!(code, 200, "{body}");
    serde_json::from_str::<serde_json::Value>(&body).unwrap()["current"].clone()
}

/// Polls `GET /v1/gauges/{name}` until its current value is `value`.
fn wait_for_gauge(base: &str, name: &str, value: f64) {
    let deadline = Instant::now() + tally_testkit::PATIENCE;
    while gauge_now(base, name) != value {
        assert!(
            Instant::now() < deadline,
            "{name} never read {value}: {}",
            gauge_now(base, name)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn carbon_lines_from_nc_set_gauges_and_bad_ones_are_counted() {
    let dir = tempfile::tempdir().unwrap();
    let port = tally_testkit::free_port();
    let s = serve(
        dir.path(),
        None,
        &["--carbon", &format!("127.0.0.1:{port}")],
    );
    sh(&format!(
        "printf \"app.load 0.5 $(date +%s)\\n\" | nc -q1 127.0.0.1 {port}"
    ));
    wait_for_gauge(&s.base, "app.load", 0.5);
    // Grafana's view of it: the Graphite API renders the gauge's point.
    let (code, body) = curl(&[&format!(
        "{}/graphite/render?target=app.load&from=-1min&format=json",
        s.base
    )]);
    assert_eq!(code, 200, "{body}");
    let render: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(render[0]["target"], "app.load", "{body}");
    let values: Vec<&serde_json::Value> = render[0]["datapoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| &p[0])
        .filter(|v| !v.is_null())
        .collect();
    assert_eq!(values, [&serde_json::json!(0.5)], "{body}");
    // Bad lines write nothing; the good line after them, on the same
    // connection, is taken after them: once it reads back, they are done.
    sh(&format!(
        "printf \"app.bad nan $(date +%s)\\napp.bad 1 0\\napp.bad\\napp.after 1 $(date +%s)\\n\" \
         | nc -q1 127.0.0.1 {port}"
    ));
    wait_for_gauge(&s.base, "app.after", 1.0);
    assert_eq!(gauge_now(&s.base, "app.bad"), serde_json::Value::Null);
    // UDP on the same address. `-q1`, not `-w1`: nc waits for its input
    // however late the pipe's writer runs (with `-w1` it gives up after 1 s
    // of nothing to read, and a loaded machine can stall `printf` that long).
    sh(&format!(
        "printf \"app.udp 2 $(date +%s)\\n\" | nc -u -q1 127.0.0.1 {port}"
    ));
    wait_for_gauge(&s.base, "app.udp", 2.0);
    let (code, metrics) = curl(&[&format!("{}/metrics", s.base)]);
    assert_eq!(code, 200);
    for line in [
        "tally_carbon_lines_accepted_total 3\n",
        "tally_carbon_lines_rejected_total{reason=\"not_finite\"} 1\n",
        "tally_carbon_lines_rejected_total{reason=\"time_not_kept\"} 1\n",
        "tally_carbon_lines_rejected_total{reason=\"malformed\"} 1\n",
        "tally_carbon_datagrams_received_total 1\n",
    ] {
        assert!(metrics.contains(line), "no {line:?} in {metrics}");
    }
    // A limit out of range is refused at start, naming it.
    let stderr = refused_at_start(
        dir.path(),
        &["--carbon", "127.0.0.1:0", "--carbon-max-line", "10"],
    );
    assert!(
        stderr.contains("carbon-max-line must be 64 to 1048576 bytes, got 10"),
        "{stderr}"
    );
}

#[test]
fn sigterm_writes_every_line_of_a_carbon_connection_closed_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let port = tally_testkit::free_port();
    // The address from the config file; a flush interval of a minute: only
    // the shutdown's flush can write the lines.
    let config = settings_file(dir.path(), &format!("carbon = \"127.0.0.1:{port}\"\n"));
    let mut s = serve(
        dir.path(),
        None,
        &[
            "--config",
            config.to_str().unwrap(),
            "--flush-interval-ms",
            "60000",
        ],
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let lines: String = (0..20_000)
        .map(|i| format!("sig.{} {i} {now}\n", i % 50))
        .collect();
    let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    std::io::Write::write_all(&mut c, lines.as_bytes()).unwrap();
    drop(c);
    terminate(&mut s);
    drop(s);
    // Read back by a new server on the same SQLite data directory.
    let again = serve(dir.path(), None, &[]);
    for k in [0, 17, 49] {
        assert_eq!(
            gauge_now(&again.base, &format!("sig.{k}")),
            f64::from(19_950 + k),
            "sig.{k}"
        );
    }
}
