//! Evaluation behaviour beyond graphite-web's own answers: one store read per time range,
//! an embedder's function re-reading another range, limits, refused formats, store
//! failures and graphite-web's error texts, and no panic on any request.

use crate::common;

use std::sync::{Arc, Mutex};

use common::{MemStore, PlainFunction};
use tally_graphite::{
    Args, Context, Error, Fetch, Function, Glob, Graphite, Limits, Node, Param, ParamType, Result,
    Series, Signature, Store, Value,
};

const NOW: i64 = 1_700_000_000;

fn store() -> MemStore {
    let mut store = MemStore::default();
    for (i, path) in ["app.a.requests", "app.b.requests", "app.c.errors"]
        .iter()
        .enumerate()
    {
        let ring = &mut store.file(path, &[(60, 1440)])[0];
        let points: Vec<(i64, f64)> = (0..1440)
            .map(|k| (NOW - NOW % 60 - k * 60, (k % 10) as f64 + i as f64))
            .collect();
        ring.write(&points);
    }
    store
}

/// A store that records every fetch (its patterns and range), reading from another.
struct Recording {
    inner: MemStore,
    fetches: Mutex<Vec<(Vec<String>, i64, i64)>>,
    fail: bool,
}

impl Recording {
    fn new(inner: MemStore) -> Recording {
        Recording {
            inner,
            fetches: Mutex::new(Vec::new()),
            fail: false,
        }
    }
}

#[async_trait::async_trait]
impl Store for Recording {
    async fn fetch(&self, fetch: Fetch<'_>) -> Result<Vec<Vec<Series>>> {
        if self.fail {
            return Err(Error::Store("connection refused".to_owned()));
        }
        self.fetches.lock().unwrap().push((
            fetch.patterns.iter().map(|g| g.text().to_owned()).collect(),
            fetch.from,
            fetch.until,
        ));
        self.inner.fetch(fetch).await
    }

    async fn find(&self, pattern: &Glob, max: usize) -> Result<Vec<Node>> {
        self.inner.find(pattern, max).await
    }
}

