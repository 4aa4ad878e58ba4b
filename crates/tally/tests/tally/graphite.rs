//! The Graphite API against graphite-web 1.1.10 on the same data: Tally
//! serves its stores under `/graphite`; graphite-web (started by the test
//! harness from the venv `scripts/test` makes) serves whisper files holding
//! the same slices (one archive per precision, each slot Tally's value for
//! that slice). The same requests go to both, and the answers must agree:
//! the same series in the same order, names, timestamps and nulls, values
//! equal to 1e-9 relative (absolute for zeros). Paths that meet, and
//! quantile leaves at precisions without a sketch, are compared the same way.
//!
//! Where graphite-web has nothing to say, other references: statsd 0.9.0
//! itself (npm, started by the harness) writing its Graphite names to a
//! capturing listener for the statsd namespace, and the exact quantiles of
//! the recorded values for Tally's own `mergedQuantile`.
//!
//! Every backend: SQLite, a real redis-server in both cleaned layouts and a
//! real Redis Cluster.

use crate::common;

use std::net::SocketAddr;
use std::sync::Arc;

use common::{Fixture, Kind};
use serde_json::Value as Json;
use tally::gauges::GaugeOp;
use tally::graphite::Namespace;
use tally::server::graphite::{GraphiteApi, GraphiteSettings};
use tally::server::{AppState, Metrics, ServerSettings, Services};
use tally::stats::{Observation, StatsSettings};
use tally::{Increment, SetAdd, Tally};
use tally_testkit::http::{self, Response};
use tally_testkit::{GraphiteWeb, WhisperData, WhisperSeries};

/// Now, for every request: 2012-05-07 07:40:00 UTC (a whole day of slices
/// before it fits every precision's span; slices of several precisions
/// start here).
const NOW: i64 = 1_336_376_400;

per_backend!(layouts:
    renders_match_graphite_web,
    finds_match_graphite_web,
    statsd_names_match_graphite_web,
    colliding_paths_answer_as_graphite_web_does,
    quantile_leaves_are_null_without_a_sketch,
    merged_quantiles_are_the_quantiles_of_the_recorded_values,
    statsd_names_match_statsds_own_graphite_backend,
);

/// Opens Tally on `kind` at [`NOW`], with `stats` for its statistics.
async fn open(kind: Kind, stats: Option<StatsSettings>) -> (Fixture, Tally) {
    let fixture = Fixture::build_at(
        kind,
        tally::CounterSettings::default(),
        tally_testkit::RedisOptions::default(),
        NOW as f64,
    )
    .await;
    let mut builder = Tally::builder().clock(Arc::new(fixture.clock.clone()));
    if let Some(stats) = stats {
        builder = builder.stats_settings(stats);
    }
    let tally = builder.open_backend(fixture.config.clone()).await.unwrap();
    (fixture, tally)
}

/// Statistics keeping a quantile sketch at 1 s, 5 s and 1 min only: coarser
/// slices hold the moments alone.
fn sketched_to_the_minute() -> StatsSettings {
    StatsSettings {
        sketch_precisions: Some(vec![1, 5, 60]),
        ..StatsSettings::default()
    }
}

/// Tally's HTTP server (the Graphite API with `settings`) over `tally` on a
/// free port, stopped on drop.
struct Server {
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Server {
    async fn start(tally: &Tally, settings: &GraphiteSettings) -> Server {
        let services = Services {
            counters: tally.counters(),
            counter_writer: None,
            exact_writes: true,
            limiter: None,
            locks: None,
            tsdb: None,
            daily: None,
            gauges: Some(tally.gauges()),
            sets: Some(tally.sets()),
            buffers: None,
            stats: Some(tally.stats()),
            stats_writer: None,
            idempotency: None,
            graphite: Some(GraphiteApi::new(tally, settings)),
        };
        let state = AppState::new(services, ServerSettings::default(), Metrics::default());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            tally::server::serve(listener, state, std::future::pending())
                .await
                .unwrap();
        });
        Server { addr, task }
    }

    /// `method /graphite<path>`, with `body` as a form when not empty.
    async fn request(&self, method: &str, path: &str, body: &str) -> Response {
        let addr = self.addr;
        let (m, p, b) = (method.to_owned(), path.to_owned(), body.to_owned());
        tokio::task::spawn_blocking(move || {
            let headers: Vec<(&str, &str)> = if b.is_empty() {
                vec![]
            } else {
                vec![("Content-Type", "application/x-www-form-urlencoded")]
            };
            http::request(addr, &m, &format!("/graphite{p}"), &headers, b.as_bytes()).unwrap()
        })
        .await
        .unwrap()
    }

    /// `GET /graphite<path>`, which must answer 200 with JSON.
    async fn json(&self, path: &str) -> Json {
        let answer = self.request("GET", path, "").await;
        assert_eq!(answer.status, 200, "GET {path}: {}", answer.text());
        // graphite-web writes an infinite default (keepLastValue's limit) as
        // `1e9999`, which serde_json cannot hold: read it as the largest double.
        let text = answer
            .text()
            .replace(": 1e9999", ": 1.7976931348623157e308");
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("GET {path}: no JSON ({e}): {text}"))
    }

    /// `GET /graphite<path>`, which must answer graphite-web's 400; its text.
    async fn refused(&self, path: &str) -> String {
        let answer = self.request("GET", path, "").await;
        assert_eq!(answer.status, 400, "GET {path}: {}", answer.text());
        assert_invalid_parameters(&answer, path);
        answer.text()
    }
}

/// One Tally server and one graphite-web over the same data.
/// Asserts graphite-web's refusal page: HTML, "Invalid parameters (...".
fn assert_invalid_parameters(answer: &Response, what: &str) {
    assert!(
        answer.content_type().starts_with("text/html"),
        "{what}: {}",
        answer.content_type()
    );
    assert!(
        answer.text().starts_with("Invalid parameters ("),
        "{what}: {}",
        answer.text()
    );
}

struct Pair {
    _fixture: Fixture,
    tally: Tally,
    server: Server,
    graphite: GraphiteWeb,
}

