//! The fixtures' data (`fixtures/data.json`) and requests (made by `oracle/scenarios.py`),
//! and the comparison of
//! this crate's answers with graphite-web's: status, content type, `Pragma` and
//! `Cache-Control`, and the body byte for byte or else as JSON values (object keys in any
//! order: tags are sorted here, in insertion order in graphite-web; numbers within 1e-9
//! relative). `/functions` entries compare without their descriptions (ours are our own).
#![allow(dead_code)]

use serde_json::Value as J;
use tally_graphite::{Answer, Browse, Graphite, Limits, parse_form};

use super::MemStore;

/// The data every fixture's requests read: `now`, the whisper files and bare directories.
pub const DATA: &str = include_str!("../../fixtures/data.json");

/// One whisper file of a fixture data set.
pub struct File<'a> {
    pub path: &'a str,
    /// Its archives' (step, points), finest first.
    pub archives: Vec<(i64, i64)>,
    /// Each archive's points written, (timestamp, value).
    pub points: Vec<Vec<(i64, f64)>>,
}

/// The files of a fixture data set (`files` of `fixtures/data.json`).
pub fn files(data: &J) -> Vec<File<'_>> {
    let array = |v: &J| v.as_array().unwrap().clone();
    data["files"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(path, file)| File {
            path,
            archives: array(&file["archives"])
                .iter()
                .map(|a| (a[0].as_i64().unwrap(), a[1].as_i64().unwrap()))
                .collect(),
            points: array(&file["data"])
                .iter()
                .map(|points| {
                    array(points)
                        .iter()
                        .map(|p| (p[0].as_i64().unwrap(), p[1].as_f64().unwrap()))
                        .collect()
                })
                .collect(),
        })
        .collect()
}

pub fn store_of(fixture: &J) -> MemStore {
    let mut store = MemStore::default();
    for file in files(fixture) {
        let rings = store.file(file.path, &file.archives);
        for (ring, points) in rings.iter_mut().zip(&file.points) {
            ring.write(points);
        }
    }
    for dir in fixture["dirs"].as_array().unwrap() {
        store.dir(dir.as_str().unwrap());
    }
    store
}

