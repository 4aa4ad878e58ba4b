//! The crate's answers against graphite-web 1.1.10's on the same data: each fixture under
//! `fixtures/` holds whisper-file contents, requests, and graphite-web's answers to them
//! (made by `oracle/scenarios.py` running graphite-web in-process); here the same data goes
//! into the in-memory store (whisper's ring semantics) and the same requests into
//! `Graphite`, compared as `common::fixture::compare` says. `live_graphite_web.rs` does the
//! same against a running graphite-web.

mod common;

use common::fixture::{DATA, answer, compare, compare_functions, request_params, store_of};
use serde_json::Value as J;
use tally_graphite::Graphite;

async fn replay(name: &str, text: &str) {
    let fixture: J = serde_json::from_str(text).unwrap();
    let data: J = serde_json::from_str(DATA).unwrap();
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
            // A documented difference: graphite-web fails (500) where this crate answers 400.
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

macro_rules! fixture {
    ($name:ident) => {
        #[tokio::test]
        async fn $name() {
            replay(
                stringify!($name),
                include_str!(concat!("fixtures/", stringify!($name), ".json")),
            )
            .await;
        }
    };
}

fixture!(render_basics);
fixture!(render_max_data_points);
fixture!(functions_phase2);
fixture!(render_errors);
fixture!(find);
fixture!(grafana);
fixture!(functions);
fixture!(functions_combine);
fixture!(functions_filter);