impl Pair {
    /// Tally on `kind` with `settings`, after [`write_data`] put its data
    /// in; graphite-web over the export of the same namespace.
    async fn start(kind: Kind, settings: GraphiteSettings) -> Pair {
        let (fixture, tally) = open(kind, None).await;
        write_data(&tally).await;
        Pair::over(fixture, tally, settings).await
    }

    /// Tally's server over `tally` as it is, and graphite-web over its
    /// export.
    async fn over(fixture: Fixture, tally: Tally, settings: GraphiteSettings) -> Pair {
        let export = tally
            .graphite_source(settings.namespace, &settings.quantiles)
            .export(NOW)
            .await
            .unwrap();
        let data: WhisperData = export
            .into_iter()
            .map(|leaf| WhisperSeries::exported(leaf.path, &leaf.archives, leaf.points))
            .collect();
        let graphite = tokio::task::spawn_blocking(move || GraphiteWeb::start(&data))
            .await
            .unwrap();
        let server = Server::start(&tally, &settings).await;
        Pair {
            _fixture: fixture,
            tally,
            server,
            graphite,
        }
    }

    /// The same request to both: (Tally's answer, graphite-web's).
    async fn ask(&self, method: &str, path: &str, body: &str) -> (Response, Response) {
        let ours = self.server.request(method, path, body).await;
        let headers: Vec<(&str, &str)> = if body.is_empty() {
            vec![]
        } else {
            vec![("Content-Type", "application/x-www-form-urlencoded")]
        };
        let theirs = self
            .graphite
            .request(method, path, &headers, body.as_bytes());
        (ours, theirs)
    }

    /// GETs `path` from both.
    async fn get(&self, path: &str) -> (Response, Response) {
        self.ask("GET", path, "").await
    }

    /// Asks both and checks they agree; returns Tally's answer.
    async fn same(&self, method: &str, path: &str, body: &str) -> Json {
        let (ours, theirs) = self.ask(method, path, body).await;
        let what = format!("{method} {path} {body}");
        assert_eq!(
            ours.status,
            theirs.status,
            "{what}: status differs\nTally: {}\ngraphite-web: {}",
            ours.text(),
            theirs.text()
        );
        assert_eq!(ours.status, 200, "{what}: {}", ours.text());
        let a: Json = serde_json::from_slice(&ours.body)
            .unwrap_or_else(|e| panic!("{what}: Tally's answer is no JSON ({e}): {}", ours.text()));
        let b: Json = serde_json::from_slice(&theirs.body).unwrap_or_else(|e| {
            panic!(
                "{what}: graphite-web's answer is no JSON ({e}): {}",
                theirs.text()
            )
        });
        // On a disagreement, graphite-web's logs go with the panic: an empty
        // answer from it (seen once under two CPU hogs) says why only there.
        let agreed = std::panic::catch_unwind(|| agree(&what, &a, &b));
        if let Err(panic) = agreed {
            eprintln!("graphite-web's logs:\n{}", self.graphite.logs());
            std::panic::resume_unwind(panic);
        }
        a
    }
}

/// Tally's and graphite-web's JSON agree: equal, but numbers to 1e-9
/// relative (absolute for zeros).
fn agree(what: &str, a: &Json, b: &Json) {
    match (a, b) {
        (Json::Number(x), Json::Number(y)) => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            let close = if y == 0.0 {
                x.abs() <= 1e-9
            } else {
                ((x - y) / y).abs() <= 1e-9
            };
            assert!(close, "{what}: {x} where graphite-web has {y}\nTally: {a}");
        }
        (Json::Array(xs), Json::Array(ys)) => {
            assert_eq!(
                xs.len(),
                ys.len(),
                "{what}: {} items where graphite-web has {}\nTally: {a}\ngraphite-web: {b}",
                xs.len(),
                ys.len()
            );
            for (x, y) in xs.iter().zip(ys) {
                agree(what, x, y);
            }
        }
        (Json::Object(xs), Json::Object(ys)) => {
            let keys = |m: &serde_json::Map<String, Json>| {
                let mut k: Vec<String> = m.keys().cloned().collect();
                k.sort();
                k
            };
            assert_eq!(
                keys(xs),
                keys(ys),
                "{what}: keys differ\nTally: {a}\ngraphite-web: {b}"
            );
            for (k, x) in xs {
                agree(what, x, &ys[k]);
            }
        }
        _ => assert_eq!(a, b, "{what}: values differ"),
    }
}

/// Three hosts' requests (counters), load (gauges), users (a set) and a
/// latency statistic: dense in the last minutes, sparse over weeks, with
/// gaps; several names escaping to paths.
async fn write_data(tally: &Tally) {
    let at = |secs_ago: i64| (NOW - secs_ago) as f64;
    let mut increments = Vec::new();
    let mut gauges = Vec::new();
    let mut adds = Vec::new();
    let mut observations = Vec::new();
    for host in 0..3i64 {
        let name = format!("app.h{host}.requests");
        // Every 7 s over the last 20 minutes, skipping a stretch per host.
        for k in 0..170i64 {
            if (40 + 10 * host..60 + 10 * host).contains(&k) {
                continue;
            }
            increments.push(Increment::new(&name, 1 + (k + host) % 5).at(at(7 * k)));
            gauges.push(
                GaugeOp::set(format!("app.h{host}.load"), (k % 13) as f64 / 4.0).at(at(7 * k)),
            );
        }
        // Every 97 min over the last 100 days.
        for k in 0..1485i64 {
            increments.push(Increment::new(&name, 10 + k % 7).at(at(5820 * k + 3)));
        }
    }
    for k in 0..300i64 {
        adds.push(SetAdd::new("app.users", [format!("u{}", k % 37)]).at(at(11 * k)));
        for j in 0..(1 + k % 4) {
            observations.push(
                Observation::new("app.latency", (5 + (k * 7 + j * 13) % 90) as f64).at(at(9 * k)),
            );
        }
    }
    for k in 0..400i64 {
        observations
            .push(Observation::new("app.latency", (k % 50) as f64 * 1.5).at(at(3571 * k + 1)));
    }
    // Names that are no Graphite paths as they are.
    increments.push(Increment::new("odd..name", 2).at(at(30)));
    for chunk in increments.chunks(1_000) {
        tally.counters().incr_many(chunk).await.unwrap();
    }
    for chunk in gauges.chunks(1_000) {
        tally.gauges().apply_many(chunk).await.unwrap();
    }
    for chunk in adds.chunks(1_000) {
        tally.sets().add_many(chunk).await.unwrap();
    }
    for chunk in observations.chunks(1_000) {
        tally.stats().record_many(chunk).await.unwrap();
    }
}

