//! The crate's answers against graphite-web 1.1.10's on the same data: each fixture under
//! `fixtures/` holds whisper-file contents, requests, and graphite-web's answers to them
//! (made by `oracle/scenarios.py` running graphite-web in-process); here the same data goes
//! into the in-memory store (whisper's ring semantics) and the same requests into
//! `Graphite`, compared as `common::fixture::compare` says. `live_graphite_web.rs` does the
//! same against a running graphite-web.

use crate::common;

use common::fixture::DATA;
use common::replay::fixture_tests;

fixture_tests!(
    DATA;
    render_basics,
    render_max_data_points,
    functions_phase2,
    render_errors,
    find,
    grafana,
    functions,
    functions_combine,
    functions_filter,
    functions_graph,
    functions_math,
    functions_select,
    functions_forecast,
);
