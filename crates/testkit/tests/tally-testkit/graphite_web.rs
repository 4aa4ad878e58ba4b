//! The reference Graphite answers as graphite-web 1.1.10 and carbon 1.1.10
//! do: the harness's whisper files read back slot for slot, graphite-web's
//! routes and error answers in the shapes Tally's Graphite server must copy,
//! and carbon's line receiver's verdict on each kind of line.
//!
//! The expectations below are what graphite-web and carbon were observed to
//! do; each is written as the rule it shows. They need the virtual
//! environment `scripts/test` installs (`graphite_venv()`); without it they
//! fail and say how to install it.

use serde_json::{Value, json};
use tally_testkit::graphite_web::{CARBON_REFERENCE_NOW, URL_PREFIX};
use tally_testkit::{
    CarbonOutcome, GraphiteWeb, GraphiteWebOptions, WhisperData, WhisperSeries,
    carbon_reference_datagrams, carbon_reference_parse,
};

/// The request's `now`: not on a minute or hour boundary (`NOW % 60 == 20`,
/// `NOW % 3600 == 800`).
const NOW: i64 = 1_700_000_000;
/// One archive per Tally precision: 1 s × 120, 1 min × 120, 1 h × 120.
const ARCHIVES: [(u32, u32); 3] = [(1, 120), (60, 120), (3600, 120)];

/// Two series with points in every archive, gaps between them, and points
/// only some archives hold (nothing propagated from one to another).
fn two_series() -> WhisperData {
    WhisperData::new()
        .with(
            WhisperSeries::new("app.api.requests", &ARCHIVES)
                .point(0, NOW - 100, 1.5)
                .point(0, NOW - 10, 1.0)
                .point(0, NOW - 5, 2.0)
                .point(0, NOW, 3.0)
                .point(1, NOW - 3000, 10.0)
                .point(1, NOW - 600, 20.0)
                .point(1, NOW - 130, 25.0)
                .point(1, NOW - 20, 30.0)
                .point(2, NOW - 7200, 100.0)
                .point(2, NOW - 3600 * 100, 200.0),
        )
        .with(
            WhisperSeries::new("app.db.requests", &ARCHIVES)
                .point(0, NOW - 7, 7.0)
                .point(1, NOW - 600, 70.0),
        )
}

fn json_body(r: &tally_testkit::http::Response) -> Value {
    assert_eq!(r.status, 200, "{}", r.text());
    serde_json::from_slice(&r.body).unwrap_or_else(|e| panic!("{e}: {}", r.text()))
}

/// `/render?format=json` for `target` with `now` fixed.
fn render(gw: &GraphiteWeb, target: &str, from: i64, until: i64, now: i64) -> Value {
    let r = gw.get(&format!(
        "/render?target={target}&format=json&from={from}&until={until}&now={now}"
    ));
    assert_eq!(r.content_type(), "application/json");
    json_body(&r)
}

/// The datapoints whisper returns for a range at one step: from the slot
/// after the one holding `from` (from is exclusive) to the slot holding
/// `until` (inclusive), each a value or null.
fn expected_points(from: i64, until: i64, step: i64, values: &[(i64, f64)]) -> Value {
    let align = |t: i64| t - t.rem_euclid(step);
    let points: Vec<Value> = (align(from) + step..=align(until))
        .step_by(step as usize)
        .map(|ts| {
            let value = values
                .iter()
                .find(|&&(t, _)| align(t) == ts)
                .map_or(Value::Null, |&(_, v)| json!(v));
            json!([value, ts])
        })
        .collect();
    Value::Array(points)
}

/// `/render?format=json` for `target` over the 20 s before `NOW`, as
/// answered (whatever its status).
fn render_last_20s(gw: &GraphiteWeb, target: &str) -> tally_testkit::http::Response {
    gw.get(&format!(
        "/render?target={target}&format=json&from=-20s&now={NOW}"
    ))
}

/// The `target` of each series of a render's answer, in order.
fn targets(got: &Value) -> Vec<&str> {
    got.as_array()
        .unwrap()
        .iter()
        .map(|s| s["target"].as_str().unwrap())
        .collect()
}

