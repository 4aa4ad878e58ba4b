//! The transform, moving-window and time functions where this crate chooses its own answer
//! (graphite-web's cannot be had or is a failure): piped calls, timeShift's DST keyword,
//! bucket counts past the point limit, intervals and `timeFunction` steps of zero or less;
//! and no panic on any arguments, of these functions and of every registered one.

use crate::common;

use common::MemStore;
use common::fixture::store_of;
use serde_json::Value as J;
use tally_graphite::{Answer, Graphite, Limits};

const DATA: &str = include_str!("../fixtures/transform_data.json");
const NOW: i64 = 1_700_000_000;

/// The fixtures' data in the in-memory store, read once.
fn store() -> &'static MemStore {
    static STORE: std::sync::OnceLock<MemStore> = std::sync::OnceLock::new();
    STORE.get_or_init(|| store_of(&serde_json::from_str(DATA).unwrap()))
}

/// The parameters of a JSON render of `target` from `from` at `NOW`.
fn render_params(target: &str, from: &str) -> Vec<(String, String)> {
    [
        ("target", target),
        ("from", from),
        ("now", "1700000000"),
        ("format", "json"),
    ]
    .iter()
    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
    .collect()
}

async fn render_with(store: &MemStore, target: &str, from: &str, limits: &Limits) -> Answer {
    let params = render_params(target, from);
    Graphite::new().render(store, &params, NOW, limits).await
}

async fn render(target: &str, from: &str) -> Answer {
    render_with(store(), target, from, &Limits::default()).await
}

fn json(answer: &Answer) -> J {
    assert_eq!(answer.status, 200, "{}", common::text(answer));
    serde_json::from_slice(&answer.body).unwrap()
}

/// `answer` (to `target`) is a 400 whose text holds `words`.
fn assert_refused(answer: &Answer, target: &str, words: &str) {
    assert_eq!(answer.status, 400, "{target}: {}", common::text(answer));
    assert!(
        common::text(answer).contains(words),
        "{target}: {}",
        common::text(answer)
    );
}

/// A piped call is the nested call here, for the functions that evaluate their argument
/// again too (graphite-web re-evaluates only the first expression of the pipe there, having
/// consumed the piped calls: `a|scale(2)|movingAverage(3)` averages `a` unscaled).
#[tokio::test]
async fn a_pipe_into_a_re_evaluating_function_is_the_nested_call() {
    for (piped, nested) in [
        (
            "tx.gauge.a|scale(2)|movingAverage(3)",
            "movingAverage(scale(tx.gauge.a,2),3)",
        ),
        (
            "tx.gauge.a|offset(1)|timeShift(\"1min\")",
            "timeShift(offset(tx.gauge.a,1),\"1min\")",
        ),
        (
            "tx.gauge.a|absolute()|hitcount(\"1min\", true)",
            "hitcount(absolute(tx.gauge.a),\"1min\",true)",
        ),
    ] {
        let (a, b) = (render(piped, "-5min").await, render(nested, "-5min").await);
        assert_eq!(json(&a), json(&b), "{piped} vs {nested}");
    }
    let scaled = json(&render("tx.gauge.a|scale(2)|movingAverage(3)", "-5min").await);
    assert_eq!(scaled[0]["target"], "movingAverage(scale(tx.gauge.a,2),3)");
}

/// `/functions` names timeShift's last parameter `alignDst` (graphite-web's list; its Python
/// takes `alignDST` and fails on `alignDst=`): that keyword is the one taken here, with no
/// effect in UTC; `alignDST=` is an unexpected keyword.
#[tokio::test]
async fn time_shift_takes_align_dst_by_its_listed_name() {
    let plain = json(&render("timeShift(tx.gauge.a, \"1h\")", "-10min").await);
    let keyed = json(&render("timeShift(tx.gauge.a, \"1h\", alignDst=true)", "-10min").await);
    assert_eq!(plain, keyed);
    let python_name = render("timeShift(tx.gauge.a, \"1h\", alignDST=true)", "-10min").await;
    assert_eq!(python_name.status, 400);
    common::assert_body_contains(&python_name, "Unexpected key word arguments: alignDST");
}

