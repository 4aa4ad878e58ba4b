//! The acceptance test of the transform, moving-window and time functions: their data
//! (`fixtures/transform_data.json`) written to whisper files for a running graphite-web
//! 1.1.10 (the test harness's `tally_testkit::GraphiteWeb`), every request of their fixtures
//! sent to it and this crate's answer compared with what it answers now. Needs the reference
//! virtual environment `scripts/test` installs; without it the harness panics saying how to
//! install it.

use crate::common;

use common::replay::compare_live;

#[tokio::test(flavor = "multi_thread")]
async fn transforms_answer_as_a_running_graphite_web_does() {
    compare_live(
        include_str!("../fixtures/transform_data.json"),
        &[
            (
                "transform_points",
                include_str!("../fixtures/transform_points.json"),
            ),
            (
                "transform_moving",
                include_str!("../fixtures/transform_moving.json"),
            ),
            (
                "transform_time",
                include_str!("../fixtures/transform_time.json"),
            ),
            (
                "transform_errors",
                include_str!("../fixtures/transform_errors.json"),
            ),
            (
                "transform_mixed",
                include_str!("../fixtures/transform_mixed.json"),
            ),
            (
                "transform_higher",
                include_str!("../fixtures/transform_higher.json"),
            ),
        ],
    )
    .await;
}