fn url(target: &str, rest: &str) -> String {
    format!(
        "/render?target={}&format=json&now={NOW}{rest}",
        encode(target)
    )
}

/// Percent-encodes a query value.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'*' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Every kind's leaves over every precision's range, wildcards, time forms,
/// consolidation, formats, empty matches and bad requests.
async fn renders_match_graphite_web(kind: Kind) {
    let pair = Pair::start(kind, GraphiteSettings::default()).await;
    let targets = [
        "app.h0.requests",
        "app.*.requests",
        "app.h[0-1].requests",
        "app.{h0,h2}.*",
        "app.h?.load",
        "app.users",
        "app.latency.*",
        "app.latency.p99",
        "app.latency.{count,sum,min,max,mean,stddev,p50,p90}",
        "odd._.name",
        "nothing.here",
        "app.*.nothing",
    ];
    let ranges = [
        "&from=-1min",
        "&from=-2min",
        "&from=-5min",
        "&from=-10min&until=-3min",
        "&from=-1h",
        "&from=-2h",
        "&from=-6h&until=-1h",
        "&from=-2d",
        "&from=-7d",
        "&from=-30d",
        "&from=-100d&until=-20d",
        "&from=-300d",
        "&from=-1d&until=-12h",
        "&from=1336376000&until=1336376300",
        "&from=1336375999&until=1336376001",
        "&from=07:00_20120507&until=07:30_20120507",
        "&from=20120501&until=20120503",
        "&from=yesterday",
        "&from=-3h&until=now-1h",
        "&from=-400d&until=-350d",
        "&from=now&until=now%2B1h",
    ];
    let (mut series, mut values, mut nulls) = (0, 0, 0);
    for target in targets {
        for range in ranges {
            let answer = pair.same("GET", &url(target, range), "").await;
            for s in answer.as_array().unwrap() {
                series += 1;
                for p in s["datapoints"].as_array().unwrap() {
                    if p[0].is_null() {
                        nulls += 1;
                    } else {
                        values += 1;
                    }
                }
            }
        }
    }
    // The comparison saw data: values and gaps at every kind of leaf.
    assert!(
        series > 150 && values > 5_000 && nulls > 1_000,
        "{series} {values} {nulls}"
    );
    for rest in [
        "&from=-1h&maxDataPoints=7",
        "&from=-2h&maxDataPoints=100",
        "&from=-1d&maxDataPoints=1",
        "&from=-1min&noNullPoints=1",
        "&from=-10min&noNullPoints",
    ] {
        pair.same("GET", &url("app.*.requests", rest), "").await;
        pair.same("GET", &url("app.latency.p50", rest), "").await;
    }
    // Several targets, a POSTed form as Grafana sends it.
    pair.same(
        "POST",
        "/render",
        &format!(
            "target={}&target={}&from=1336372800&until=1336376400&format=json&maxDataPoints=50&now={NOW}",
            encode("app.h0.requests"),
            encode("app.latency.max")
        ),
    )
    .await;
    // CSV, byte for byte.
    let (ours, theirs) = pair
        .get(&format!(
            "/render?target=app.h1.*&from=-2min&format=csv&now={NOW}"
        ))
        .await;
    assert_eq!((ours.status, ours.text()), (theirs.status, theirs.text()));
    // Bad times and empty ranges are 400 on both.
    for bad in [
        "&from=garbage",
        "&from=-5m",
        "&from=-1h&until=-1h",
        "&until=xyz",
    ] {
        let (ours, theirs) = pair.get(&url("app.h0.requests", bad)).await;
        assert_eq!(
            (ours.status, theirs.status),
            (400, 400),
            "{bad}: {}",
            ours.text()
        );
        assert_invalid_parameters(&ours, bad);
    }
    // A target that does not parse, or an unknown function: 400 naming it.
    for bad in ["foo(", "nope(app.h0.requests)"] {
        let (ours, _) = pair.get(&url(bad, "&from=-1h")).await;
        assert_eq!(ours.status, 400, "{bad}: {}", ours.text());
        assert_invalid_parameters(&ours, bad);
    }
    // PNG, graphite-web's default format, is refused naming the formats.
    let (ours, _) = pair
        .get(&format!(
            "/render?target=app.h0.requests&from=-1h&now={NOW}"
        ))
        .await;
    assert_eq!(ours.status, 400);
    assert!(
        ours.text().contains("json") && ours.text().contains("csv"),
        "{}",
        ours.text()
    );
    // The server's own per-route series: a path a whisper file cannot hold
    // (`/`), so graphite-web never has it; Tally charts it.
    pair.tally
        .counters()
        .incr_many(&[
            Increment::new("tally:http:route:GET /v1/counters/{name}", 3).at((NOW - 30) as f64),
        ])
        .await
        .unwrap();
    let (ours, _) = pair
        .get(&url(
            "tally:http:route:GET_/v1/counters/_name_",
            "&from=-1min",
        ))
        .await;
    let answer: Json = serde_json::from_slice(&ours.body).unwrap();
    let points = answer[0]["datapoints"].as_array().unwrap();
    assert_eq!(
        answer[0]["target"],
        "tally:http:route:GET_/v1/counters/_name_"
    );
    assert!(
        points.contains(&serde_json::json!([3.0, NOW - 30])),
        "{answer}"
    );
    assert_eq!(points.iter().filter(|p| !p[0].is_null()).count(), 1);
}

