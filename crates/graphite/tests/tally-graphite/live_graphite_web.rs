//! The acceptance test: the fixtures' data written to whisper files for a running
//! graphite-web 1.1.10 (the test harness's reference Graphite, `tally_testkit::GraphiteWeb`),
//! every fixture request sent to it as bytes, and this crate's answer over the in-memory
//! store compared with what it answers now (as `common::fixture::compare` says). Needs the
//! reference virtual environment `scripts/test` installs; without it the harness panics
//! saying how to install it.

use crate::common;

use common::fixture::DATA;
use common::replay::compare_live;

const FIXTURES: &[(&str, &str)] = &[
    (
        "render_basics",
        include_str!("../fixtures/render_basics.json"),
    ),
    (
        "render_max_data_points",
        include_str!("../fixtures/render_max_data_points.json"),
    ),
    (
        "functions_phase2",
        include_str!("../fixtures/functions_phase2.json"),
    ),
    (
        "render_errors",
        include_str!("../fixtures/render_errors.json"),
    ),
    ("find", include_str!("../fixtures/find.json")),
    ("functions", include_str!("../fixtures/functions.json")),
    ("grafana", include_str!("../fixtures/grafana.json")),
    (
        "functions_combine",
        include_str!("../fixtures/functions_combine.json"),
    ),
    (
        "functions_filter",
        include_str!("../fixtures/functions_filter.json"),
    ),
    (
        "functions_graph",
        include_str!("../fixtures/functions_graph.json"),
    ),
    (
        "functions_math",
        include_str!("../fixtures/functions_math.json"),
    ),
    (
        "functions_select",
        include_str!("../fixtures/functions_select.json"),
    ),
    (
        "functions_forecast",
        include_str!("../fixtures/functions_forecast.json"),
    ),
];

#[tokio::test(flavor = "multi_thread")]
async fn answers_as_a_running_graphite_web_does() {
    compare_live(DATA, FIXTURES).await;
}
