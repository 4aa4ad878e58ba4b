//! The dashboard end to end, in a real browser: `tally serve` on a free
//! port with its own data directory, fed known data over HTTP (`curl` among
//! others: counters, observations of statistics, a time series, a daily
//! entity) and a statsd packet (`nc -u`), checked through the JSON API,
//! then driven in headless
//! Chromium by `dashboard/e2e/dashboard.mjs` (Playwright), which checks that
//! the charts show exactly that data and saves screenshots under the target
//! directory (`$CARGO_TARGET_DIR`, else `target/`).
//!
//! Needs Debian's `chromium`, `curl`, `nc`, `node` and `npm ci` run in
//! `dashboard/` (`scripts/test` sees to all of them). A missing piece fails the test with
//! the command that installs it; nothing is skipped.

use crate::support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

const DAY: u64 = 86_400;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Where screenshots go: the target directory of this build.
fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => repo().join(dir),
        None => repo().join("target"),
    }
}

fn chromium() -> PathBuf {
    let path = std::env::var_os("TALLY_CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"));
    assert!(
        path.is_file(),
        "Chromium is not at {} (set TALLY_CHROMIUM to use another). Install it with \
         `apt-get install chromium` (scripts/test installs it on Debian).",
        path.display()
    );
    path
}

/// Checks node and the dashboard's node modules are there.
fn node_ready() {
    let node = Command::new("node").arg("--version").output();
    assert!(
        node.is_ok_and(|o| o.status.success()),
        "`node` is not on PATH: install Node.js 20 or later (`apt-get install nodejs npm`)."
    );
    assert!(
        repo()
            .join("dashboard/node_modules/playwright-core/package.json")
            .is_file(),
        "dashboard/node_modules is missing: run `npm ci` in dashboard/ (scripts/test does)."
    );
}

/// A command-line tool the test drives as a user would (`curl`, `nc`).
fn tool(name: &str) -> PathBuf {
    let package = if name == "nc" { "netcat-openbsd" } else { name };
    tally_testkit::require_binary(
        name,
        &[],
        &format!("Install it with `apt-get install {package}`"),
    )
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs()
}