/// `/metrics/find` and `/metrics/expand` at every depth, with wildcards, in
/// the query string and in Grafana's raw body.
async fn finds_match_graphite_web(kind: Kind) {
    let pair = Pair::start(kind, GraphiteSettings::default()).await;
    for query in [
        "*",
        "app.*",
        "app.h*",
        "app.h?.*",
        "app.{h0,h2}.*",
        "app.latency.*",
        "app.latency.p*",
        "app.*.*",
        "odd.*",
        "odd._.*",
        "nothing.*",
        "app.h0.requests",
        "app.latency",
    ] {
        for route in ["find", "expand"] {
            let path = format!("/metrics/{route}?query={}", encode(query));
            pair.same("GET", &path, "").await;
        }
    }
    // Grafana's query editor: from/until in the URL, a raw body.
    pair.same(
        "POST",
        "/metrics/find?from=1336372800&until=1336376400",
        "query=app.{h0,h1}.*",
    )
    .await;
    pair.same("POST", "/metrics/find", "query=app.*").await;
}

/// statsd's names (`--graphite-namespace statsd`): counters twice, timers,
/// gauges and sets where statsd's Graphite backend puts them.
async fn statsd_names_match_graphite_web(kind: Kind) {
    let settings = GraphiteSettings {
        namespace: Namespace::Statsd,
        ..GraphiteSettings::default()
    };
    let pair = Pair::start(kind, settings).await;
    for target in [
        "stats_counts.app.*.requests",
        "stats.app.h0.requests",
        "stats.timers.app.latency.*",
        "stats.timers.app.latency.upper_90",
        "stats.gauges.app.*.load",
        "stats.sets.app.users.count",
    ] {
        for range in ["&from=-5min", "&from=-6h", "&from=-30d"] {
            pair.same("GET", &url(target, range), "").await;
        }
    }
    for query in [
        "*",
        "stats.*",
        "stats.timers.*",
        "stats.timers.app.latency.*",
        "stats_counts.app.*",
    ] {
        pair.same("GET", &format!("/metrics/find?query={}", encode(query)), "")
            .await;
    }
}

/// The points of a rendered series that hold a value: (value, timestamp).
fn present(series: &Json) -> Vec<(f64, i64)> {
    series["datapoints"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| Some((p[0].as_f64()?, p[1].as_i64().unwrap())))
        .collect()
}

/// The names of a render's series, in order.
fn targets(answer: &Json) -> Vec<String> {
    answer
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["target"].as_str().unwrap().to_owned())
        .collect()
}

/// A find's nodes as (text, leaf), in order.
fn nodes(answer: &Json) -> Vec<(String, bool)> {
    answer
        .as_array()
        .unwrap()
        .iter()
        .map(|n| (n["text"].as_str().unwrap().to_owned(), n["leaf"] == 1))
        .collect()
}

/// Series whose paths meet: `a b` and `a_b` (one path), a counter
/// `svc.count` beside a statistic `svc` (one path), a counter `api` beside
/// a statistic `api` and counters `web` and `web.x` (a path that is a leaf
/// and a branch).
async fn write_collisions(tally: &Tally) {
    let at = |ago: i64| (NOW - ago) as f64;
    tally
        .counters()
        .incr_many(&[
            Increment::new("a b", 1).at(at(50)),
            Increment::new("a b", 9).at(at(45)),
            Increment::new("a_b", 2).at(at(50)),
            Increment::new("a_b", 3).at(at(30)),
            Increment::new("svc.count", 7).at(at(40)),
            Increment::new("svc.count", 8).at(at(10)),
            Increment::new("api", 5).at(at(20)),
            Increment::new("web", 4).at(at(20)),
            Increment::new("web.x", 6).at(at(20)),
        ])
        .await
        .unwrap();
    let mut observations = Vec::new();
    for (v, ago) in [(1.0, 10), (2.0, 10), (3.0, 10), (4.0, 5), (5.0, 5)] {
        observations.push(Observation::new("svc", v).at(at(ago)));
    }
    for v in [10.0, 20.0] {
        observations.push(Observation::new("api", v).at(at(20)));
    }
    tally.stats().record_many(&observations).await.unwrap();
}

