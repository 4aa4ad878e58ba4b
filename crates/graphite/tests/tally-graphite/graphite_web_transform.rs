//! The transform, moving-window and time functions against graphite-web 1.1.10's answers on
//! their own data (`fixtures/transform_data.json`: gauges with gaps, counters with resets and
//! wraps, runs of nulls, several steps, many hosts), as `oracle/scenarios_transform.py`
//! recorded them; `live_graphite_web_transform.rs` sends the same requests to a running
//! graphite-web.

use crate::common;

use common::replay::fixture_tests;

const DATA: &str = include_str!("../fixtures/transform_data.json");

fixture_tests!(
    DATA;
    transform_points,
    transform_moving,
    transform_time,
    transform_errors,
    transform_mixed,
    transform_higher,
);