/// summarize and hitcount refuse, before allocating them, more buckets than an answer may
/// hold points.
#[tokio::test]
async fn buckets_past_the_point_limit_are_refused() {
    let limits = Limits {
        max_points: 100,
        ..Limits::default()
    };
    let store = store();
    for target in [
        "summarize(tx.gauge.a, \"1s\")",
        "hitcount(tx.gauge.a, \"1s\")",
        "timeFunction(\"t\", 1)",
        "time(\"t\", 30)",
    ] {
        let answer = render_with(store, target, "-1h", &limits).await;
        assert_refused(&answer, target, "point limit");
    }
    let fine = render_with(store, "summarize(tx.gauge.a, \"1min\")", "-1h", &limits).await;
    assert_eq!(fine.status, 200, "{}", common::text(&fine));
}

/// Intervals of zero or less: graphite-web divides by zero (a 500) or, summarizing by a
/// negative interval, never returns; here a 400 naming the interval, once there is a series.
#[tokio::test]
async fn intervals_of_zero_or_less_are_refused() {
    for target in [
        "summarize(tx.gauge.a, \"-1h\")",
        "summarize(tx.gauge.a, \"0min\", \"avg\", true)",
        "hitcount(tx.gauge.a, \"-5min\")",
        "hitcount(tx.gauge.a, \"0s\", true)",
    ] {
        let answer = render(target, "-10min").await;
        assert_refused(&answer, target, "interval longer than zero");
    }
    assert_eq!(
        json(&render("summarize(nope.*, \"-1h\")", "-10min").await),
        J::Array(vec![])
    );
}

/// `timeFunction` (`time`) with a step of zero or less: graphite-web's loop never ends; here a
/// 400 naming the step, and a positive step still answers.
#[tokio::test]
async fn time_function_steps_of_zero_or_less_are_refused() {
    for target in [
        "timeFunction(\"t\", 0)",
        "time(\"t\", -60)",
        "timeFunction(\"t\", step=-1)",
    ] {
        let answer = render(target, "-10min").await;
        assert_refused(&answer, target, "step above 0 seconds");
    }
    let fine = json(&render("time(\"t\", 120)", "-10min").await);
    let points = fine[0]["datapoints"].as_array().unwrap();
    assert_eq!(points.len(), 5, "{fine}");
    assert_eq!(points[0][0], points[0][1].as_f64().unwrap(), "{fine}");
}

/// Errors that graphite-web meets as Python exceptions are 400s naming the problem.
#[tokio::test]
async fn failures_name_the_problem() {
    for (target, words) in [
        ("movingAverage(tx.gauge.a, \"abc\")", "invalid windowSize"),
        ("movingAverage(tx.gauge.a, 1e300)", "windowSize"),
        ("movingSum(tx.gauge.a, 999999999999999)", "years 1 to 9999"),
        ("timeShift(tx.gauge.a, \"\")", "non-empty time shift"),
        ("timeShift(tx.gauge.a, \"900000000d\")", "years 1 to 9999"),
        (
            "nonNegativeDerivative(tx.counter.a, 999)",
            "null value of tx.counter.a",
        ),
        ("transformNull(tx.sparse, None)", "default"),
        ("keepLastValue(tx.sparse, None)", "limit"),
        (
            "scaleToSeconds(tx.gauge.a, inf)",
            "finite number of seconds",
        ),
    ] {
        let answer = render(target, "-10min").await;
        assert_refused(&answer, target, words);
    }
}

const FUNCTIONS: &[&str] = &[
    "scaleToSeconds",
    "offset",
    "absolute",
    "perSecond",
    "nonNegativeDerivative",
    "derivative",
    "integral",
    "summarize",
    "hitcount",
    "movingAverage",
    "movingSum",
    "movingMax",
    "movingMin",
    "timeShift",
    "keepLastValue",
    "transformNull",
];

