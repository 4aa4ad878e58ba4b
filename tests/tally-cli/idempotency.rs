//! Idempotent writes end to end (issue 11): real `tally serve` processes.
//!
//! - Two servers sharing one store (a data directory, a redis-server, a
//!   Redis Cluster), in both write modes: a keyed write sent to one and
//!   repeated to the other, before and after the flush and after a restart,
//!   is counted once and answered with the first answer byte for byte;
//!   another body under the key is 422 and changes nothing.
//! - The fault test: a load of keyed increments (counters, time series and
//!   daily statistics), each retried with its key until it gets an answer, while clients drop their connections before
//!   reading the answer, Redis connections are killed, and the server is
//!   killed (SIGKILL in exact mode; SIGTERM in aggregated mode, which keeps
//!   in memory what it has not flushed) and restarted. The totals are exact.

use crate::support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use support::Serve;

/// An HTTP answer: status, head (lower-cased), body.
struct Reply {
    status: u16,
    head: String,
    body: String,
}

/// Sends one request on a new connection (`Connection: close`); `None` when
/// the connection fails. With `drop_early`, closes the connection right
/// after sending, never reading the answer (a client that timed out).
fn request(
    base: &str,
    method: &str,
    path: &str,
    key: Option<&str>,
    body: &str,
    drop_early: bool,
) -> Option<Reply> {
    let addr = base.strip_prefix("http://").unwrap();
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    let key = key.map_or(String::new(), |k| format!("Idempotency-Key: {k}\r\n"));
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n{key}\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).ok()?;
    if drop_early {
        return None;
    }
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).ok()?;
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head.split(' ').nth(1)?.parse().ok()?;
    Some(Reply {
        status,
        head: head.to_lowercase(),
        body: body.to_owned(),
    })
}

fn post(base: &str, path: &str, key: &str, body: &str) -> Reply {
    request(base, "POST", path, Some(key), body, false).expect("an answer")
}

/// The counter's all-time total (its daily samples summed).
fn total(base: &str, name: &str) -> i64 {
    let r = request(
        base,
        "GET",
        &format!("/v1/counters/{name}?precision=86400"),
        None,
        "",
        false,
    )
    .expect("an answer");
    assert_eq!(r.status, 200, "{}", r.body);
    support::day_sum(&r.body)
}