fn params(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// The parameters of a JSON render of `target` from `from` to `NOW`.
fn json_render(target: &str, from: &str) -> Vec<(String, String)> {
    params(&[
        ("target", target),
        ("from", from),
        ("now", "1700000000"),
        ("format", "json"),
    ])
}

#[tokio::test]
async fn all_path_expressions_of_a_request_are_read_in_one_fetch() {
    let store = Recording::new(store());
    let p = params(&[
        ("target", "sumSeries(app.*.requests)"),
        ("target", "aliasByNode(scale(app.c.errors, 2), 1)"),
        ("target", "app.*.requests"),
        ("from", "-10min"),
        ("now", "1700000000"),
        ("format", "json"),
    ]);
    let answer = Graphite::new()
        .render(&store, &p, NOW, &Limits::default())
        .await;
    assert_eq!(answer.status, 200, "{}", common::text(&answer));
    let fetches = store.fetches.lock().unwrap();
    assert_eq!(fetches.len(), 1);
    assert_eq!(
        fetches[0].0,
        vec!["app.*.requests", "app.c.errors"],
        "deduplicated and sorted"
    );
    assert_eq!((fetches[0].1, fetches[0].2), (NOW - 600, NOW));
}

/// An embedder's function: the sum of its argument over the hour before the range, read
/// again through the context, as graphite-web's moving windows and timeShift do.
struct HourBefore(Signature);

#[async_trait::async_trait]
impl Function for HourBefore {
    fn signature(&self) -> &Signature {
        &self.0
    }

    async fn call(&self, cx: &Context<'_>, mut args: Args) -> Result<Value> {
        let now_list = args.take_series(0);
        let earlier = cx
            .evaluate(&cx.raw_args()[0], cx.from() - 3600, cx.until() - 3600)
            .await?;
        let mut out = Vec::new();
        for (series, before) in now_list.into_iter().zip(earlier) {
            let mut s = series.clone();
            s.name = format!("hourBefore({})", series.name);
            s.values = before.values;
            out.push(s);
        }
        Ok(Value::Series(out))
    }
}

fn hour_before() -> Arc<dyn Function> {
    Arc::new(HourBefore(
        Signature::new(
            "hourBefore",
            "hourBefore(seriesList)",
            "Tally",
            "the hour before",
        )
        .module("tally")
        .params(vec![
            Param::new("seriesList", ParamType::SeriesList).required(),
        ]),
    ))
}

#[tokio::test]
async fn an_embedders_function_reads_another_range_through_its_context() {
    let store = Recording::new(store());
    let graphite = Graphite::new().with_function(hour_before());
    let p = json_render("hourBefore(app.a.requests)", "-3min");
    let answer = graphite.render(&store, &p, NOW, &Limits::default()).await;
    assert_eq!(answer.status, 200, "{}", common::text(&answer));
    let fetches = store.fetches.lock().unwrap();
    assert_eq!(
        fetches.len(),
        2,
        "the request's range, then the function's own"
    );
    assert_eq!((fetches[1].1, fetches[1].2), (NOW - 180 - 3600, NOW - 3600));
    let json: serde_json::Value = serde_json::from_slice(&answer.body).unwrap();
    assert_eq!(json[0]["target"], "hourBefore(app.a.requests)");
    // /functions lists it with the built-ins.
    // graphite-web writes infinity (keepLastValue's default limit) as 1e9999, which
    // serde_json refuses.
    let text = String::from_utf8_lossy(&graphite.functions(&[]).body).replace("1e9999", "null");
    let functions: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(functions["hourBefore"]["module"], "tally");
    assert_eq!(functions["hourBefore"]["params"][0]["type"], "seriesList");
    assert!(functions.get("sumSeries").is_some());
}

#[tokio::test]
async fn limits_are_400s_naming_the_limit() {
    let store = store();
    let graphite = Graphite::new();
    let tight = Limits {
        max_series: 2,
        max_points: 20,
        max_find: 1,
    };
    let p = json_render("app.*.*", "-5min");
    let answer = graphite.render(&store, &p, NOW, &tight).await;
    assert_eq!(answer.status, 400);
    common::assert_body_contains(&answer, "series limit");

    let p = json_render("app.*.requests", "-15min");
    let answer = graphite.render(&store, &p, NOW, &tight).await;
    assert_eq!(answer.status, 400);
    common::assert_body_contains(&answer, "points limit");
    // maxDataPoints brings the answer under the limit.
    let mut p = p;
    p.push(("maxDataPoints".into(), "5".into()));
    assert_eq!(graphite.render(&store, &p, NOW, &tight).await.status, 200);

    let answer = graphite
        .find(&store, &params(&[("query", "app.*")]), &tight)
        .await;
    assert_eq!(answer.status, 400);
    common::assert_body_starts(&answer, "Invalid parameters (");
}

#[tokio::test]
async fn formats_other_than_json_and_csv_are_refused_naming_both() {
    let store = store();
    for format in [None, Some("png"), Some("svg"), Some("raw"), Some("pickle")] {
        let mut p = params(&[("target", "app.a.requests"), ("now", "1700000000")]);
        if let Some(f) = format {
            p.push(("format".into(), f.into()));
        }
        let answer = Graphite::new()
            .render(&store, &p, NOW, &Limits::default())
            .await;
        assert_eq!(
            (answer.status, answer.content_type),
            (400, "text/html; charset=utf-8")
        );
        let text = common::text(&answer);
        assert!(
            text.contains("format=json") && text.contains("format=csv"),
            "{text}"
        );
    }
}

#[tokio::test]
async fn a_store_failure_is_a_500() {
    let mut store = Recording::new(store());
    store.fail = true;
    let p = params(&[("target", "app.a.requests"), ("format", "json")]);
    let answer = Graphite::new()
        .render(&store, &p, NOW, &Limits::default())
        .await;
    assert_eq!(answer.status, 500);
}

#[tokio::test]
async fn bad_arguments_are_400s_in_graphite_webs_words() {
    let store = store();
    let render = |target: &str| {
        let p = json_render(target, "-2min");
        let store = &store;
        async move {
            Graphite::new()
                .render(store, &p, NOW, &Limits::default())
                .await
        }
    };
    let answer = render("scale(app.a.requests, \"x\")").await;
    assert_eq!(answer.status, 400);
    assert_eq!(
        common::text(&answer),
        "Invalid parameters (Invalid \"float\" value specified for function \"scale\" parameter \"factor\": 'x'); \
         targets: \"scale(app.a.requests, \"x\")\"; func: \"scale([TimeSeries(name=app.a.requests, start=1699999920, \
         end=1700000040, step=60, valuesPerPoint=1, consolidationFunc=average, xFilesFactor=0.0)], 'x')\""
    );
    let answer = render("consolidateBy(app.a.requests, \"median\")").await;
    common::assert_body_starts(
        &answer,
        "Invalid parameters (Invalid option specified for function \"consolidateBy\" parameter \"consolidationFunc\": 'median')",
    );
    let answer = render("alias(app.a.requests)").await;
    common::assert_body_starts(
        &answer,
        "Invalid parameters (Missing required parameter \"newName\" for function \"alias\")",
    );
    let answer = render("scale(app.a.requests, 1, 2)").await;
    common::assert_body_starts(
        &answer,
        "Invalid parameters (Too many parameters specified for function \"scale\")",
    );
    let answer = render("alias(app.a.requests, \"x\", other=1)").await;
    common::assert_body_starts(&answer, "Invalid parameters (Too many parameters specified");
    let answer = render("aliasSub(app.a.requests, \"(\", \"x\")").await;
    assert_eq!(answer.status, 400, "{}", common::text(&answer));
    let answer = render("sumSeries(app.a.requests").await;
    common::assert_body_starts(&answer, "Invalid parameters (could not parse target");
    let p = params(&[
        ("target", "app.a.requests"),
        ("maxDataPoints", "0"),
        ("format", "json"),
    ]);
    assert_eq!(
        Graphite::new()
            .render(&store, &p, NOW, &Limits::default())
            .await
            .status,
        400
    );
}

#[tokio::test]
async fn a_path_in_a_keyword_argument_is_not_fetched_as_in_graphite_web() {
    // graphite-web prefetches only positional arguments' paths; a keyword argument's path
    // evaluates to an empty list.
    let store = Recording::new(store());
    let graphite = Graphite::new().with_function(Arc::new(PlainFunction(
        Signature::new("pair", "pair(a, b=None)", "Tally", "both lists").params(vec![
            Param::new("a", ParamType::SeriesList).required(),
            Param::new("b", ParamType::SeriesList),
        ]),
        |mut args| {
            let mut a = args.take_series(0);
            a.extend(args.take_series(1));
            Ok(Value::Series(a))
        },
    )));
    let p = json_render("pair(app.a.requests, b=app.b.requests)", "-2min");
    let answer = graphite.render(&store, &p, NOW, &Limits::default()).await;
    let json: serde_json::Value = serde_json::from_slice(&answer.body).unwrap();
    assert_eq!(json.as_array().unwrap().len(), 1, "{json}");
    assert_eq!(store.fetches.lock().unwrap()[0].0, vec!["app.a.requests"]);
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]
    #[test]
    fn no_request_panics(
        target in "[a-z*.(),\"0-9 |=-]{0,30}",
        func in proptest::sample::select(vec!["sumSeries", "sum", "alias", "aliasSub", "aliasByNode", "scale", "consolidateBy", "constantLine", "template", "nope"]),
        from in "(-[0-9]{1,3}(min|h|d|s|m)|[0-9]{1,10}|now|noon|yesterday|)",
        until in "(-[0-9]{1,2}(min|h)|now|[0-9]{1,10}|)",
        mdp in "[0-9]{0,4}",
        format in proptest::sample::select(vec!["json", "csv", "png"]),
    ) {
        let store = store();
        let targets = [target.clone(), format!("{func}({target})"), format!("{func}(app.*.requests, {target})")];
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        for t in targets {
            let p = params(&[("target", &t), ("from", &from), ("until", &until), ("maxDataPoints", &mdp), ("format", format), ("now", "1700000000")]);
            let answer = rt.block_on(Graphite::new().render(&store, &p, NOW, &Limits::default()));
            proptest::prop_assert!(matches!(answer.status, 200 | 400), "{} {}", answer.status, common::text(&answer));
            let q = params(&[("query", &target), ("format", format)]);
            let _ = rt.block_on(Graphite::new().find(&store, &q, &Limits::default()));
        }
    }
}

