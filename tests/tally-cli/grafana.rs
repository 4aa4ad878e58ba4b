//! Grafana's Graphite data source against `tally serve`, end to end: the
//! exact requests Grafana 11 sends (a form-posted render with the
//! `aliasSub(<target>, "(^.*$)", "\1 A")` wrapper and epoch times, the
//! `constantLine(100)` health check, `metrics/find` with a raw body,
//! `/functions`, `/version`), byte for byte over a socket, against the real
//! binary on its embedded store, after counters, gauges, sets and
//! statistics were written through the JSON API.

use crate::support;

use std::net::SocketAddr;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;
use tally_testkit::http;

/// Grafana's request headers (its backend's HTTP client).
const ACCEPT: (&str, &str) = ("Accept", "application/json, text/plain, */*");
const AGENT: (&str, &str) = ("User-Agent", "Grafana/11.3.0");
const FORM: (&str, &str) = ("Content-Type", "application/x-www-form-urlencoded");

/// Go's `url.QueryEscape`, as Grafana's backend encodes form values.
fn go_escape(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            b' ' => "+".to_owned(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Go's `url.Values.Encode`: keys sorted, each value escaped.
fn go_form(pairs: &[(&str, &str)]) -> String {
    let mut pairs = pairs.to_vec();
    pairs.sort_by(|a, b| a.0.cmp(b.0));
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", go_escape(k), go_escape(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// A POST of a form body from Grafana to `target`.
fn post_form(addr: SocketAddr, target: &str, body: &[u8]) -> http::Response {
    http::request(addr, "POST", target, &[ACCEPT, AGENT, FORM], body).unwrap()
}

struct Grafana {
    addr: SocketAddr,
    from: String,
    until: String,
}

impl Grafana {
    /// A panel over the last hour as Grafana 11 posts it: the target
    /// wrapped to carry the query's refId `A`, epoch seconds one second
    /// wider on each side, maxDataPoints from the panel's width.
    fn panel(&self, target: &str) -> Value {
        let wrapped = format!("aliasSub({target}, \"(^.*$)\", \"\\1 A\")");
        let body = go_form(&[
            ("target", &wrapped),
            ("from", &self.from),
            ("until", &self.until),
            ("format", "json"),
            ("maxDataPoints", "960"),
        ]);
        let r = post_form(self.addr, "/graphite/render", body.as_bytes());
        assert_eq!(r.status, 200, "{target}: {}", r.text());
        assert_eq!(r.content_type(), "application/json");
        serde_json::from_slice(&r.body).unwrap()
    }
}

/// The non-null values of a render's one series named `name`.
fn values(answer: &Value, name: &str) -> Vec<f64> {
    let series = answer.as_array().unwrap();
    assert_eq!(series.len(), 1, "{answer}");
    assert_eq!(series[0]["target"], name, "{answer}");
    series[0]["datapoints"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p[0].as_f64())
        .collect()
}

fn curl_post(url: &str, body: &str) {
    let out = std::process::Command::new("curl")
        .args([
            "-sS",
            "-f",
            "-X",
            "POST",
            "-H",
            "Content-Type: application/json",
        ])
        .args(["-d", body, url])
        .output()
        .expect("run curl (scripts/test installs it)");
    assert!(out.status.success(), "{url} {body}: {out:?}");
}

#[test]
fn grafana_charts_every_kind() {
    let dir = tempfile::tempdir().unwrap();
    let s = support::serve(
        &["--data-dir", dir.path().to_str().unwrap()],
        &["--write-mode", "exact"],
    );
    let v1 = |path: &str| format!("{}/v1/{path}", s.base);
    for _ in 0..3 {
        curl_post(&v1("counters/grafana.hits/incr"), "{}");
    }
    curl_post(&v1("gauges/grafana.depth"), r#"{"value": 0.5}"#);
    curl_post(&v1("sets/grafana.users"), r#"{"members": ["a", "b", "c"]}"#);
    for v in [10, 20, 30] {
        curl_post(
            &v1("stats/grafana.lat/record"),
            &format!(r#"{{"value": {v}}}"#),
        );
    }
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let addr: SocketAddr = s.base.trim_start_matches("http://").parse().unwrap();
    let g = Grafana {
        addr,
        from: (now - 3600 - 1).to_string(),
        until: (now + 1).to_string(),
    };

    // The data source's "Save & test", its version and function list.
    let r = http::request(addr, "GET", "/graphite/version", &[ACCEPT, AGENT], b"").unwrap();
    assert_eq!((r.status, r.text().trim()), (200, "1.1.10"));
    let r = http::request(addr, "GET", "/graphite/functions", &[ACCEPT, AGENT], b"").unwrap();
    assert_eq!(r.status, 200);
    let text = r.text().replace(": 1e9999", ": 1e308");
    let functions: Value = serde_json::from_str(&text).unwrap();
    for name in [
        "aliasSub",
        "sumSeries",
        "summarize",
        "constantLine",
        "mergedQuantile",
    ] {
        assert_eq!(functions[name]["name"], name, "{name} is not listed");
    }
    assert_eq!(functions["mergedQuantile"]["group"], "Tally");
    let health = go_form(&[
        ("target", "constantLine(100)"),
        ("from", &g.from),
        ("until", &g.until),
        ("format", "json"),
    ]);
    let r = post_form(addr, "/graphite/render", health.as_bytes());
    assert_eq!(r.status, 200, "{}", r.text());
    let answer: Value = serde_json::from_slice(&r.body).unwrap();
    let points = answer[0]["datapoints"].as_array().unwrap();
    assert_eq!(points.len(), 3, "{answer}");
    assert!(points.iter().all(|p| p[0] == 100.0), "{answer}");

    // The query editor lists names with a raw, unencoded body.
    let r = post_form(
        addr,
        &format!("/graphite/metrics/find?from={}&until={}", g.from, g.until),
        b"query=grafana.{hits,lat,depth}",
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let nodes: Value = serde_json::from_slice(&r.body).unwrap();
    let listed: Vec<(&str, i64)> = nodes
        .as_array()
        .unwrap()
        .iter()
        .map(|n| (n["text"].as_str().unwrap(), n["leaf"].as_i64().unwrap()))
        .collect();
    assert_eq!(listed, [("lat", 0), ("depth", 1), ("hits", 1)], "{nodes}");
    let r = post_form(addr, "/graphite/metrics/find", b"query=grafana.lat.*");
    let leaves: Value = serde_json::from_slice(&r.body).unwrap();
    let texts: Vec<&str> = leaves
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["text"].as_str().unwrap())
        .collect();
    assert_eq!(
        texts,
        [
            "count", "max", "mean", "min", "p50", "p90", "p99", "stddev", "sum"
        ]
    );

    // Panels over every kind, named with the refId Grafana splits off.
    let hits = values(&g.panel("grafana.hits"), "grafana.hits A");
    assert_eq!(hits.iter().sum::<f64>(), 3.0, "{hits:?}");
    assert_eq!(values(&g.panel("grafana.depth"), "grafana.depth A"), [0.5]);
    assert_eq!(values(&g.panel("grafana.users"), "grafana.users A"), [3.0]);
    let count = values(&g.panel("grafana.lat.count"), "grafana.lat.count A");
    assert_eq!(count.iter().sum::<f64>(), 3.0, "{count:?}");
    let max = values(&g.panel("grafana.lat.max"), "grafana.lat.max A");
    assert_eq!(max.iter().cloned().fold(f64::MIN, f64::max), 30.0);
    let p99 = values(
        &g.panel("mergedQuantile(grafana.lat.count, 0.99, \"1h\")"),
        "mergedQuantile(grafana.lat, 0.99, \"1h\") A",
    );
    assert!(p99.contains(&30.0), "{p99:?}");
    let sum = values(
        &g.panel("sumSeries(grafana.{hits,users})"),
        "sumSeries(grafana.{hits,users}) A",
    );
    assert_eq!(sum.iter().sum::<f64>(), 6.0, "{sum:?}");

    // A target that does not parse, and bad times, answer graphite-web's 400.
    for body in [
        go_form(&[("target", "sumSeries(grafana.hits"), ("format", "json")]),
        go_form(&[
            ("target", "grafana.hits"),
            ("from", "-5m"),
            ("format", "json"),
        ]),
        go_form(&[
            ("target", "grafana.hits"),
            ("from", "-1h"),
            ("until", "-1h"),
            ("format", "json"),
        ]),
    ] {
        let r = post_form(addr, "/graphite/render", body.as_bytes());
        assert_eq!(r.status, 400, "{body}: {}", r.text());
        assert!(
            r.content_type().starts_with("text/html"),
            "{}",
            r.content_type()
        );
        assert!(r.text().starts_with("Invalid parameters ("), "{}", r.text());
    }
}