pub fn pairs(v: &J) -> Vec<(String, String)> {
    v.as_array()
        .map(|a| {
            a.iter()
                .map(|p| {
                    (
                        p[0].as_str().unwrap().to_owned(),
                        p[1].as_str().unwrap().to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// JSON text to a value, graphite-web's `1e9999` read as a marker (serde_json refuses it).
pub fn parse_json(text: &str) -> Option<J> {
    serde_json::from_str(&text.replace("1e9999", "\"+inf\"")).ok()
}

pub fn same_json(a: &J, b: &J) -> bool {
    match (a, b) {
        (J::Number(x), J::Number(y)) => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            if x == 0.0 || y == 0.0 {
                (x - y).abs() <= 1e-9
            } else {
                ((x - y) / y).abs() <= 1e-9
            }
        }
        (J::Array(x), J::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same_json(a, b))
        }
        (J::Object(x), J::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| same_json(v, w)))
        }
        _ => a == b,
    }
}

/// The pairs a request's handler sees: its query parameters, then its form body's.
pub fn request_params(request: &J) -> Vec<(String, String)> {
    let mut params = pairs(&request["params"]);
    if let Some(body) = request["body"].as_str() {
        params.extend(parse_form(body.as_bytes()));
    }
    params
}

/// This crate's answer to a fixture request (not `/functions`).
pub async fn answer(graphite: &Graphite, store: &MemStore, now: i64, request: &J) -> Answer {
    let params = request_params(request);
    let accept = request["accept"].as_str();
    let limits = Limits::default();
    let endpoint = match request["path"].as_str().unwrap() {
        "/render/" => return graphite.render(store, &params, now, &limits).await,
        "/metrics/find/" => Browse::Find,
        "/metrics/expand/" => Browse::Expand,
        other => panic!("no route {other}"),
    };
    graphite
        .browse(endpoint, store, &params, accept, &limits)
        .await
}

/// Compares an answer with graphite-web's (`{status, headers, body}`); `Ok(true)` when the
/// body is the same byte for byte.
/// Whether the answer has the expected status and content type; if not,
/// both, with the bodies.
fn same_status_and_type(answer: &Answer, expected: &J) -> Result<(), String> {
    let want_status = expected["status"].as_u64().unwrap() as u16;
    let want_type = expected["headers"]["Content-Type"].as_str().unwrap();
    if answer.status != want_status || answer.content_type != want_type {
        return Err(format!(
            "want {want_status} {want_type} {}\n  got {} {} {}",
            expected["body"].as_str().unwrap(),
            answer.status,
            answer.content_type,
            String::from_utf8_lossy(&answer.body)
        ));
    }
    Ok(())
}

pub fn compare(answer: &Answer, expected: &J) -> Result<bool, String> {
    same_status_and_type(answer, expected)?;
    let body = String::from_utf8_lossy(&answer.body).into_owned();
    let want_body = expected["body"].as_str().unwrap();
    for header in ["Pragma", "Cache-Control"] {
        let want = expected["headers"][header].as_str();
        let got = answer
            .headers
            .iter()
            .find(|(h, _)| *h == header)
            .map(|(_, v)| v.as_str());
        if want != got {
            return Err(format!("header {header}: want {want:?}, got {got:?}"));
        }
    }
    if body == want_body {
        return Ok(true);
    }
    match (parse_json(&body), parse_json(want_body)) {
        (Some(a), Some(b)) if same_json(&a, &b) => Ok(false),
        _ => Err(format!("\n  want {want_body}\n  got  {body}")),
    }
}

/// `/functions` answers: the same status and content type, and each function registered
/// here described as graphite-web describes it (name, signature, module, group, params),
/// apart from the description text, which is this project's own.
pub fn compare_functions(
    graphite: &Graphite,
    path: &str,
    params: &[(String, String)],
    expected: &J,
) -> Result<(), String> {
    let answer = match path.strip_prefix("/functions/") {
        Some("") | None => graphite.functions(params),
        Some(name) => graphite.function(name, params),
    };
    same_status_and_type(&answer, expected)?;
    let body = String::from_utf8_lossy(&answer.body).into_owned();
    let want = parse_json(expected["body"].as_str().unwrap()).ok_or("expected body is not JSON")?;
    let got = parse_json(&body).ok_or_else(|| format!("body is not JSON: {body}"))?;
    let strip = |v: &J| {
        let mut v = v.clone();
        if let Some(o) = v.as_object_mut() {
            o.remove("description");
        }
        v
    };
    let check = |want: &J, got: &J| -> Result<(), String> {
        let (w, g) = (strip(want), strip(got));
        if same_json(&w, &g) {
            Ok(())
        } else {
            Err(format!("want {w}\n  got  {g}"))
        }
    };
    if answer.status != 200 || got.get("name").is_some() {
        return if answer.status == 200 {
            check(&want, &got)
        } else if want == got {
            Ok(())
        } else {
            Err(format!("want {want}, got {got}"))
        };
    }
    let grouped = params.iter().any(|(k, v)| k == "grouped" && v == "true");
    let entries: Vec<(String, &J)> = if grouped {
        got.as_object()
            .unwrap()
            .iter()
            .flat_map(|(g, fs)| {
                fs.as_object()
                    .unwrap()
                    .iter()
                    .map(move |(n, f)| (format!("{g}/{n}"), f))
            })
            .collect()
    } else {
        got.as_object()
            .unwrap()
            .iter()
            .map(|(n, f)| (n.clone(), f))
            .collect()
    };
    if entries.is_empty() {
        return Err("no functions listed".to_owned());
    }
    for (key, entry) in entries {
        let want_entry = key.split('/').fold(&want, |v, part| &v[part]);
        check(want_entry, entry).map_err(|e| format!("{key}: {e}"))?;
    }
    Ok(())
}