/// `tally serve` on a free port, killed on drop.
struct Server {
    child: Child,
    addr: SocketAddr,
    statsd: Option<SocketAddr>,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Server {
    fn start(extra: &[&str], with_statsd: bool) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("serve.log");
        let statsd = with_statsd.then(|| {
            // A free UDP port (closed again before the server binds it).
            let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
            socket.local_addr().unwrap()
        });
        let mut cmd = support::tally();
        for (var, _) in std::env::vars_os() {
            if var.to_string_lossy().starts_with("TALLY_") {
                cmd.env_remove(var);
            }
        }
        cmd.arg("--data-dir")
            .arg(dir.path().join("data"))
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--flush-interval-ms",
                "50",
            ])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap());
        if let Some(addr) = statsd {
            cmd.arg("--statsd").arg(addr.to_string());
        }
        let mut child = cmd.spawn().expect("start tally serve");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(rest) = line.strip_prefix("tally: serving on http://") {
                    let addr = rest.split('/').next().unwrap_or_default().to_owned();
                    let _ = tx.send(addr);
                }
            }
        });
        let addr = match rx.recv_timeout(tally_testkit::PATIENCE) {
            Ok(addr) => addr.parse().expect("listen address"),
            Err(_) => {
                let _ = child.kill();
                panic!(
                    "tally serve did not start: {}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                );
            }
        };
        Server {
            child,
            addr,
            statsd,
            log,
            _dir: dir,
        }
    }

    fn base(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// One HTTP/1.1 request; returns the status and the JSON body.
    fn http(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> (u16, Value) {
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        let auth = token
            .map(|t| format!("Authorization: Bearer {t}\r\n"))
            .unwrap_or_default();
        let mut stream = TcpStream::connect(self.addr).expect("connect to tally serve");
        stream
            .set_read_timeout(Some(tally_testkit::PATIENCE))
            .unwrap();
        write!(
            stream,
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n{auth}\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            self.addr,
            body.len()
        )
        .unwrap();
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).expect("read the answer");
        let raw = String::from_utf8(raw).expect("UTF-8 answer");
        let (head, rest) = raw.split_once("\r\n\r\n").expect("an HTTP answer");
        let status = head
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .expect("a status");
        let chunked = head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked");
        let text = if chunked {
            dechunk(rest)
        } else {
            rest.to_owned()
        };
        let json = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{method} {path}: not JSON ({e}): {text}"));
        (status, json)
    }

    /// `GET path`, asserting 200.
    fn get(&self, path: &str, token: Option<&str>) -> Value {
        let (status, body) = self.http("GET", path, token, None);
        assert_eq!(status, 200, "GET {path}: {body}");
        body
    }

    /// `POST path body`, asserting a 2xx.
    fn post(&self, path: &str, token: Option<&str>, body: Value) {
        let (status, answer) = self.http("POST", path, token, Some(body));
        assert!(
            (200..300).contains(&status),
            "POST {path}: {status} {answer}"
        );
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    loop {
        let (size, rest) = s.split_once("\r\n").expect("chunk size");
        let size = usize::from_str_radix(size.trim(), 16).expect("hex chunk size");
        if size == 0 {
            return out;
        }
        out.push_str(&rest[..size]);
        s = &rest[size + 2..];
    }
}

/// Polls `f` until it returns `Ok`, for up to [`tally_testkit::PATIENCE`];
/// fails with the last `Err` (what was seen instead).
fn eventually<T>(what: &str, mut f: impl FnMut() -> Result<T, String>) -> T {
    let deadline = Instant::now() + tally_testkit::PATIENCE;
    loop {
        match f() {
            Ok(v) => return v,
            Err(seen) if Instant::now() > deadline => {
                panic!("timed out waiting for {what}; last seen: {seen}")
            }
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// Runs the browser script on `spec`; fails with its output and the
/// server's log unless every check passed.
fn run_browser(server: &Server, mut spec: Value) {
    let out_dir = target_dir();
    std::fs::create_dir_all(&out_dir).unwrap();
    spec["base"] = json!(server.base());
    spec["chromium"] = json!(chromium());
    spec["out_dir"] = json!(out_dir);
    let dir = tempfile::tempdir().unwrap();
    let spec_path = dir.path().join("spec.json");
    std::fs::write(&spec_path, spec.to_string()).unwrap();
    let mut child = Command::new("node")
        .arg("e2e/dashboard.mjs")
        .arg(&spec_path)
        .current_dir(repo().join("dashboard"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run node");
    let (mut stdout, mut stderr) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let (out, err) = (out.join().unwrap(), err.join().unwrap());
    println!("{out}{err}");
    assert!(
        status.is_some_and(|s| s.success()),
        "the browser check failed ({}):\n{out}{err}\n--- tally serve log ---\n{}",
        status.map_or("timed out after 120 s".to_owned(), |s| s.to_string()),
        server.log()
    );
}

fn sum(samples: &Value) -> i64 {
    samples
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s[1].as_i64().unwrap())
        .sum()
}

/// The observations of a statistic's slices.
fn stat_count(slices: &Value) -> i64 {
    slices.as_array().map_or(0, |slices| {
        slices.iter().map(|s| s["count"].as_i64().unwrap()).sum()
    })
}

fn count_at(samples: &Value, start: u64) -> i64 {
    samples
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s[0].as_u64() == Some(start))
        .map_or(0, |s| s[1].as_i64().unwrap())
}

/// Counters fed through HTTP and statsd, statistics, a time series and a
/// daily entity show on the dashboard's charts exactly as the API holds
/// them.
#[test]
fn dashboard_charts_show_the_fed_data() {
    chromium();
    node_ready();
    // Today's count moves when the UTC day turns: a run midnight fell in
    // runs again (waiting for midnight instead, as this test did, could
    // outlast the 3 minutes nextest gives a test).
    tally_testkit::on_one_day(charts_show_the_fed_data);
}

/// One run of [`dashboard_charts_show_the_fed_data`], on a server of its own.
fn charts_show_the_fed_data() {
    let server = Server::start(&[], true);
    let t = now();
    let t0 = t - 20;

    // Counters: increments at known times, one with `curl` as a user would,
    // a statsd packet sent with `nc -u` (counted now), and neighbours the
    // search must tell apart.
    let checkout = "shop.checkout";
    let curl = Command::new(tool("curl"))
        .args(["-sS", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST"])
        .args(["-H", "Content-Type: application/json", "-d"])
        .arg(json!({"count": 7, "at": t0 as f64 + 0.5}).to_string())
        .arg(format!("{}v1/counters/{checkout}/incr", server.base()))
        .output()
        .expect("run curl");
    assert_eq!(String::from_utf8_lossy(&curl.stdout), "202", "{curl:?}");
    server.post(
        &format!("/v1/counters/{checkout}/incr"),
        None,
        json!({"count": 3, "at": t0 - 7}),
    );
    let statsd = server.statsd.unwrap();
    // `-q1`, not `-w1`: nc waits for its input however late this process
    // writes it (with `-w1` it gives up after 1 s of nothing to read, and
    // a loaded machine can stall the write that long: nothing is sent).
    let mut nc = Command::new(tool("nc"))
        .args(["-u", "-q1", "127.0.0.1", &statsd.port().to_string()])
        .stdin(Stdio::piped())
        .spawn()
        .expect("run nc");
    nc.stdin
        .take()
        .unwrap()
        .write_all(format!("{checkout}:5|c\n").as_bytes())
        .unwrap();
    assert!(nc.wait().unwrap().success(), "nc -u failed");
    server.post("/v1/counters/shop.cart/incr", None, json!({"count": 1}));
    server.post("/v1/counters/api.hits/incr", None, json!({"count": 2}));

    // Time series and daily statistics.
    let ts_at = [
        ("home", t - 120, 5),
        ("home", t - 1500, 2),
        ("about", t - 300, 4),
    ];
    for (key, at, count) in ts_at {
        server.post(
            "/v1/ts/pages/incr",
            None,
            json!({"key": key, "count": count, "at": at}),
        );
    }
    server.post(
        "/v1/daily/ad:42/incr",
        None,
        json!({"count": 4, "at": t - 2 * DAY}),
    );
    server.post("/v1/daily/ad:42/incr", None, json!({"count": 3, "at": t}));

    // Statistics: three stats under "api:" whose ranking by p99 differs
    // from that by mean (outliers), one slice whose p50, p90 and p99 differ,
    // and a stat outside the prefix.
    let mut observations = Vec::new();
    let mut observe = |name: &str, value: f64, at: u64, n: usize| {
        observations.extend((0..n).map(|_| json!({"name": name, "value": value, "at": at})));
    };
    observe("api:search", 10.0, t0, 10);
    observe("api:search", 50.0, t0, 8);
    observe("api:search", 300.0, t0, 2);
    observe("api:search", 15.0, t0 - 7, 4);
    observe("api:login", 40.0, t0 + 5, 20);
    observe("api:upload", 120.0, t0 + 10, 20);
    observe("shop:pay", 900.0, t0, 1);
    server.post("/v1/record", None, json!({ "observations": observations }));

    // The API holds exactly what was sent (aggregated writes land within a
    // flush interval).
    let counter = eventually("the counter's increments to be written", || {
        let c = server.get(&format!("/v1/counters/{checkout}"), None);
        let precisions = c["precisions"].as_object().unwrap();
        if precisions.values().all(|s| sum(s) == 15) {
            Ok(c)
        } else {
            Err(c.to_string())
        }
    });
    assert_eq!(counter["samples_kept"], 120);
    let precisions = counter["precisions"].as_object().unwrap();
    assert_eq!(precisions.len(), 7, "{counter}");
    let second = &precisions["1"];
    assert_eq!(count_at(second, t0), 7, "{second}");
    assert_eq!(count_at(second, t0 - 7), 3, "{second}");
    for (p, samples) in precisions {
        let p: u64 = p.parse().unwrap();
        assert!(
            count_at(samples, t0 / p * p) >= 7,
            "precision {p}: {samples}"
        );
    }
    let listed = eventually("shop.cart to be listed", || {
        let l = server.get("/v1/counters?prefix=shop.", None);
        if l["counters"].as_array().unwrap().len() == 2 {
            Ok(l)
        } else {
            Err(l.to_string())
        }
    });
    assert_eq!(listed["counters"], json!(["shop.cart", checkout]));

    // The page's "last 1 h": it starts 36 s short of a full hour, so the
    // server's 10 s rollup (kept exactly 1 h) covers it (lib.js rangeStart).
    let range = server.get(
        &format!(
            "/v1/ts/pages/range?keys=home,about&start={}&end={t}",
            t - 3600 + 36
        ),
        None,
    );
    let series = range["series"].as_array().unwrap();
    let mut points = serde_json::Map::new();
    let mut totals = serde_json::Map::new();
    for s in series {
        let key = s["key"].as_str().unwrap();
        points.insert(key.into(), s["points"].clone());
        totals.insert(key.into(), json!(sum(&s["points"])));
    }
    assert_eq!(json!(totals), json!({"home": 7, "about": 4}), "{range}");
    let rollup = range["rollup"].as_u64().unwrap();
    assert_eq!(rollup, 10, "{range}");
    assert_eq!(count_at(&points["home"], (t - 120) / rollup * rollup), 5);

    eventually("the observations to be written", || {
        let all = ["api:search", "api:login", "api:upload", "shop:pay"]
            .map(|name| server.http("GET", &format!("/v1/stats/{name}"), None, None));
        let counts: Vec<i64> = all
            .iter()
            .map(|(_, s)| stat_count(&s["precisions"]["86400"]))
            .collect();
        if counts == [24, 20, 20, 1] {
            Ok(())
        } else {
            Err(format!("{counts:?}"))
        }
    });
    let search = server.get("/v1/stats/api:search?quantiles=0.5,0.9,0.99", None);
    let stat_precisions = search["precisions"].as_object().unwrap();
    assert_eq!(stat_precisions.len(), 7, "{search}");
    for (p, slices) in stat_precisions {
        assert_eq!(stat_count(slices), 24, "precision {p}: {slices}");
    }
    let second = search["precisions"]["1"].as_array().unwrap();
    assert_eq!(second.len(), 2, "{search}");
    assert_eq!(second[1]["count"], 20);
    assert_eq!(second[1]["max"], 300.0);
    let quantile = |q: &str| second[1]["quantiles"][q].as_f64().unwrap();
    assert_eq!(quantile("0.99"), 300.0, "{search}");
    assert!(
        quantile("0.5") < quantile("0.9") && quantile("0.9") < quantile("0.99"),
        "{search}"
    );
    let ranking = |by: &str| {
        let top = server.get(&format!("/v1/stats/top?by={by}&prefix=api:"), None);
        top["stats"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| json!({"name": r["name"], "value": r["value"]}))
            .collect::<Vec<_>>()
    };
    let (by_p99, by_mean) = (ranking("p99"), ranking("mean"));
    let names = |r: &[Value]| r.iter().map(|r| r["name"].clone()).collect::<Vec<_>>();
    assert_eq!(
        names(&by_p99),
        ["api:search", "api:upload", "api:login"],
        "{by_p99:?}"
    );
    assert_eq!(
        names(&by_mean),
        ["api:upload", "api:search", "api:login"],
        "{by_mean:?}"
    );

    let daily = server.get("/v1/daily/ad:42?days=30", None);
    let days = daily["days"].as_array().unwrap();
    assert_eq!(days.len(), 30, "{daily}");
    assert_eq!(days[29]["count"], 3, "{daily}");
    assert_eq!(days[27]["count"], 4, "{daily}");
    assert_eq!(daily["today"]["count"], 3);
    assert_eq!(daily["total"], 7);

    run_browser(
        &server,
        json!({
            "scenario": "data",
            // A browser half an hour off UTC: slices and days must still
            // line up with the server's (UTC) starts.
            "timezone": "Asia/Kolkata",
            "counter": {
                "search": "shop.",
                "listed": ["shop.cart", checkout],
                "name": checkout,
                "samples_kept": 120,
                "samples": precisions,
                "total": 15,
                "hover": {"precision": 1, "at": t0, "count": 7},
                "live_count": 2,
            },
            "stats": {
                "search": "api:",
                "listed": ["api:login", "api:search", "api:upload"],
                "name": "api:search",
                "by": "p99",
                "samples_kept": search["samples_kept"],
                "precisions": stat_precisions,
                "count": 24,
                "ranking": {"p99": by_p99, "mean": by_mean},
                "narrow": "api:u",
                "narrowed": ["api:upload"],
                "other_count": 20,
                "live_value": 60.0,
            },
            "ts": {
                "model": "pages",
                "keys": ["home", "about"],
                "points": points,
                "totals": totals,
                "rollup": rollup,
            },
            "daily": {
                "entity": "ad:42",
                "days": days,
                "today": 3,
                "total": 7,
            },
        }),
    );
}

/// With `--protect-reads`, the page asks for a token, refuses a wrong one,
/// and keeps the right one for the next visit.
#[test]
fn dashboard_asks_for_a_token_when_reads_are_protected() {
    chromium();
    node_ready();
    let token = "e2e-secret-token";
    let server = Server::start(&["--token", token, "--protect-reads"], false);
    let (status, _) = server.http("GET", "/v1/counters", None, None);
    assert_eq!(status, 401, "reads must need the token");
    server.post(
        "/v1/counters/auth:probe/incr",
        Some(token),
        json!({"count": 1}),
    );
    eventually("the probe counter to be listed", || {
        let l = server.get("/v1/counters?prefix=auth:", Some(token));
        if l["counters"] == json!(["auth:probe"]) {
            Ok(())
        } else {
            Err(l.to_string())
        }
    });
    run_browser(
        &server,
        json!({
            "scenario": "token",
            "timezone": "UTC",
            "token": {"value": token, "counter": "auth:probe"},
        }),
    );
}