fn one_series(name: &str, datapoints: Value) -> Value {
    json!([{"target": name, "tags": {"name": name}, "datapoints": datapoints}])
}

#[test]
fn render_reads_the_archive_that_now_minus_from_picks_with_nulls_in_gaps() {
    let gw = GraphiteWeb::start(&two_series());
    let api = "app.api.requests";

    // now − from = 20 s: the 1 s archive; its own points only.
    let got = render(&gw, api, NOW - 20, NOW, NOW);
    let points = expected_points(
        NOW - 20,
        NOW,
        1,
        &[(NOW - 10, 1.0), (NOW - 5, 2.0), (NOW, 3.0)],
    );
    assert_eq!(points.as_array().unwrap().len(), 20);
    assert_eq!(points[0], json!([null, NOW - 19]), "from is exclusive");
    assert_eq!(got, one_series(api, points));

    // A range starting before the archive's first written slot reads round
    // the end of whisper's ring.
    let got = render(&gw, api, NOW - 110, NOW, NOW);
    let second = [
        (NOW - 100, 1.5),
        (NOW - 10, 1.0),
        (NOW - 5, 2.0),
        (NOW, 3.0),
    ];
    assert_eq!(
        got,
        one_series(api, expected_points(NOW - 110, NOW, 1, &second))
    );

    // now − from = 3000 s: past 1 s × 120, within 60 s × 120. The slot holding
    // from (10.0 at NOW − 3020) is left out; the current minute's slot is in.
    let got = render(&gw, api, NOW - 3000, NOW, NOW);
    let minute = [(NOW - 600, 20.0), (NOW - 130, 25.0), (NOW - 20, 30.0)];
    let points = expected_points(NOW - 3000, NOW, 60, &minute);
    assert_eq!(points[0], json!([null, 1_699_997_040]));
    assert_eq!(
        points.as_array().unwrap().last(),
        Some(&json!([30.0, 1_699_999_980]))
    );
    assert_eq!(got, one_series(api, points));
    // from exactly on a slot boundary still leaves that slot out; one second
    // earlier takes it in.
    let on_boundary = render(&gw, api, NOW - 3020, NOW, NOW);
    assert_eq!(
        on_boundary[0]["datapoints"][0],
        json!([null, 1_699_997_040])
    );
    let before = render(&gw, api, NOW - 3021, NOW, NOW);
    assert_eq!(before[0]["datapoints"][0], json!([10.0, 1_699_996_980]));

    // The archive follows now − from alone: 50 s of range 200 s back read the
    // minute archive (25.0), not the second archive's 1.5 at NOW − 100.
    let got = render(&gw, api, NOW - 200, NOW - 60, NOW);
    assert_eq!(
        got,
        one_series(api, json!([[25.0, 1_699_999_860], [null, 1_699_999_920]]))
    );

    // A range inside one slot gives that slot's successor, after until:
    // whisper always returns at least one point.
    let got = render(&gw, api, NOW - 200, NOW - 190, NOW);
    assert_eq!(got, one_series(api, json!([[25.0, 1_699_999_860]])));

    // A day back: the hour archive; 200.0 is older than the range.
    let got = render(&gw, api, NOW - 86_400, NOW, NOW);
    let points = expected_points(NOW - 86_400, NOW, 3600, &[(NOW - 7200, 100.0)]);
    assert_eq!(points.as_array().unwrap().len(), 24);
    assert_eq!(got, one_series(api, points));

    // Past every archive's span: the coarsest, from clipped to now − 120 h.
    let got = render(&gw, api, NOW - 3600 * 200, NOW, NOW);
    let clipped = NOW - 3600 * 120;
    let points = expected_points(
        clipped,
        NOW,
        3600,
        &[(NOW - 7200, 100.0), (NOW - 360_000, 200.0)],
    );
    assert_eq!(points.as_array().unwrap().len(), 120);
    assert_eq!(got, one_series(api, points));

    // Nothing after now: until is clipped to it, and the points after it in
    // the file are not read.
    let got = render(&gw, api, NOW - 18, NOW, NOW - 8);
    assert_eq!(
        got,
        one_series(
            api,
            expected_points(NOW - 18, NOW - 8, 1, &[(NOW - 10, 1.0)])
        )
    );

    // A wildcard: one series per match, in name order.
    let got = render(&gw, "app.*.requests", NOW - 20, NOW, NOW);
    assert_eq!(targets(&got), ["app.api.requests", "app.db.requests"]);
    assert_eq!(
        got[1]["datapoints"],
        expected_points(NOW - 20, NOW, 1, &[(NOW - 7, 7.0)])
    );

    // A range with no point but within the file's span is a series of nulls
    // (whisper reads an empty archive as nulls), not an absent series.
    let got = render(&gw, "app.db.requests", NOW - 86_400, NOW, NOW);
    assert_eq!(
        got,
        one_series(
            "app.db.requests",
            expected_points(NOW - 86_400, NOW, 3600, &[])
        )
    );
    // Absent: a range wholly before the file's span or after now, and a
    // pattern matching nothing.
    assert_eq!(
        render(&gw, api, NOW - 1_000_000, NOW - 900_000, NOW),
        json!([])
    );
    assert_eq!(render(&gw, api, NOW + 10, NOW + 20, NOW), json!([]));
    assert_eq!(render(&gw, "app.nothing.*", NOW - 20, NOW, NOW), json!([]));

    // Grafana's request: a form body, epoch times, aliasSub's wrapper.
    let r = gw.post_form(
        "/render",
        &format!(
            "target=aliasSub(app.api.requests%2C%20%22(%5E.*%24)%22%2C%20%22%5C1%20A%22)\
             &from={}&until={}&format=json&maxDataPoints=1000&now={NOW}",
            NOW - 21,
            NOW + 1
        ),
    );
    let got = json_body(&r);
    assert_eq!(got[0]["target"], "app.api.requests A");
    assert_eq!(got[0]["tags"], json!({"name": "app.api.requests"}));
}

