//! The crate's answers against graphite-web 1.1.10's on the same data: each fixture under
//! `fixtures/` holds whisper-file contents, requests, and graphite-web's answers to them
//! (made by `oracle/scenarios.py` running graphite-web in-process); here the same data goes
//! into the in-memory store (whisper's ring semantics) and the same requests into
//! `Graphite`, compared as `common::fixture::compare` says. `live_graphite_web.rs` does the
//! same against a running graphite-web.

use crate::common;

use common::fixture::DATA;

async fn replay(name: &str, text: &str) {
    common::replay::replay(name, text, DATA).await;
}

macro_rules! fixture {
    ($name:ident) => {
        #[tokio::test]
        async fn $name() {
            replay(
                stringify!($name),
                include_str!(concat!("../fixtures/", stringify!($name), ".json")),
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
