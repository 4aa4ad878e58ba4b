//! The acceptance test: the fixtures' data written to whisper files for a running
//! graphite-web 1.1.10 (the test harness's reference Graphite, `tally_testkit::GraphiteWeb`),
//! every fixture request sent to it as bytes, and this crate's answer over the in-memory
//! store compared with what it answers now (as `common::fixture::compare` says). Needs the
//! reference virtual environment `scripts/test` installs; without it the harness panics
//! saying how to install it.

mod common;

use common::fixture::{DATA, answer, compare, compare_functions, request_params, store_of};
use serde_json::Value as J;
use tally_graphite::Graphite;
use tally_testkit::graphite_web::URL_PREFIX;
use tally_testkit::{GraphiteWeb, WhisperData, WhisperSeries, http};

const FIXTURES: &[(&str, &str)] = &[
    ("render_basics", include_str!("fixtures/render_basics.json")),
    (
        "render_max_data_points",
        include_str!("fixtures/render_max_data_points.json"),
    ),
    (
        "functions_phase2",
        include_str!("fixtures/functions_phase2.json"),
    ),
    ("render_errors", include_str!("fixtures/render_errors.json")),
    ("find", include_str!("fixtures/find.json")),
    ("functions", include_str!("fixtures/functions.json")),
    ("grafana", include_str!("fixtures/grafana.json")),
    (
        "functions_combine",
        include_str!("fixtures/functions_combine.json"),
    ),
    (
        "functions_filter",
        include_str!("fixtures/functions_filter.json"),
    ),
];

fn whisper_data(fixture: &J) -> WhisperData {
    let mut data = WhisperData::new();
    for (path, file) in fixture["files"].as_object().unwrap() {
        let archives: Vec<(u32, u32)> = file["archives"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| (a[0].as_u64().unwrap() as u32, a[1].as_u64().unwrap() as u32))
            .collect();
        let mut series = WhisperSeries::new(path.as_str(), &archives);
        for (archive, points) in file["data"].as_array().unwrap().iter().enumerate() {
            for p in points.as_array().unwrap() {
                series = series.point(archive, p[0].as_i64().unwrap(), p[1].as_f64().unwrap());
            }
        }
        data = data.with(series);
    }
    data
}

/// graphite-web's answer to a fixture request, in the fixtures' `{status, headers, body}`.
fn live(server: &GraphiteWeb, request: &J) -> J {
    let path = request["path"].as_str().unwrap().trim_end_matches('/');
    let query: Vec<String> = request["params"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            format!(
                "{}={}",
                encode(p[0].as_str().unwrap()),
                encode(p[1].as_str().unwrap())
            )
        })
        .collect();
    let mut target = format!("{URL_PREFIX}{path}");
    if !query.is_empty() {
        target = format!("{target}?{}", query.join("&"));
    }
    let mut headers = Vec::new();
    if let Some(accept) = request["accept"].as_str() {
        headers.push(("Accept", accept));
    }
    let response = match request["body"].as_str() {
        Some(body) => {
            headers.push(("Content-Type", "application/x-www-form-urlencoded"));
            http::request(server.addr(), "POST", &target, &headers, body.as_bytes())
        }
        None => http::request(server.addr(), "GET", &target, &headers, b""),
    }
    .unwrap();
    let mut head = serde_json::Map::new();
    for name in ["Content-Type", "Pragma", "Cache-Control"] {
        if let Some(v) = response.header(name) {
            head.insert(name.to_owned(), J::String(v.to_owned()));
        }
    }
    serde_json::json!({"status": response.status, "headers": head, "body": response.text()})
}

fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn answers_as_a_running_graphite_web_does() {
    let data: J = serde_json::from_str(DATA).unwrap();
    let server = GraphiteWeb::start(&whisper_data(&data));
    for dir in data["dirs"].as_array().unwrap() {
        let path: std::path::PathBuf = dir.as_str().unwrap().split('.').collect();
        std::fs::create_dir_all(server.whisper_dir().join(path)).unwrap();
    }
    let graphite = Graphite::new();
    let store = store_of(&data);
    let now = data["now"].as_i64().unwrap();
    let mut failures = Vec::new();
    let mut compared = 0;
    for (name, text) in FIXTURES {
        let fixture: J = serde_json::from_str(text).unwrap();
        for (i, request) in fixture["requests"].as_array().unwrap().iter().enumerate() {
            if request["differs"].is_string() {
                continue;
            }
            let expected = tokio::task::block_in_place(|| live(&server, request));
            let path = request["path"].as_str().unwrap();
            let label = format!("{name}[{i}] {path} {:?}", request_params(request));
            let result = if path.starts_with("/functions") {
                compare_functions(&graphite, path, &request_params(request), &expected)
            } else {
                compare(&answer(&graphite, &store, now, request).await, &expected).map(|_| ())
            };
            compared += 1;
            if let Err(e) = result {
                failures.push(format!("{label}: {e}"));
            }
        }
    }
    println!("{compared} requests compared with a running graphite-web");
    assert!(
        failures.is_empty(),
        "{} of {compared} differ from graphite-web:\n{}\n--- graphite-web's log:\n{}",
        failures.len(),
        failures.join("\n"),
        server.logs()
    );
}
