//! The transform, moving-window and time functions against graphite-web 1.1.10's answers on
//! their own data (`fixtures/transform_data.json`: gauges with gaps, counters with resets and
//! wraps, runs of nulls, several steps, many hosts), as `oracle/scenarios_transform.py`
//! recorded them; `live_graphite_web_transform.rs` sends the same requests to a running
//! graphite-web.

use crate::common;

use common::replay::replay;

const DATA: &str = include_str!("../fixtures/transform_data.json");

macro_rules! fixture {
    ($name:ident) => {
        #[tokio::test]
        async fn $name() {
            replay(
                stringify!($name),
                include_str!(concat!("../fixtures/", stringify!($name), ".json")),
                DATA,
            )
            .await;
        }
    };
}

fixture!(transform_points);
fixture!(transform_moving);
fixture!(transform_time);
fixture!(transform_errors);
fixture!(transform_mixed);