/// Paths that meet answer as graphite-web answers series sharing a name
/// and a whisper file beside a directory: render keeps the first series
/// (counters before statistics, `a b` before `a_b`) with its nulls filled
/// from the later ones; find lists a path once, a branch where it is both.
/// The same on every backend, and the same as graphite-web on the export.
async fn colliding_paths_answer_as_graphite_web_does(kind: Kind) {
    let (fixture, tally) = open(kind, None).await;
    write_collisions(&tally).await;
    let pair = Pair::over(fixture, tally, GraphiteSettings::default()).await;
    let minute = "&from=-1min";
    // Two names, one path: `a b`'s values, `a_b`'s 3 where `a b` has none
    // (though `a_b` has as many nulls).
    let answer = pair.same("GET", &url("a_b", minute), "").await;
    assert_eq!(targets(&answer), ["a_b"]);
    assert_eq!(
        present(&answer[0]),
        [(1.0, NOW - 50), (9.0, NOW - 45), (3.0, NOW - 30)]
    );
    // The counter `svc.count` first, the statistic's count in its gaps.
    let answer = pair.same("GET", &url("svc.count", minute), "").await;
    assert_eq!(targets(&answer), ["svc.count"]);
    assert_eq!(
        present(&answer[0]),
        [(7.0, NOW - 40), (8.0, NOW - 10), (2.0, NOW - 5)]
    );
    let answer = pair.same("GET", &url("svc.*", minute), "").await;
    assert_eq!(
        targets(&answer),
        [
            "svc.count",
            "svc.max",
            "svc.mean",
            "svc.min",
            "svc.p50",
            "svc.p90",
            "svc.p99",
            "svc.stddev",
            "svc.sum"
        ]
    );
    // A coarser step merges whole slices the same way: the counter's 15.
    let answer = pair.same("GET", &url("svc.count", "&from=-1h"), "").await;
    assert_eq!(present(&answer[0]), [(15.0, NOW - 60)]);
    // A leaf and a branch: the path renders the leaf, its children the
    // branch's leaves.
    let answer = pair.same("GET", &url("api", minute), "").await;
    assert_eq!(targets(&answer), ["api"]);
    assert_eq!(present(&answer[0]), [(5.0, NOW - 20)]);
    let answer = pair.same("GET", &url("api.count", minute), "").await;
    assert_eq!(present(&answer[0]), [(2.0, NOW - 20)]);
    let answer = pair.same("GET", &url("web.*", minute), "").await;
    assert_eq!(targets(&answer), ["web.x"]);
    let answer = pair.same("GET", &url("*", minute), "").await;
    assert_eq!(targets(&answer), ["a_b", "api", "web"]);
    for target in ["a?b", "{a_b,api,web}", "*.*", "a_b.*", "sumSeries(*)"] {
        pair.same("GET", &url(target, minute), "").await;
    }
    // find: one node per path, the branch where a path is both.
    let find = |q: &str| format!("/metrics/find?query={}", encode(q));
    let answer = pair.same("GET", &find("*"), "").await;
    assert_eq!(
        nodes(&answer),
        [
            ("api".to_owned(), false),
            ("svc".to_owned(), false),
            ("web".to_owned(), false),
            ("a_b".to_owned(), true)
        ]
    );
    for query in ["api", "web", "a_b", "a?b"] {
        let answer = pair.same("GET", &find(query), "").await;
        assert_eq!(nodes(&answer).len(), 1, "{query}: {answer}");
    }
    let answer = pair.same("GET", &find("svc.*"), "").await;
    assert_eq!(
        nodes(&answer).iter().filter(|(n, _)| n == "count").count(),
        1,
        "{answer}"
    );
    for query in ["*.*", "api.*", "web.*"] {
        pair.same("GET", &find(query), "").await;
    }
    let answer = pair.same("GET", "/metrics/expand?query=*", "").await;
    assert_eq!(
        answer,
        serde_json::json!({"results": ["a_b", "api", "svc", "web"]})
    );
}

/// Quantile leaves read null at a precision that keeps no sketch, and
/// graphite-web reads the same nulls from the export; the moments still
/// show there, and the quantiles where a sketch is kept.
async fn quantile_leaves_are_null_without_a_sketch(kind: Kind) {
    let (fixture, tally) = open(kind, Some(sketched_to_the_minute())).await;
    write_data(&tally).await;
    let pair = Pair::over(fixture, tally, GraphiteSettings::default()).await;
    let quantiles = ["app.latency.p50", "app.latency.p90", "app.latency.p99"];
    // -1h reads 1-minute slices (a sketch); -6h 5-minute ones, -7d hours, -30d days.
    for (range, sketched) in [
        ("&from=-1h", true),
        ("&from=-6h", false),
        ("&from=-7d", false),
        ("&from=-30d", false),
    ] {
        let answer = pair.same("GET", &url("app.latency.*", range), "").await;
        let values = |name: &str| {
            let series = answer
                .as_array()
                .unwrap()
                .iter()
                .find(|s| s["target"] == name)
                .unwrap_or_else(|| panic!("{range}: no {name} in {answer}"));
            present(series).len()
        };
        assert!(values("app.latency.count") > 0, "{range}: {answer}");
        for q in quantiles {
            assert_eq!(values(q) > 0, sketched, "{range}: {q} in {answer}");
        }
    }
}

/// `lat`'s observations, (time, value): a few to a few dozen in each
/// minute of the last 45, values over three orders of magnitude, none 16
/// to 20 minutes ago (a whole empty 5-minute bucket).
fn latencies() -> Vec<(i64, f64)> {
    let mut out = Vec::new();
    for k in 0..=45i64 {
        if (16..=20).contains(&k) {
            continue;
        }
        for j in 0..(3 + (k * 5) % 23) {
            let t = if k == 0 {
                NOW
            } else {
                NOW - 60 * k + (j * 7) % 60
            };
            let scale = if j % 4 == 3 { 50.0 } else { 1.0 };
            out.push((t, ((k * 31 + j * 17) % 97) as f64 * 1.37 * scale));
        }
    }
    out
}

/// The exact nearest-rank quantile `permille / 1000` of `values`: the
/// value of rank ⌈q·n⌉ (at least 1), in integers.
fn exact_quantile(values: &[f64], permille: u64) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len() as u64;
    let rank = (permille * n).div_ceil(1000).max(1);
    sorted[rank as usize - 1]
}