#[test]
fn find_functions_version_and_tags_answer_as_graphite_web_does() {
    let arch = &ARCHIVES[..1];
    let data = two_series()
        .with(WhisperSeries::new("app.api", arch).point(0, NOW - 3, 5.0))
        .with(WhisperSeries::new("app.zeta", arch))
        .with(WhisperSeries::new("app.alpha", arch))
        .with(WhisperSeries::new("Zed.x", arch))
        .with(WhisperSeries::new("_u.x", arch))
        .with(WhisperSeries::new("café.x", arch).point(0, NOW - 1, 0.5));
    let gw = GraphiteWeb::start(&data);
    let branch = |id: &str, text: &str| json!({"text": text, "id": id, "allowChildren": 1, "expandable": 1, "leaf": 0});
    let leaf = |id: &str, text: &str| json!({"text": text, "id": id, "allowChildren": 0, "expandable": 0, "leaf": 1});

    // Branches first, then leaves, each by name; `app.api` is both a file and
    // a directory and is listed once, as a branch.
    let r = gw.get("/metrics/find?query=app.*");
    assert_eq!(r.content_type(), "application/json");
    assert_eq!(
        json_body(&r),
        json!([
            branch("app.api", "api"),
            branch("app.db", "db"),
            leaf("app.alpha", "alpha"),
            leaf("app.zeta", "zeta"),
        ])
    );
    // Names in byte order: upper case, then `_`, then lower case.
    assert_eq!(
        json_body(&gw.get("/metrics/find?query=*")),
        json!([
            branch("Zed", "Zed"),
            branch("_u", "_u"),
            branch("app", "app"),
            branch("café", "café")
        ])
    );
    // Non-ASCII comes \u-escaped when the Accept header is exactly
    // application/json (or absent); with any other (Grafana's), raw UTF-8 and
    // a charset in the content type.
    let r = gw.get("/metrics/find?query=caf*");
    assert_eq!(r.content_type(), "application/json");
    assert!(r.text().contains(r#""id": "caf\u00e9""#), "{}", r.text());
    let grafana = [("Accept", "application/json, text/plain, */*")];
    let r = gw.request("GET", "/metrics/find?query=caf*", &grafana, &[]);
    assert_eq!(r.content_type(), "application/json;charset=utf-8");
    assert!(r.text().contains(r#""id": "café""#), "{}", r.text());
    // Without UTF8_METRICS (the default) a path stops at its first non-ASCII
    // character, so the series found above renders nothing.
    assert_eq!(render(&gw, "caf%C3%A9.x", NOW - 5, NOW, NOW), json!([]));
    // Grafana's raw body: the id keeps the query's pattern, one entry per name.
    let r = gw.post_form("/metrics/find?from=-1h&until=now", "query=app.{api,db}.*");
    assert_eq!(
        json_body(&r),
        json!([leaf("app.{api,db}.requests", "requests")])
    );
    assert_eq!(
        json_body(&gw.get("/metrics/find?query=nothing.*")),
        json!([])
    );
    let r = gw.get("/metrics/find");
    assert_eq!(
        (r.status, r.content_type()),
        (400, "text/html; charset=utf-8")
    );
    assert_eq!(
        r.text(),
        "Invalid parameters (Missing required parameter 'query')"
    );

    // The leaf hidden from find still renders, and a wildcard's leaves do.
    let got = render(&gw, "app.*", NOW - 5, NOW, NOW);
    assert_eq!(targets(&got), ["app.alpha", "app.api", "app.zeta"]);

    // expand: branches and leaves, sorted.
    assert_eq!(
        json_body(&gw.get("/metrics/expand?query=app.*")),
        json!({"results": ["app.alpha", "app.api", "app.db", "app.zeta"]})
    );

    // /functions needs inspect.getargspec, put back by the harness.
    let r = gw.get("/functions");
    assert_eq!((r.status, r.content_type()), (200, "application/json"));
    // An infinite default is written `1e9999`, which JSON parsers refuse as
    // out of range (keepLastValue's and interpolate's limit).
    let text = r.text();
    let limit = r#"{"name": "limit", "type": "intOrInf", "default": 1e9999}"#;
    assert_eq!(text.matches(limit).count(), 2);
    let functions: Value = serde_json::from_str(&text.replace("1e9999", "\"inf\"")).unwrap();
    assert_eq!(
        functions["keepLastValue"]["function"],
        "keepLastValue(seriesList, limit=inf)"
    );
    let sum = &functions["sumSeries"];
    assert_eq!(sum["function"], "sumSeries(*seriesLists)");
    assert_eq!(sum["group"], "Combine");
    assert_eq!(
        sum["params"],
        json!([{"name": "seriesLists", "type": "seriesList", "required": true, "multiple": true}])
    );
    assert_eq!(
        functions["summarize"]["function"],
        "summarize(seriesList, intervalString, func='sum', alignToFrom=False)"
    );
    assert!(functions.as_object().unwrap().len() > 100);

    let r = gw.get("/version");
    assert_eq!((r.status, r.text().as_str()), (200, "1.1.10\n"));
    assert_eq!(json_body(&gw.get("/tags/autoComplete/tags")), json!([]));
    assert_eq!(
        json_body(&gw.get("/tags/autoComplete/values?tag=name")),
        json!([])
    );
}

#[test]
fn errors_and_formats_answer_as_graphite_web_does() {
    let gw = GraphiteWeb::start(&two_series());
    let bad = |query: &str| {
        let r = gw.get(&format!("/render?{query}&format=json&now={NOW}"));
        assert_eq!(
            (r.status, r.content_type()),
            (400, "text/html; charset=utf-8"),
            "{query}: {}",
            r.text()
        );
        r.text()
    };
    let t = "target=app.api.requests";
    assert_eq!(
        bad(&format!("{t}&from={NOW}&until={NOW}")),
        "Invalid parameters (Invalid empty time range)"
    );
    assert_eq!(
        bad("target=nope(app.api.requests)&from=-1h"),
        "Invalid parameters (Received request for unknown function: nope); \
         targets: \"nope(app.api.requests)\""
    );
    assert_eq!(
        bad(&format!("{t}&from=garbage")),
        "Invalid parameters (Unknown day reference: garbage)"
    );
    assert_eq!(
        bad(&format!("{t}&from=-5m")),
        "Invalid parameters (Invalid offset unit 'm')"
    );

    // from after until is swapped, not refused.
    let swapped = render(&gw, "app.api.requests", NOW, NOW - 20, NOW);
    assert_eq!(swapped, render(&gw, "app.api.requests", NOW - 20, NOW, NOW));

    // A target the grammar cannot take as a whole: the unparsed rest is
    // ignored, or nothing is matched, or the server fails with its HTML page.
    let lenient = |target: &str| json_body(&render_last_20s(&gw, target));
    assert_eq!(
        lenient("app.api.requests)")[0]["target"],
        "app.api.requests"
    );
    assert_eq!(lenient("sumSeries(app.api.requests"), json!([]));
    let r = render_last_20s(&gw, "%22app.api.requests%22");
    assert_eq!(
        (r.status, r.content_type()),
        (500, "text/html; charset=utf-8")
    );
    assert!(
        r.text()
            .contains("Graphite encountered an unexpected error")
    );
    // Arguments a function cannot take: 500 as shipped (see the next test).
    let r = render_last_20s(&gw, "scale(app.api.requests,%22x%22)");
    assert_eq!(r.status, 500);

    // Without format (or with one it does not know): a PNG.
    for query in ["", "&format=xml"] {
        let r = gw.get(&format!("/render?{t}&from=-20s&now={NOW}{query}"));
        assert_eq!((r.status, r.content_type()), (200, "image/png"));
        assert!(r.body.starts_with(b"\x89PNG\r\n\x1a\n"));
    }

    // csv: name, UTC time, value or nothing.
    let r = gw.get(&format!(
        "/render?{t}&format=csv&from={}&until={NOW}&now={NOW}",
        NOW - 3
    ));
    assert_eq!((r.status, r.content_type()), (200, "text/csv"));
    assert_eq!(
        r.text(),
        "app.api.requests,2023-11-14 22:13:18,\r\n\
         app.api.requests,2023-11-14 22:13:19,\r\n\
         app.api.requests,2023-11-14 22:13:20,3.0\r\n"
    );
}

#[test]
fn options_enforce_validation_take_utf8_paths_and_add_workers() {
    let options = GraphiteWebOptions {
        workers: 2,
        enforce_input_validation: true,
        utf8_metrics: true,
        ..GraphiteWebOptions::default()
    };
    let data = two_series().with(WhisperSeries::new("café.x", &ARCHIVES).point(0, NOW - 1, 0.5));
    let gw = GraphiteWeb::start_with(&data, options);
    // With UTF8_METRICS a non-ASCII path renders (its name \u-escaped).
    let r = gw.get(&format!(
        "/render?target=caf%C3%A9.x&format=json&from={}&until={NOW}&now={NOW}",
        NOW - 2
    ));
    assert!(
        r.text().starts_with(r#"[{"target": "caf\u00e9.x""#),
        "{}",
        r.text()
    );
    assert_eq!(
        json_body(&r),
        one_series("café.x", json!([[0.5, NOW - 1], [null, NOW]]))
    );
    assert!(gw.url().ends_with(URL_PREFIX));
    let r = render_last_20s(&gw, "scale(app.api.requests,%22x%22)");
    assert_eq!(
        (r.status, r.content_type()),
        (400, "text/html; charset=utf-8")
    );
    assert!(
        r.text().starts_with(
            "Invalid parameters (Invalid \"float\" value specified for function \"scale\" \
             parameter \"factor\": 'x'); targets: \"scale(app.api.requests,\"x\")\"; func: \"scale(["
        ),
        "{}",
        r.text()
    );
    // Both workers answer the same.
    for _ in 0..4 {
        assert_eq!(
            render(&gw, "app.db.requests", NOW - 20, NOW, NOW)[0]["datapoints"],
            expected_points(NOW - 20, NOW, 1, &[(NOW - 7, 7.0)])
        );
    }
}

#[test]
fn a_missing_virtual_environment_is_an_error_saying_how_to_install_it() {
    let options = GraphiteWebOptions {
        venv: Some("/nonexistent/graphite-venv".into()),
        ..GraphiteWebOptions::default()
    };
    let error = GraphiteWeb::try_start_with(&WhisperData::new(), options).unwrap_err();
    assert!(
        error.contains("no Python at /nonexistent/graphite-venv/bin/python"),
        "{error}"
    );
    assert!(error.contains("scripts/test"), "{error}");
}

/// What carbon's TCP receiver was observed to make of each kind of line.
#[test]
fn carbon_accepts_and_refuses_lines_as_observed() {
    use CarbonOutcome::*;
    let ok = |path: &str, value: f64, timestamp: f64| Accepted {
        path: path.into(),
        value,
        timestamp,
    };
    let cases: Vec<(&[u8], CarbonOutcome)> = vec![
        (b"a.b 1.5 1700000000", ok("a.b", 1.5, 1.7e9)),
        // Any run of whitespace separates; a trailing \r is stripped.
        (b"  a.b \t 1   1700000000 \r", ok("a.b", 1.0, 1.7e9)),
        // Python's float(): exponents, signs, underscores, `.5`, `1.`.
        (b"a.b 1e3 1.7e9", ok("a.b", 1000.0, 1.7e9)),
        (b"a.b 1_000 +1700000000", ok("a.b", 1000.0, 1.7e9)),
        (b"a.b .5 1700000000", ok("a.b", 0.5, 1.7e9)),
        (b"a.b -0 1700000000", ok("a.b", -0.0, 1.7e9)),
        // Fractions of a second are kept (whisper truncates them later).
        (b"a.b 1 1700000000.75", ok("a.b", 1.0, 1_700_000_000.75)),
        // Infinite values pass; so does an overflowing one.
        (b"a.b inf 1700000000", ok("a.b", f64::INFINITY, 1.7e9)),
        (
            b"a.b -Infinity 1700000000",
            ok("a.b", f64::NEG_INFINITY, 1.7e9),
        ),
        (b"a.b 1e400 1700000000", ok("a.b", f64::INFINITY, 1.7e9)),
        // NaN values are dropped silently.
        (b"a.b nan 1700000000", Ignored),
        (b"a.b NaN 1700000000", Ignored),
        // A timestamp whose int() is -1 means now; other negatives pass.
        (b"a.b 1 -1", ok("a.b", 1.0, CARBON_REFERENCE_NOW)),
        (b"a.b 1 -1.5", ok("a.b", 1.0, CARBON_REFERENCE_NOW)),
        (b"a.b 1 -2", ok("a.b", 1.0, -2.0)),
        (b"a.b 1 -0.5", ok("a.b", 1.0, -0.5)),
        (b"a.b 1 0", ok("a.b", 1.0, 0.0)),
        (b"a.b 1 4294967296", ok("a.b", 1.0, 4_294_967_296.0)),
        (b"a.b 1 1e20", ok("a.b", 1.0, 1e20)),
        // Names are not checked: anything without whitespace, UTF-8 decoded.
        (b"a;tag=x 1 1700000000", ok("a;tag=x", 1.0, 1.7e9)),
        (b"a..b 1 1700000000", ok("a..b", 1.0, 1.7e9)),
        (b".a/b 1 1700000000", ok(".a/b", 1.0, 1.7e9)),
        ("é.ü 1 1700000000".as_bytes(), ok("é.ü", 1.0, 1.7e9)),
        // Unicode whitespace separates and Unicode digits are digits.
        (
            "a.b\u{a0}\u{661}\u{a0}1700000000".as_bytes(),
            ok("a.b", 1.0, 1.7e9),
        ),
    ];
    let invalid: Vec<&[u8]> = vec![
        b"a.b 1",
        b"a.b",
        b"",
        b"   ",
        b"a.b 1 1700000000 extra",
        b"a.b abc 1700000000",
        b"a.b 0x10 1700000000",
        b"a.b 1 abc",
    ];
    // These raise out of the receiver: Twisted then drops the connection.
    let raised: Vec<(&[u8], &str)> = vec![
        (
            b"a.b 1 nan",
            "ValueError: cannot convert float NaN to integer",
        ),
        (
            b"a.b 1 inf",
            "OverflowError: cannot convert float infinity to integer",
        ),
        (
            b"a.b 1 1e400",
            "OverflowError: cannot convert float infinity to integer",
        ),
        (
            b"\xff.b 1 1700000000",
            "UnicodeDecodeError: 'utf-8' codec can't decode",
        ),
    ];
    let long = vec![b'x'; 16_385];
    let fits = [&b"a.b 1 1700000000 "[..], &vec![b' '; 16_384 - 17]].concat();

    let mut lines: Vec<&[u8]> = cases.iter().map(|(l, _)| *l).collect();
    lines.extend(&invalid);
    lines.extend(raised.iter().map(|(l, _)| *l));
    lines.push(&long);
    lines.push(&fits);
    let got = carbon_reference_parse(&lines);
    assert_eq!(got.len(), lines.len());
    let mut got = got.into_iter();

    for (line, want) in &cases {
        let outcome = got.next().unwrap();
        assert_eq!(&outcome, want, "{:?}", String::from_utf8_lossy(line));
        if let (Accepted { value: a, .. }, Accepted { value: b, .. }) = (&outcome, want) {
            assert_eq!(a.is_sign_negative(), b.is_sign_negative(), "-0 stays -0");
        }
    }
    for line in &invalid {
        let outcome = got.next().unwrap();
        let Invalid(message) = &outcome else {
            panic!("{:?}: {outcome:?}", String::from_utf8_lossy(line));
        };
        assert!(
            message.starts_with("invalid line received from client "),
            "{message}"
        );
        let shown = String::from_utf8_lossy(line).trim().to_string();
        assert!(
            message.ends_with(&format!("ignoring [{shown}]")),
            "{message}"
        );
    }
    for (line, error) in &raised {
        let outcome = got.next().unwrap();
        assert!(
            matches!(&outcome, Raised(e) if e.starts_with(error)),
            "{:?}: {outcome:?}",
            String::from_utf8_lossy(line)
        );
    }
    assert_eq!(
        got.next().unwrap(),
        Closed("line longer than 16384 bytes".into())
    );
    assert_eq!(
        got.next().unwrap(),
        ok("a.b", 1.0, 1.7e9),
        "16,384 bytes fit"
    );
}

/// carbon's UDP receiver: lines split by any line break, an invalid line
/// logged and skipped, an exception losing the rest of the datagram.
#[test]
fn carbon_datagrams_are_read_line_by_line_as_observed() {
    use CarbonOutcome::*;
    let ok = |path: &str, value: f64| Accepted {
        path: path.into(),
        value,
        timestamp: 2.0,
    };
    let got = carbon_reference_datagrams(&[
        b"a.b 1 2\nbad\na.b nan 2\na.b 1 inf\na.b 2 2",
        b"a.b 1 nan\na.b 2 2",
        b"a.b 1 2\ra.c 1 2",
        "a.b 1 2\u{2028}a.c 1 2".as_bytes(),
        b"\xff 1 2\na.b 1 2",
    ]);
    assert_eq!(got.len(), 5);
    assert_eq!(got[0].len(), 3, "{:?}", got[0]);
    assert_eq!(got[0][0], ok("a.b", 1.0));
    assert!(matches!(&got[0][1], Invalid(m) if m.ends_with("ignoring [bad]")));
    assert!(matches!(&got[0][2], Raised(e) if e.starts_with("OverflowError")));
    // Over UDP a NaN timestamp is an invalid line, not an exception.
    assert!(matches!(&got[1][0], Invalid(m) if m.ends_with("ignoring [a.b 1 nan]")));
    assert_eq!(got[1][1], ok("a.b", 2.0));
    assert_eq!(got[2], [ok("a.b", 1.0), ok("a.c", 1.0)]);
    assert_eq!(got[3], [ok("a.b", 1.0), ok("a.c", 1.0)]);
    assert!(matches!(&got[4][..], [Raised(e)] if e.starts_with("UnicodeDecodeError")));
}