/// Stops a server with SIGTERM (it flushes and exits) and waits for it.
fn stop(mut s: Serve) {
    let pid = s.child.id().to_string();
    assert!(
        std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let _ = s.child.wait();
}

/// Every write mode's answer to one increment.
fn accepted(exact: bool) -> (u16, &'static str) {
    if exact {
        (200, r#"{"written":1}"#)
    } else {
        (202, r#"{"accepted":1}"#)
    }
}

/// Two servers on one store, a restart between: a keyed increment counts
/// once whichever server gets it, before or after the flush.
fn two_servers_and_a_restart(global: &[&str]) {
    for exact in [false, true] {
        let mode = if exact { "exact" } else { "aggregated" };
        let args = ["--write-mode", mode, "--flush-interval-ms", "50"];
        let (a, b) = (support::serve(global, &args), support::serve(global, &args));
        let name = format!("orders-{mode}");
        let path = format!("/v1/counters/{name}/incr");
        let key = format!("order-{mode}");
        let body = r#"{"count":1}"#;
        let first = post(&a.base, &path, &key, body);
        assert_eq!((first.status, first.body.as_str()), accepted(exact));
        // The other process, before the flush: the first answer again.
        let copy = post(&b.base, &path, &key, body);
        assert_eq!((copy.status, &copy.body), (first.status, &first.body));
        assert!(
            copy.head.contains("idempotent-replayed: true"),
            "{}",
            copy.head
        );
        // Another body under the key: 422, nothing changed.
        let other = post(&b.base, &path, &key, r#"{"count":2}"#);
        assert_eq!(other.status, 422, "{}", other.body);
        assert!(
            other.body.contains("idempotency_key_reused"),
            "{}",
            other.body
        );
        // After the flush, and after a restart of the first server.
        assert!(tally_testkit::wait_until(
            tally_testkit::PATIENCE,
            || total(&b.base, &name) == 1
        ));
        stop(a);
        let a = support::serve(global, &args);
        let again = post(&a.base, &path, &key, body);
        assert_eq!((again.status, &again.body), (first.status, &first.body));
        // Nothing was counted twice, buffered or not: both servers write
        // what they hold when stopped, and fresh ones read the store.
        stop(a);
        stop(b);
        let (a, b) = (support::serve(global, &args), support::serve(global, &args));
        assert_eq!(total(&a.base, &name), 1, "{mode}");
        assert_eq!(total(&b.base, &name), 1, "{mode}");
        stop(a);
        stop(b);
    }
}

#[test]
fn keyed_writes_count_once_across_servers_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    two_servers_and_a_restart(&["--data-dir", dir.path().to_str().unwrap()]);
}

#[test]
fn keyed_writes_count_once_across_servers_on_redis() {
    let redis = tally_testkit::RedisServer::start();
    two_servers_and_a_restart(&["--redis", &redis.url()]);
}

#[test]
fn keyed_writes_count_once_across_servers_on_a_cluster() {
    let cluster = tally_testkit::RedisCluster::start();
    let urls = cluster.urls().join(",");
    two_servers_and_a_restart(&["--redis-cluster", &urls]);
}

/// Requests of the load and the counters (time-series keys, daily
/// entities) they go to.
const REQUESTS: u64 = 240;
const COUNTERS: u64 = 8;

/// What request `i` of the load writes: half to counters, a quarter to
/// time series, a quarter to daily statistics.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Target {
    Counter,
    Ts,
    Daily,
}

const TARGETS: [Target; 3] = [Target::Counter, Target::Ts, Target::Daily];

fn target_of(i: u64) -> Target {
    match i % 4 {
        0 | 1 => Target::Counter,
        2 => Target::Ts,
        _ => Target::Daily,
    }
}

/// The path of request `i` to `counter` of its target.
fn path_of(target: Target, counter: u64) -> String {
    match target {
        Target::Counter => format!("/v1/counters/fault:{counter}/incr"),
        Target::Ts => "/v1/ts/fault/incr".to_owned(),
        Target::Daily => format!("/v1/daily/fault-{counter}/incr"),
    }
}

/// The body of an increment of `count` to `counter` of `target`.
fn body_of(target: Target, counter: u64, count: i64) -> String {
    match target {
        Target::Ts => format!(r#"{{"key":"k{counter}","count":{count}}}"#),
        _ => format!(r#"{{"count":{count}}}"#),
    }
}

/// The total of `counter` of `target` as the server reads it.
fn total_of(base: &str, target: Target, counter: u64) -> i64 {
    let read = |path: &str| {
        let r = request(base, "GET", path, None, "", false).expect("an answer");
        assert_eq!(r.status, 200, "{path}: {}", r.body);
        serde_json::from_str::<serde_json::Value>(&r.body).unwrap()
    };
    match target {
        Target::Counter => total(base, &format!("fault:{counter}")),
        Target::Ts => read(&format!("/v1/ts/fault/sums?keys=k{counter}"))["totals"][0]["total"]
            .as_i64()
            .unwrap(),
        Target::Daily => read(&format!("/v1/daily/fault-{counter}?days=1"))["total"]
            .as_i64()
            .unwrap(),
    }
}

/// The fault test on a redis-server: every keyed request retried until
/// answered, through dropped client connections, killed Redis connections
/// and server restarts; each counter, time-series key and daily entity ends
/// at exactly its requests' sum.
fn fault_run(exact: bool) {
    let redis = tally_testkit::RedisServer::start();
    let url = redis.url();
    let mode = if exact { "exact" } else { "aggregated" };
    let args = [
        "--write-mode",
        mode,
        "--flush-interval-ms",
        "20",
        "--request-timeout",
        "0.5",
    ];
    let global = ["--redis", url.as_str()];
    let server = Arc::new(Mutex::new(Some(support::serve(&global, &args))));
    let base = Arc::new(Mutex::new(
        server.lock().unwrap().as_ref().unwrap().base.clone(),
    ));
    let done = Arc::new(AtomicBool::new(false));
    let restarted = Arc::new(AtomicU64::new(0));

    // Chaos: kill Redis connections often, restart the server now and then.
    let chaos = {
        let (server, base, done) = (server.clone(), base.clone(), done.clone());
        let restarted = restarted.clone();
        let (redis_port, global, args) = (redis.port(), global.map(str::to_owned), args);
        std::thread::spawn(move || {
            let mut restarts = 0;
            let mut n = 0u64;
            while !done.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(120));
                n += 1;
                let _ = std::process::Command::new("redis-cli")
                    .args([
                        "-p",
                        &redis_port.to_string(),
                        "CLIENT",
                        "KILL",
                        "TYPE",
                        "normal",
                    ])
                    .output();
                if n.is_multiple_of(6) {
                    let old = server.lock().unwrap().take().unwrap();
                    if exact {
                        let mut old = old;
                        old.child.kill().unwrap();
                        let _ = old.child.wait();
                    } else {
                        stop(old);
                    }
                    let global: Vec<&str> = global.iter().map(String::as_str).collect();
                    let fresh = support::serve(&global, &args);
                    *base.lock().unwrap() = fresh.base.clone();
                    *server.lock().unwrap() = Some(fresh);
                    restarts += 1;
                    restarted.store(restarts, Ordering::Relaxed);
                }
            }
            restarts
        })
    };

    // Clients: each request is sent until it is answered 2xx; a third of the
    // first attempts drop the connection without reading the answer.
    let clients: Vec<_> = (0..4u64)
        .map(|c| {
            let (base, restarted) = (base.clone(), restarted.clone());
            std::thread::spawn(move || {
                let mut sent = vec![0i64; 3 * COUNTERS as usize];
                let mut attempts = 0u64;
                // At least REQUESTS requests, and on until the server was
                // restarted three times.
                for i in (c..).step_by(4) {
                    if i >= REQUESTS && restarted.load(Ordering::Relaxed) >= 3 {
                        break;
                    }
                    let counter = i % COUNTERS;
                    let count = (i % 5 + 1) as i64;
                    let target = target_of(i);
                    let body = body_of(target, counter, count);
                    let path = path_of(target, counter);
                    let key = format!("fault-{mode}-{i}");
                    let deadline = Instant::now() + Duration::from_secs(60);
                    for attempt in 0.. {
                        assert!(Instant::now() < deadline, "request {i} never answered");
                        attempts += 1;
                        let b = base.lock().unwrap().clone();
                        let drop_early = attempt == 0 && i % 3 == 0;
                        match request(&b, "POST", &path, Some(&key), &body, drop_early) {
                            Some(r) if r.status / 100 == 2 => break,
                            Some(r) => assert!(
                                r.status == 503 || r.status == 409,
                                "request {i}: {} {}",
                                r.status,
                                r.body
                            ),
                            None => {}
                        }
                        std::thread::sleep(Duration::from_millis(25));
                    }
                    let t = TARGETS.iter().position(|&t| t == target).unwrap();
                    sent[t * COUNTERS as usize + counter as usize] += count;
                }
                (sent, attempts)
            })
        })
        .collect();
    let mut want = vec![0i64; 3 * COUNTERS as usize];
    let mut attempts = 0;
    for c in clients {
        let (sent, n) = c.join().unwrap();
        attempts += n;
        for (w, s) in want.iter_mut().zip(sent) {
            *w += s;
        }
    }
    done.store(true, Ordering::Relaxed);
    let restarts = chaos.join().unwrap();
    assert!(restarts >= 3, "only {restarts} restarts during the load");
    assert!(attempts > REQUESTS, "no request was retried");
    // Let the last server flush (aggregated), then read exact totals.
    stop(server.lock().unwrap().take().unwrap());
    let reader = support::serve(&global, &args);
    for (j, want) in want.iter().enumerate() {
        let (t, counter) = (j / COUNTERS as usize, j as u64 % COUNTERS);
        assert_eq!(
            total_of(&reader.base, TARGETS[t], counter),
            *want,
            "{} {counter} ({mode}, {restarts} restarts, {attempts} attempts)",
            ["counter", "time-series key", "daily entity"][t]
        );
    }
}

#[test]
fn retried_keyed_writes_are_exact_through_faults_in_exact_mode() {
    fault_run(true);
}

#[test]
fn retried_keyed_writes_are_exact_through_faults_in_aggregated_mode() {
    fault_run(false);
}