/// `mergedQuantile(seriesList, q, interval)` merges each 5-minute bucket's
/// sketches: every bucket's value is within the sketch's relative accuracy
/// (1 %) of the exact nearest-rank quantile of the values recorded in it;
/// an empty bucket, and every bucket at a precision without a sketch, is
/// null; its name and tags are Tally's own; bad arguments are graphite-web's
/// 400; `/functions` lists it alone in its group, with its parameters.
async fn merged_quantiles_are_the_quantiles_of_the_recorded_values(kind: Kind) {
    let (_fixture, tally) = open(kind, Some(sketched_to_the_minute())).await;
    let observations: Vec<Observation> = latencies()
        .into_iter()
        .map(|(t, v)| Observation::new("lat", v).at(t as f64))
        .collect();
    tally.stats().record_many(&observations).await.unwrap();
    tally
        .counters()
        .incr_many(&[Increment::new("hits", 1).at((NOW - 30) as f64)])
        .await
        .unwrap();
    let server = Server::start(&tally, &GraphiteSettings::default()).await;
    let render = |target: &str, rest: &str| url(target, rest);

    // -1h reads 1-minute slices (whisper's window: (now − 1h, now + 1 min));
    // the buckets run from the 5 minutes holding its start to those after its end.
    let (start, end) = (NOW - 3600 + 60, NOW + 60);
    let mut buckets: std::collections::BTreeMap<i64, Vec<f64>> = Default::default();
    for (t, v) in latencies() {
        let slice = t - t.rem_euclid(60);
        if (start..end).contains(&slice) {
            buckets
                .entry(slice - slice.rem_euclid(300))
                .or_default()
                .push(v);
        }
    }
    assert_eq!(buckets.len(), 9, "45 minutes less an empty bucket");
    for (q, permille) in [("0.5", 500), ("0.9", 900), ("0.99", 990)] {
        for leaf in ["lat.count", "lat.p99", "lat.*"] {
            let target = format!("mergedQuantile({leaf}, {q}, \"5min\")");
            let answer = server.json(&render(&target, "&from=-1h")).await;
            assert_eq!(answer.as_array().unwrap().len(), 1, "{target}: {answer}");
            let series = &answer[0];
            assert_eq!(
                series["target"],
                format!("mergedQuantile(lat, {q}, \"5min\")"),
                "{answer}"
            );
            assert_eq!(
                series["tags"],
                serde_json::json!({
                    "name": "lat",
                    "mergedQuantile": q,
                    "mergedQuantileInterval": "5min"
                })
            );
            let points = series["datapoints"].as_array().unwrap();
            let stamps: Vec<i64> = points.iter().map(|p| p[1].as_i64().unwrap()).collect();
            let expected: Vec<i64> = (0..=12).map(|b| NOW - 3600 + 300 * b).collect();
            assert_eq!(stamps, expected, "{target}");
            for point in points {
                let at = point[1].as_i64().unwrap();
                match buckets.get(&at) {
                    None => assert!(point[0].is_null(), "{target}: {at} is empty: {point}"),
                    Some(values) => {
                        let exact = exact_quantile(values, permille);
                        let got = point[0].as_f64().unwrap_or_else(|| {
                            panic!("{target}: no value at {at} ({} values)", values.len())
                        });
                        assert!(
                            (got - exact).abs() <= 0.01 * exact.abs() + 1e-12,
                            "{target} at {at}: {got}, exact {exact} of {} values",
                            values.len()
                        );
                    }
                }
            }
        }
    }
    // Grafana's wrapper renames it; other intervals bucket alike.
    let answer = server
        .json(&render(
            "aliasSub(mergedQuantile(lat.max, 0.5, \"10min\"), \"(^.*$)\", \"\\1 A\")",
            "&from=-1h",
        ))
        .await;
    assert_eq!(answer[0]["target"], "mergedQuantile(lat, 0.5, \"10min\") A");
    let tens: Vec<i64> = present(&answer[0]).iter().map(|p| p.1).collect();
    let expected: Vec<i64> = (0..=5).map(|b| NOW - 3000 + 600 * b).collect();
    assert_eq!(tens, expected, "{answer}");
    // -6h reads 5-minute slices, which keep no sketch: every bucket null.
    let answer = server
        .json(&render(
            "mergedQuantile(lat.count, 0.9, \"5min\")",
            "&from=-6h",
        ))
        .await;
    let points = answer[0]["datapoints"].as_array().unwrap();
    assert!(points.len() >= 72, "{answer}");
    assert!(points.iter().all(|p| p[0].is_null()), "{answer}");
    // ...while the moments are there.
    let answer = server.json(&render("lat.count", "&from=-6h")).await;
    assert!(!present(&answer[0]).is_empty(), "{answer}");
    // No match, no series.
    let answer = server
        .json(&render(
            "mergedQuantile(nothing.*, 0.9, \"5min\")",
            "&from=-1h",
        ))
        .await;
    assert_eq!(answer, serde_json::json!([]));
    // A series that is no statistic's leaf, a bad q, a bad interval: 400.
    for (bad, says) in [
        (
            "mergedQuantile(hits, 0.5, \"5min\")",
            "not a leaf of a statistic",
        ),
        (
            "mergedQuantile(sumSeries(lat.count), 0.5, \"5min\")",
            "not a leaf of a statistic",
        ),
        ("mergedQuantile(lat.count, 1.5, \"5min\")", "q must be"),
        ("mergedQuantile(lat.count, -0.1, \"5min\")", "q must be"),
        (
            "mergedQuantile(lat.count, \"x\", \"5min\")",
            "parameter \"q\"",
        ),
        ("mergedQuantile(lat.count, 0.5, \"5x\")", "interval"),
        ("mergedQuantile(lat.count, 0.5, \"0min\")", "interval"),
        ("mergedQuantile(lat.count, 0.5)", "interval"),
    ] {
        let text = server.refused(&render(bad, "&from=-1h")).await;
        assert!(text.contains(says), "{bad}: {text}");
    }
    // Listed in /functions, alone in its group, with its parameters.
    let functions = server.json("/functions").await;
    let entry = &functions["mergedQuantile"];
    assert_eq!(entry["group"], "Tally", "{entry}");
    assert_eq!(
        entry["params"],
        serde_json::json!([
            {"name": "seriesList", "type": "seriesList", "required": true},
            {"name": "q", "type": "float", "required": true},
            {"name": "interval", "type": "interval", "required": true}
        ])
    );
    let in_group: Vec<&String> = functions
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, f)| f["group"] == "Tally")
        .map(|(name, _)| name)
        .collect();
    assert_eq!(in_group, ["mergedQuantile"]);
    let grouped = server.json("/functions?grouped=1").await;
    assert_eq!(
        grouped["Tally"]
            .as_object()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        ["mergedQuantile"]
    );
}

/// statsd's flush interval in the comparison with statsd, seconds: one of
/// Tally's precisions, which a render from `-5min` reads.
const STATSD_FLUSH: i64 = 5;

/// The percentiles statsd is given, and their quantiles for Tally.
const STATSD_PERCENTILES: [f64; 2] = [90.0, 99.9];