const ARGS: &[&str] = &[
    "0",
    "1",
    "-1",
    "5",
    "-7",
    "2.5",
    "-0.5",
    "1e300",
    "-1e300",
    "inf",
    "true",
    "false",
    "None",
    "\"\"",
    "\"1min\"",
    "\"-1h\"",
    "\"0s\"",
    "\"7s\"",
    "\"+5min\"",
    "\"5\"",
    "\"abc\"",
    "\"sum\"",
    "\"median\"",
    "\"999999999d\"",
    "\"1y2mon\"",
    "tx.gauge.a",
    "tx.*.*",
    "nope.*",
    "99999999999999",
    "-99999999999999",
];

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(600))]
    #[test]
    fn no_arguments_panic(
        func in proptest::sample::select(FUNCTIONS),
        series in proptest::sample::select(vec!["tx.gauge.a", "tx.*.*", "tx.sparse", "nope.*", "app.host0[1-3].requests", "tx.big"]),
        args in proptest::collection::vec(proptest::sample::select(ARGS), 0..4),
        from in proptest::sample::select(vec!["-5min", "-1h", "-2d", "-30d", "-20y", "1", "now-1s"]),
        nested in proptest::sample::select(vec!["", "movingAverage", "timeShift", "summarize", "hitcount"]),
    ) {
        let mut call = std::iter::once(series.to_owned())
            .chain(args.iter().map(|a| (*a).to_owned()))
            .collect::<Vec<_>>()
            .join(",");
        call = format!("{func}({call})");
        let target = match nested {
            "" => call,
            "movingAverage" => format!("movingAverage({call},3)"),
            "timeShift" => format!("timeShift({call},\"1h\")"),
            other => format!("{other}({call},\"5min\")"),
        };
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let answer = rt.block_on(render(&target, from));
        proptest::prop_assert!(
            matches!(answer.status, 200 | 400),
            "{target}: {} {}",
            answer.status,
            common::text(&answer)
        );
    }
}

/// Every function `/functions` lists, by name (the registry, not a list kept by hand).
fn registered() -> &'static [String] {
    static NAMES: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    NAMES.get_or_init(|| {
        let answer = Graphite::new().functions(&[]);
        // Infinite defaults are written as graphite-web writes them, past serde_json's range.
        let text = common::text(&answer).replace("1e9999", "null");
        let listed: J = serde_json::from_str(&text).unwrap();
        let names: Vec<String> = listed.as_object().unwrap().keys().cloned().collect();
        assert!(
            names.len() > 100,
            "too few functions listed: {}",
            names.len()
        );
        names
    })
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(1500))]
    /// No registered function panics, whatever its arguments: each call answers a series
    /// list (200) or a 400 naming the problem.
    #[test]
    fn no_function_panics(
        func in proptest::sample::select(registered()),
        first in proptest::sample::select(vec!["tx.gauge.a", "tx.*.*", "tx.sparse", "nope.*", "app.host0[1-3].requests", "tx.big", "tx.every6", "\"x\"", "5"]),
        args in proptest::collection::vec(proptest::sample::select(ARGS), 0..5),
        from in proptest::sample::select(vec!["-5min", "-1h", "-2d", "-20y", "1"]),
        max_points in proptest::sample::select(vec![None, Some(3), Some(50)]),
    ) {
        let call = std::iter::once(first.to_owned())
            .chain(args.iter().map(|a| (*a).to_owned()))
            .collect::<Vec<_>>()
            .join(",");
        let target = format!("{func}({call})");
        let mut params = render_params(&target, from);
        if let Some(points) = max_points {
            params.push(("maxDataPoints".to_owned(), points.to_string()));
        }
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let answer =
            rt.block_on(Graphite::new().render(store(), &params, NOW, &Limits::default()));
        proptest::prop_assert!(
            matches!(answer.status, 200 | 400),
            "{target}: {} {}",
            answer.status,
            common::text(&answer)
        );
    }
}
