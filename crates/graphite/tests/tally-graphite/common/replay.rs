//! Running fixtures: replaying a fixture's requests against this crate over its data and
//! comparing with the answers recorded from graphite-web (`replay`), and sending the same
//! requests to a running graphite-web holding the same data (`compare_live`).
//!
//! A request marked `differs` is one where graphite-web fails (a 500) or uses a value its
//! validation refused, and this crate answers a 400 on purpose: replayed, it must get that
//! 400; it is not sent to a running graphite-web.
#![allow(dead_code)]

use serde_json::Value as J;
use tally_graphite::Graphite;
use tally_testkit::graphite_web::URL_PREFIX;
use tally_testkit::{GraphiteWeb, WhisperData, WhisperSeries, http};

use super::fixture::{answer, compare, compare_functions, files, request_params, store_of};

/// One test per fixture named: `fixtures/<name>.json` replayed ([`replay`]) over `$data`
/// (a `fixtures/*data.json` text).
macro_rules! fixture_tests {
    ($data:expr; $($name:ident),+ $(,)?) => {
        $(
            #[tokio::test]
            async fn $name() {
                $crate::common::replay::replay(
                    stringify!($name),
                    include_str!(concat!("../fixtures/", stringify!($name), ".json")),
                    $data,
                )
                .await;
            }
        )+
    };
}
pub(crate) use fixture_tests;

/// Replays fixture `name` (its JSON `text`) over `data` (a `fixtures/*data.json` text) and
/// fails listing every request whose answer differs from graphite-web's.
pub async fn replay(name: &str, text: &str, data: &str) {
    let fixture: J = serde_json::from_str(text).unwrap();
    let data: J = serde_json::from_str(data).unwrap();
    let now = data["now"].as_i64().unwrap();
    let store = store_of(&data);
    let graphite = Graphite::new();
    let mut failures = Vec::new();
    let mut exact = 0;
    for (i, request) in fixture["requests"].as_array().unwrap().iter().enumerate() {
        let path = request["path"].as_str().unwrap();
        let label = format!("{name}[{i}] {path} {:?}", request_params(request));
        let differs = request["differs"].as_str();
        if path.starts_with("/functions") {
            if differs.is_none()
                && let Err(e) = compare_functions(
                    &graphite,
                    path,
                    &request_params(request),
                    &request["expected"],
                )
            {
                failures.push(format!("{label}: {e}"));
            }
            continue;
        }
        let answer = answer(&graphite, &store, now, request).await;
        if let Some(reason) = differs {
            if answer.status != 400 {
                failures.push(format!(
                    "{label}: want our 400 ({reason}), got {}",
                    answer.status
                ));
            }
            continue;
        }
        match compare(&answer, &request["expected"]) {
            Ok(true) => exact += 1,
            Ok(false) => {}
            Err(e) => failures.push(format!("{label}: {e}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {name} differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
    println!("{name}: {exact} answers byte for byte, the others equal as JSON");
}

/// A fixture data set's files as whisper files for the harness's graphite-web.
pub fn whisper_data(data: &J) -> WhisperData {
    let mut whisper = WhisperData::new();
    for file in files(data) {
        let archives: Vec<(u32, u32)> = file
            .archives
            .iter()
            .map(|&(step, points)| (u32::try_from(step).unwrap(), u32::try_from(points).unwrap()))
            .collect();
        let mut series = WhisperSeries::new(file.path, &archives);
        for (archive, points) in file.points.iter().enumerate() {
            for &(t, v) in points {
                series = series.point(archive, t, v);
            }
        }
        whisper = whisper.with(series);
    }
    whisper
}

/// graphite-web's answer to a fixture request, in the fixtures' `{status, headers, body}`.
pub fn live(server: &GraphiteWeb, request: &J) -> J {
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

/// Percent-encoding of a query parameter.
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

/// Starts the harness's graphite-web over `data` (a `fixtures/*data.json` text), sends it
/// every request of `fixtures` (name, JSON text) but those marked `differs`, and fails
/// listing every one where this crate answers otherwise than it does now.
pub async fn compare_live(data: &str, fixtures: &[(&str, &str)]) {
    let data: J = serde_json::from_str(data).unwrap();
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
    for (name, text) in fixtures {
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