/// The lines sent to statsd and to Tally, as one datagram (statsd handles a
/// datagram between two flushes, Tally at one clock reading): counters with
/// and without sample rates, timers of one, two and two hundred values and a
/// sampled one, gauges set and adjusted, sets.
fn statsd_packet() -> String {
    let mut lines = vec![
        "app.hits:3|c".to_owned(),
        "app.hits:2|c|@0.5".into(),
        "app.hits:1|c|@0.1".into(),
        "app.hits:4|c".into(),
        "app.neg:-4|c".into(),
        "app.odd:1|c|@0.3".into(),
        "api.one:42.5|ms".into(),
        "api.two:3|ms".into(),
        "api.two:8|ms".into(),
        "api.sampled:10|ms|@0.5".into(),
        "api.sampled:20|ms|@0.5".into(),
        "api.sampled:30|ms".into(),
        "app.load:10|g".into(),
        "app.load:+5|g".into(),
        "app.load:-3|g".into(),
        "app.temp:0|g".into(),
        "app.temp:-5|g".into(),
        "app.fresh:+4|g".into(),
        "app.frac:0.25|g".into(),
        "app.users:alice|s".into(),
        "app.users:bob|s".into(),
        "app.users:alice|s".into(),
        "app.users:carol|s".into(),
        "app.ids:1|s".into(),
        "app.ids:2|s".into(),
    ];
    // Multiples of 1/8: every sum and sum of squares exact in any order.
    for i in 0..200u64 {
        lines.push(format!(
            "api.latency:{}|ms",
            (i * 7919 % 1000) as f64 / 8.0 + 0.25
        ));
    }
    lines.join("\n")
}

/// statsd 0.9.0's timer metrics (`lib/process_metrics.js`, ported line for
/// line) of `values` (each line's value once) counted as `count` events
/// over a flush of `secs` seconds.
fn statsd_timer(values: &[f64], count: f64, secs: f64) -> std::collections::BTreeMap<String, f64> {
    let js_round = |x: f64| (x + 0.5).floor();
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let (min, max) = (v[0], v[n - 1]);
    let (mut cum, mut cum_sq) = (vec![min], vec![min * min]);
    for i in 1..n {
        cum.push(v[i] + cum[i - 1]);
        cum_sq.push(v[i] * v[i] + cum_sq[i - 1]);
    }
    let mut out = std::collections::BTreeMap::new();
    for pct in STATSD_PERCENTILES {
        let (mut k, mut sum, mut sum_sq, mut mean, mut bound) = (n, min, min * min, min, max);
        if n > 1 {
            k = js_round(pct / 100.0 * n as f64) as usize;
            if k == 0 {
                continue;
            }
            bound = v[k - 1];
            sum = cum[k - 1];
            sum_sq = cum_sq[k - 1];
            mean = sum / k as f64;
        }
        let clean = pct.to_string().replace('.', "_");
        out.insert(format!("count_{clean}"), k as f64);
        out.insert(format!("mean_{clean}"), mean);
        out.insert(format!("upper_{clean}"), bound);
        out.insert(format!("sum_{clean}"), sum);
        out.insert(format!("sum_squares_{clean}"), sum_sq);
    }
    let (sum, sum_sq) = (cum[n - 1], cum_sq[n - 1]);
    let mean = sum / n as f64;
    let diffs: f64 = v.iter().map(|x| (x - mean) * (x - mean)).sum();
    let mid = n / 2;
    let median = if n % 2 == 1 {
        v[mid]
    } else {
        (v[mid - 1] + v[mid]) / 2.0
    };
    for (leaf, value) in [
        ("std", (diffs / n as f64).sqrt()),
        ("upper", max),
        ("lower", min),
        ("count", count),
        ("count_ps", count / secs),
        ("sum", sum),
        ("sum_squares", sum_sq),
        ("mean", mean),
        ("median", median),
    ] {
        out.insert(leaf.to_owned(), value);
    }
    out
}

/// True for what statsd writes about itself, which Tally has no series
/// for: `statsd.numStats`, `stats.statsd.*` (its packet and line counts,
/// processing time, the Graphite backend's own figures),
/// `stats_counts.statsd.*` and the gauge `stats.gauges.statsd.timestamp_lag`.
fn statsd_internal(path: &str) -> bool {
    [
        "statsd.",
        "stats.statsd.",
        "stats_counts.statsd.",
        "stats.gauges.statsd.",
    ]
    .iter()
    .any(|p| path.starts_with(p))
}

/// How close Tally's value of a leaf must be to the one expected, relative:
/// exact (1e-9) but for the leaves `crates/tally/src/stats/graphite.rs`
/// states the sketch's accuracy for: `median`, `upper_P`, `mean_P` and
/// `sum_P` within its relative accuracy (1 %), `sum_squares_P` within about
/// twice it; those too are exact at the ends it states: a median of one or
/// two values, a percentile taking every value. `expected` holds the
/// timer's `count` and `count_P`.
fn tolerance(path: &str, expected: &std::collections::BTreeMap<String, f64>) -> f64 {
    let Some((timer, leaf)) = path
        .strip_prefix("stats.timers.")
        .and_then(|p| p.rsplit_once('.'))
    else {
        return 1e-9;
    };
    let count = expected[&format!("stats.timers.{timer}.count")];
    let pct = ["upper_", "mean_", "sum_squares_", "sum_"]
        .iter()
        .find_map(|p| leaf.strip_prefix(p))
        .filter(|p| p.starts_with(|c: char| c.is_ascii_digit()));
    match pct {
        Some(pct) if expected[&format!("stats.timers.{timer}.count_{pct}")] == count => 1e-9,
        Some(_) if leaf.starts_with("sum_squares_") => 0.02 + 0.0001,
        Some(_) => 0.01,
        None if leaf == "median" && count > 2.0 => 0.01,
        None => 1e-9,
    }
}