/// A store answering every pattern with fixed series, twins sharing a name among them.
struct Twins(Vec<Series>);

#[async_trait::async_trait]
impl Store for Twins {
    async fn fetch(&self, fetch: Fetch<'_>) -> Result<Vec<Vec<Series>>> {
        Ok(fetch.patterns.iter().map(|_| self.0.clone()).collect())
    }

    async fn find(&self, _pattern: &Glob, _max: usize) -> Result<Vec<Node>> {
        Ok(Vec::new())
    }
}

/// Series sharing a name merge as graphite-web's `_merge_results` merges them under its
/// default `REMOTE_STORE_MERGE_RESULTS = True`: the first fetched is kept, a twin of as
/// many points fills its nulls (whatever nulls the twin has), a twin of another length
/// replaces it while it has a null, and nothing touches it once it has none.
#[tokio::test]
async fn series_sharing_a_name_merge_as_graphite_webs_merge_results() {
    let start = NOW - 240;
    let series = |values: Vec<Option<f64>>| {
        let end = start + 60 * values.len() as i64;
        Series::fetched("x", "x", start, end, 60, values)
    };
    let ask = |twins: Vec<Series>| async move {
        let p = params(&[("target", "x"), ("from", "-4min"), ("format", "json")]);
        let answer = Graphite::new()
            .render(&Twins(twins), &p, NOW, &Limits::default())
            .await;
        assert_eq!(answer.status, 200, "{}", common::text(&answer));
        let json: serde_json::Value = serde_json::from_slice(&answer.body).unwrap();
        assert_eq!(
            json.as_array().unwrap().len(),
            1,
            "one series per name: {json}"
        );
        json[0]["datapoints"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p[0].as_f64())
            .collect::<Vec<_>>()
    };
    // The twin has as many nulls as the first: graphite-web still fills the gaps.
    assert_eq!(
        ask(vec![
            series(vec![Some(1.0), None, None, Some(4.0)]),
            series(vec![None, Some(2.0), None, None]),
            series(vec![Some(9.0), Some(9.0), Some(9.0), Some(9.0)]),
        ])
        .await,
        [Some(1.0), Some(2.0), Some(9.0), Some(4.0)]
    );
    // A first series without a null keeps every point.
    assert_eq!(
        ask(vec![
            series(vec![Some(1.0), Some(2.0), Some(3.0), Some(4.0)]),
            series(vec![Some(9.0), Some(9.0), Some(9.0), Some(9.0)]),
        ])
        .await,
        [Some(1.0), Some(2.0), Some(3.0), Some(4.0)]
    );
    // A twin of another length replaces a first series holding a null, and is then kept.
    assert_eq!(
        ask(vec![
            series(vec![Some(1.0), None, Some(3.0), Some(4.0)]),
            series(vec![None, Some(7.0)]),
            series(vec![Some(9.0), Some(9.0), Some(9.0), Some(9.0)]),
        ])
        .await,
        [None, Some(7.0)]
    );
}
