//! The combine, filter and sorting functions beyond graphite-web's own answers (those are
//! `fixtures/functions_combine.json` and `fixtures/functions_filter.json`): an embedder's
//! aggregating function offered and called as a `groupByNode` callback, and no panic and
//! no answer but a 200 or a 400 for any arguments.

use crate::common;

use std::sync::Arc;

use common::{MemStore, PlainFunction};
use tally_graphite::{Graphite, Limits, Param, ParamType, Signature, Value};

const NOW: i64 = 1_700_000_000;

/// Three series at two steps, with gaps: `app.a.requests` and `app.b.requests` every
/// minute, `app.c.errors` every ten seconds.
fn store() -> MemStore {
    let mut store = MemStore::default();
    for (i, (path, step)) in [
        ("app.a.requests", 60),
        ("app.b.requests", 60),
        ("app.c.errors", 10),
    ]
    .iter()
    .enumerate()
    {
        let ring = &mut store.file(path, &[(*step, 1440)])[0];
        let points: Vec<(i64, f64)> = (0..1440)
            .filter(|k| (k + i as i64) % 4 != 0)
            .map(|k| (NOW - NOW % step - k * step, (k % 7) as f64 - 2.0 + i as f64))
            .collect();
        ring.write(&points);
    }
    store
}

fn params(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// `/render` of one target over the last three minutes, as JSON.
async fn render(graphite: &Graphite, target: &str) -> tally_graphite::Answer {
    let p = params(&[
        ("target", target),
        ("from", "-3min"),
        ("now", "1700000000"),
        ("format", "json"),
    ]);
    graphite.render(&store(), &p, NOW, &Limits::default()).await
}

#[tokio::test]
async fn an_embedders_aggregator_is_offered_and_called_as_a_group_by_node_callback() {
    // An embedder's aggregator: the first series of its list, as it is.
    let first = PlainFunction(
        Signature::new(
            "firstSeries",
            "firstSeries(*seriesLists)",
            "Combine",
            "The first.",
        )
        .module("embedder")
        .params(vec![
            Param::new("seriesLists", ParamType::SeriesList)
                .required()
                .multiple(),
        ])
        .aggregator(),
        |mut args| {
            let mut list = args.take_all_series(0).into_iter().flatten();
            Ok(Value::Series(list.next().into_iter().collect()))
        },
    );
    let graphite = Graphite::new().with_function(Arc::new(first));
    let info = graphite.function("groupByNode", &[]);
    let text = String::from_utf8(info.body).unwrap();
    assert!(text.contains("\"firstSeries\""), "{text}");

    let answer = render(&graphite, "groupByNode(app.*.*, 2, \"firstSeries\")").await;
    let body = String::from_utf8(answer.body).unwrap();
    assert_eq!(answer.status, 200, "{body}");
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    let names: Vec<&str> = json
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["target"].as_str().unwrap())
        .collect();
    // Groups in order of first appearance among the series sorted by name.
    assert_eq!(names, ["requests", "errors"]);
    // The callback's series (app.a.requests, then app.c.errors), only renamed.
    assert_eq!(json[0]["tags"]["name"], "app.a.requests");
    assert_eq!(json[1]["tags"]["name"], "app.c.errors");
}

#[tokio::test]
async fn an_unknown_callback_is_a_400_naming_it() {
    let answer = render(&Graphite::new(), "groupByNode(app.*.*, 1, \"nosuch\")").await;
    let body = String::from_utf8(answer.body).unwrap();
    assert_eq!(answer.status, 400);
    assert!(body.contains("\"callback\": 'nosuch'"), "{body}");
}

const FUNCTIONS: &[&str] = &[
    "averageSeries",
    "avg",
    "maxSeries",
    "minSeries",
    "diffSeries",
    "stddevSeries",
    "rangeOfSeries",
    "multiplySeries",
    "divideSeries",
    "countSeries",
    "percentileOfSeries",
    "powSeries",
    "aggregate",
    "aggregateSeriesLists",
    "aggregateWithWildcards",
    "sumSeriesLists",
    "diffSeriesLists",
    "multiplySeriesLists",
    "sumSeriesWithWildcards",
    "averageSeriesWithWildcards",
    "multiplySeriesWithWildcards",
    "asPercent",
    "pct",
    "groupByNode",
    "groupByNodes",
    "aliasByMetric",
    "highestCurrent",
    "highestMax",
    "highestAverage",
    "lowestCurrent",
    "lowestAverage",
    "sortByMaxima",
    "sortByName",
    "limit",
    "exclude",
    "grep",
    "removeBelowValue",
    "removeAboveValue",
];

/// Arguments of every kind: series lists (empty, mixed steps, nested), numbers at the
/// edges, strings (patterns, callbacks, nonsense), booleans, `None`, keywords.
const ARGS: &[&str] = &[
    "app.*.*",
    "app.*.requests",
    "app.c.errors",
    "nope.*",
    "sumSeries(app.*.*)",
    "constantLine(1)",
    "groupByNode(app.*.*, 1)",
    "0",
    "1",
    "-1",
    "2",
    "50",
    "100",
    "101",
    "-9223372036854775808",
    "9223372036854775807",
    "1e308",
    "-1e308",
    "1e-320",
    "0.5",
    "inf",
    "-inf",
    "\"nan\"",
    "\"x\"",
    "\"(\"",
    "\"^app\"",
    "\"\"",
    "\"sum\"",
    "\"asPercent\"",
    "\"countSeries\"",
    "\"multiplySeriesWithWildcards\"",
    "\"name\"",
    "true",
    "false",
    "None",
    "n=3",
    "interpolate=true",
    "reverse=true",
    "callback=\"max\"",
];

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

    #[test]
    fn no_arguments_make_a_function_panic_or_fail_with_a_500(
        func in proptest::sample::select(FUNCTIONS),
        args in proptest::collection::vec(proptest::sample::select(ARGS), 0..5),
        from in proptest::sample::select(vec!["-5min", "-2h", "-3d", "-1s"]),
        mdp in proptest::sample::select(vec!["", "7"]),
        xff in proptest::sample::select(vec!["", "0.5", "1"]),
    ) {
        let store = store();
        let target = format!("{func}({})", args.join(", "));
        let p = params(&[
            ("target", &target),
            ("from", from),
            ("now", "1700000000"),
            ("maxDataPoints", mdp),
            ("xFilesFactor", xff),
            ("format", "json"),
        ]);
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let answer = rt.block_on(Graphite::new().render(&store, &p, NOW, &Limits::default()));
        proptest::prop_assert!(
            matches!(answer.status, 200 | 400),
            "{target}: {} {}",
            answer.status,
            String::from_utf8_lossy(&answer.body)
        );
    }
}