/// statsd's names, checked against statsd 0.9.0's own Graphite backend
/// (npm, `legacyNamespace`, percentiles 90 and 99.9, a 5 s flush) writing
/// to a capturing listener: the same datagram goes to statsd and to
/// Tally's statsd listener, and every name statsd writes (its own figures
/// aside) is a leaf Tally's find lists, with no leaf more, that render
/// answers for the slice at the flush interval's precision with statsd's
/// value: exactly, or within the sketch's stated accuracy.
///
/// Two differences are Tally's by design, and checked as such: a counter's
/// scaled count is a whole number (`1|c|@0.3` counts 3 where statsd
/// counts 3.33), and a sampled timer's value counts `round(1/rate)` times
/// in every leaf (an estimate of all the events, as its `count` is),
/// where statsd's leaves but `count` and `count_ps` take each sampled
/// value once.
async fn statsd_names_match_statsds_own_graphite_backend(kind: Kind) {
    let packet = statsd_packet();
    // statsd, flushing to the capture.
    let capture = tally_testkit::GraphiteCapture::start();
    let port = capture.port();
    let sent = packet.clone();
    let flush = tokio::task::spawn_blocking(move || {
        let daemon = tally_testkit::StatsdDaemon::start_with(&tally_testkit::StatsdOptions {
            flush_interval_ms: STATSD_FLUSH as u64 * 1000,
            graphite_port: Some(port),
            percent_threshold: Some(STATSD_PERCENTILES.to_vec()),
            ..Default::default()
        })
        .unwrap_or_else(|e| panic!("{e}"));
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        socket
            .send_to(sent.as_bytes(), ("127.0.0.1", daemon.port))
            .unwrap();
        let flush = capture.wait_for(std::time::Duration::from_secs(120), |f| {
            f.value("stats_counts.app.hits") == Some(21.0)
        });
        drop(daemon);
        flush.expect("statsd flushed the datagram to its Graphite backend within 120 s")
    })
    .await
    .unwrap();
    let written: std::collections::BTreeMap<String, f64> = flush
        .lines
        .iter()
        .map(|(p, v, _)| (p.clone(), v.parse().unwrap()))
        .collect();

    // Tally, the same datagram through its statsd listener's path.
    let (_fixture, tally) = open(kind, None).await;
    let writers = tally::server::statsd::Targets::of(&tally);
    let metrics = Metrics::default();
    tally::server::statsd::handle(packet.as_bytes(), &writers, &metrics);
    assert_eq!(metrics.statsd_rejected_total(), 0);
    tally.shutdown().await;
    let settings = GraphiteSettings {
        namespace: Namespace::Statsd,
        quantiles: vec![0.9, 0.999],
        ..GraphiteSettings::default()
    };
    let server = Server::start(&tally, &settings).await;

    // What Tally is to answer: statsd's values, but for the two differences.
    let mut expected = written.clone();
    assert_eq!(written["stats_counts.app.odd"], 1.0 / 0.3);
    expected.insert("stats_counts.app.odd".into(), 3.0);
    expected.insert("stats.app.odd".into(), 3.0 / STATSD_FLUSH as f64);
    let secs = STATSD_FLUSH as f64;
    let latencies: Vec<f64> = (0..200u64)
        .map(|i| (i * 7919 % 1000) as f64 / 8.0 + 0.25)
        .collect();
    for (timer, values, count) in [
        ("api.latency", latencies, 200.0),
        ("api.one", vec![42.5], 1.0),
        ("api.two", vec![3.0, 8.0], 2.0),
        ("api.sampled", vec![10.0, 20.0, 30.0], 5.0),
    ] {
        // The port is statsd: it gives what statsd wrote.
        for (leaf, value) in statsd_timer(&values, count, secs) {
            let path = format!("stats.timers.{timer}.{leaf}");
            let theirs = written
                .get(&path)
                .unwrap_or_else(|| panic!("statsd wrote no {path}"));
            assert!(
                (value - theirs).abs() <= 1e-9 * theirs.abs(),
                "{path}: the port gives {value}, statsd {theirs}"
            );
        }
    }
    // The sampled timer, as Tally weighs it: 10 and 20 twice each.
    for (leaf, value) in statsd_timer(&[10.0, 10.0, 20.0, 20.0, 30.0], 5.0, secs) {
        expected.insert(format!("stats.timers.api.sampled.{leaf}"), value);
    }
    assert_ne!(
        expected["stats.timers.api.sampled.sum"],
        written["stats.timers.api.sampled.sum"]
    );

    // Every name statsd wrote: a leaf of Tally's with statsd's value.
    let ours: Vec<&String> = written.keys().filter(|p| !statsd_internal(p)).collect();
    assert!(ours.len() > 60, "{ours:?}");
    for path in &ours {
        let found = server
            .json(&format!("/metrics/find?query={}", encode(path)))
            .await;
        assert_eq!(found.as_array().unwrap().len(), 1, "{path}: {found}");
        assert_eq!(
            (found[0]["id"].as_str(), found[0]["leaf"].as_i64()),
            (Some(path.as_str()), Some(1))
        );
        let answer = server.json(&url(path, "&from=-5min")).await;
        assert_eq!(targets(&answer), [path.as_str()], "{answer}");
        assert_eq!(
            answer[0]["datapoints"].as_array().unwrap().len(),
            60,
            "{answer}"
        );
        let points = present(&answer[0]);
        assert_eq!(points.len(), 1, "{path}: one slice holds it all: {answer}");
        let (value, at) = points[0];
        assert_eq!(at, NOW, "{path}");
        let want = expected[path.as_str()];
        let tol = tolerance(path, &expected);
        assert!(
            (value - want).abs() <= tol * want.abs() || (want == 0.0 && value.abs() <= 1e-12),
            "{path}: Tally {value}, expected {want} (statsd wrote {}), tolerance {tol}",
            written[path.as_str()]
        );
    }
    // ...and no leaf more: each branch statsd wrote into lists its leaves.
    let branches: std::collections::BTreeSet<&str> =
        ours.iter().map(|p| p.rsplit_once('.').unwrap().0).collect();
    for branch in branches {
        let found = server
            .json(&format!(
                "/metrics/find?query={}",
                encode(&format!("{branch}.*"))
            ))
            .await;
        let leaves: Vec<String> = nodes(&found)
            .into_iter()
            .filter(|(_, leaf)| *leaf)
            .map(|(n, _)| format!("{branch}.{n}"))
            .collect();
        let theirs: Vec<String> = ours
            .iter()
            .filter(|p| p.rsplit_once('.').unwrap().0 == branch)
            .map(|p| p.to_string())
            .collect();
        assert_eq!(leaves, theirs, "the leaves of {branch}");
    }
}
