//! `tally serve`'s Graphite API as an operator configures it: the limits of
//! `--graphite-max-series`, `--graphite-max-points` and `--graphite-max-find`
//! (or their `TALLY_GRAPHITE_*` variables, or their keys in the settings
//! file) answer graphite-web's 400 naming the limit past it and change
//! nothing; and every `/graphite/...` route, GET and POST, is a read for the
//! token rules: open with `--token` alone, behind the bearer token with
//! `--protect-reads`. The real binary on a free port, on SQLite.

use crate::support;

use std::net::SocketAddr;
use std::path::Path;

use serde_json::Value as Json;
use support::{Serve, settings_file};
use tally_testkit::http::{self, Response};

const TOKEN: &str = "correct-horse";

/// `tally serve` on the SQLite store in `dir` with exact writes and
/// `extra` flags, the variables `env` set.
fn serve(dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> Serve {
    let mut args = vec!["--write-mode", "exact"];
    args.extend_from_slice(extra);
    support::serve_with_env(&["--data-dir", dir.to_str().unwrap()], &args, env)
}

fn addr(s: &Serve) -> SocketAddr {
    s.base.strip_prefix("http://").unwrap().parse().unwrap()
}

/// `method target` to `s`, with `headers`, `body` as a form when not empty.
fn ask(s: &Serve, method: &str, target: &str, headers: &[(&str, &str)], body: &str) -> Response {
    let mut headers = headers.to_vec();
    if !body.is_empty() {
        headers.push(("Content-Type", "application/x-www-form-urlencoded"));
    }
    http::request(addr(s), method, target, &headers, body.as_bytes()).unwrap()
}

fn get(s: &Serve, target: &str) -> Response {
    ask(s, "GET", target, &[], "")
}

/// Five counters, `app.h0.requests` to `app.h4.requests`, written now.
fn write_counters(s: &Serve) {
    let body = r#"{"increments": [
        {"name": "app.h0.requests", "count": 1}, {"name": "app.h1.requests", "count": 2},
        {"name": "app.h2.requests", "count": 3}, {"name": "app.h3.requests", "count": 4},
        {"name": "app.h4.requests", "count": 5}]}"#;
    let answer = http::request(
        addr(s),
        "POST",
        "/v1/incr",
        &[("Content-Type", "application/json")],
        body.as_bytes(),
    )
    .unwrap();
    assert_eq!(answer.status, 200, "{}", answer.text());
}

/// The counters' totals of the last day, as the JSON API reads them.
fn totals(s: &Serve) -> Vec<i64> {
    (0..5)
        .map(|h| {
            let answer = get(
                s,
                &format!("/v1/counters/app.h{h}.requests?precision=86400"),
            );
            assert_eq!(answer.status, 200, "{}", answer.text());
            support::day_sum(&answer.text())
        })
        .collect()
}

/// The answer must be graphite-web's 400 naming `limit` and its value.
fn refused(answer: &Response, limit: &str, max: usize) {
    let text = answer.text();
    assert_eq!(answer.status, 400, "{text}");
    assert!(
        answer.content_type().starts_with("text/html"),
        "{}",
        answer.content_type()
    );
    assert!(text.starts_with("Invalid parameters ("), "{text}");
    assert!(
        text.contains(limit) && text.contains(&format!(" {max} ")),
        "{text}"
    );
}

fn render(target: &str, rest: &str) -> String {
    format!("/graphite/render?target={target}&from=-1h&format=json{rest}")
}

fn series_count(answer: &Response) -> usize {
    assert_eq!(answer.status, 200, "{}", answer.text());
    let json: Json = serde_json::from_slice(&answer.body).unwrap();
    json.as_array().unwrap().len()
}

/// The three limits, each set by its flag, its variable or its key in the
/// settings file: within them, answers; past them, a 400 naming the limit
/// that writes nothing and leaves every later answer as it was.
#[test]
fn graphite_limits_answer_400_naming_them_from_flag_variable_or_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = settings_file(
        dir.path(),
        "graphite_max_series = 3\ngraphite_max_points = 100\ngraphite_max_find = 3\n",
    );
    let file = file.to_str().unwrap().to_owned();
    let flags = [
        "--graphite-max-series",
        "3",
        "--graphite-max-points",
        "100",
        "--graphite-max-find",
        "3",
    ];
    let vars = [
        ("TALLY_GRAPHITE_MAX_SERIES", "3"),
        ("TALLY_GRAPHITE_MAX_POINTS", "100"),
        ("TALLY_GRAPHITE_MAX_FIND", "3"),
    ];
    type Setup<'a> = (&'a str, Vec<&'a str>, &'a [(&'a str, &'a str)]);
    let setups: [Setup; 3] = [
        ("flags", flags.to_vec(), &[]),
        ("variables", vec![], &vars),
        ("file", vec!["--config", &file], &[]),
    ];
    let mut written = false;
    for (how, extra, env) in setups {
        let s = serve(dir.path(), &extra, env);
        if !written {
            write_counters(&s);
            written = true;
        }
        let before = totals(&s);
        assert_eq!(before, [1, 2, 3, 4, 5], "{how}");
        // At a fixed `now`, so that the clock's minutes do not move the answer.
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let fixed = format!("&now={now}");
        let one_before = get(&s, &render("app.h0.requests", &fixed)).text();
        assert!(one_before.contains("[1.0, "), "{one_before}");
        // Series: three match, five do not.
        let within = get(&s, &render("app.h%7B0,1,2%7D.requests", "&maxDataPoints=1"));
        assert_eq!(series_count(&within), 3, "{how}");
        refused(
            &get(&s, &render("app.*.requests", "&maxDataPoints=1")),
            "series limit",
            3,
        );
        refused(
            &get(&s, &render("sumSeries(app.*.requests)", "&maxDataPoints=1")),
            "series limit",
            3,
        );
        // Points: one series of an hour at one minute is 60; three are 180,
        // unless maxDataPoints brings them down.
        assert_eq!(
            series_count(&get(&s, &render("app.h0.requests", ""))),
            1,
            "{how}"
        );
        refused(
            &get(&s, &render("app.h%7B0,1,2%7D.requests", "")),
            "points limit",
            100,
        );
        let thinned = get(
            &s,
            &render("app.h%7B0,1,2%7D.requests", "&maxDataPoints=30"),
        );
        assert_eq!(series_count(&thinned), 3, "{how}");
        // Find: five hosts are past three; one host's one leaf is not.
        refused(
            &get(&s, "/graphite/metrics/find?query=app.*"),
            "find limit",
            3,
        );
        refused(
            &ask(&s, "POST", "/graphite/metrics/find", &[], "query=app.*"),
            "find limit",
            3,
        );
        refused(
            &get(&s, "/graphite/metrics/expand?query=app.*"),
            "find limit",
            3,
        );
        let one = get(&s, "/graphite/metrics/find?query=app.h0.*");
        assert_eq!(series_count(&one), 1, "{how}");
        // Nothing changed.
        assert_eq!(totals(&s), before, "{how}");
        assert_eq!(
            get(&s, &render("app.h0.requests", &fixed)).text(),
            one_before,
            "{how}"
        );
    }
    // A flag wins over the file; a limit of 0 is refused at start.
    let s = serve(
        dir.path(),
        &["--config", &file, "--graphite-max-series", "5"],
        &[],
    );
    assert_eq!(
        series_count(&get(&s, &render("app.*.requests", "&maxDataPoints=1"))),
        5
    );
    drop(s);
    for (flag, what) in [
        ("--graphite-max-series", "graphite-max-series"),
        ("--graphite-max-points", "graphite-max-points"),
        ("--graphite-max-find", "graphite-max-find"),
    ] {
        let out = support::tally()
            .args(["--data-dir", dir.path().to_str().unwrap()])
            .args(["serve", "--listen", "127.0.0.1:0", flag, "0"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{stderr}");
        assert!(
            stderr.contains(&format!("{what} must be at least 1")),
            "{stderr}"
        );
    }
}

/// Every route of the Graphite API, GET and (render and find, which
/// Grafana posts) POST, as Grafana sends them.
const ROUTES: [(&str, &str, &str); 10] = [
    (
        "GET",
        "/graphite/render?target=app.h0.requests&from=-1h&format=json",
        "",
    ),
    (
        "POST",
        "/graphite/render",
        "target=app.h0.requests&from=-1h&format=json",
    ),
    ("GET", "/graphite/metrics/find?query=app.*", ""),
    (
        "POST",
        "/graphite/metrics/find?from=-1h",
        "query=app.{h0,h1}.*",
    ),
    ("GET", "/graphite/metrics/expand?query=app.*", ""),
    ("GET", "/graphite/functions", ""),
    ("GET", "/graphite/version", ""),
    ("GET", "/graphite/tags/autoComplete/tags", ""),
    ("GET", "/graphite/tags/autoComplete/values?tag=name", ""),
    (
        "GET",
        "/graphite/render?target=constantLine(100)&from=-1h&format=json",
        "",
    ),
];

/// `--token` alone guards writes only: every Graphite route, POST too,
/// answers without a token. With `--protect-reads` each needs the bearer
/// token: 401 without it or with a wrong one, its answer with it.
#[test]
fn graphite_routes_are_reads_for_the_token_rules() {
    let dir = tempfile::tempdir().unwrap();
    let bearer = format!("Bearer {TOKEN}");
    let open = serve(dir.path(), &["--token", TOKEN], &[]);
    // Writes need the token...
    let write = ask(&open, "POST", "/v1/counters/app.h0.requests/incr", &[], "");
    assert_eq!(write.status, 401, "{}", write.text());
    let write = ask(
        &open,
        "POST",
        "/v1/counters/app.h0.requests/incr",
        &[("Authorization", &bearer)],
        "",
    );
    assert_eq!(write.status, 200, "{}", write.text());
    // ...the Graphite API does not.
    let mut answers = Vec::new();
    for (method, target, body) in ROUTES {
        let answer = ask(&open, method, target, &[], body);
        assert_eq!(answer.status, 200, "{method} {target}: {}", answer.text());
        answers.push(answer.body);
    }
    let find: Json = serde_json::from_slice(&answers[2]).unwrap();
    assert_eq!(find[0]["id"], "app.h0", "{find}");
    drop(open);

    let guarded = serve(dir.path(), &["--token", TOKEN, "--protect-reads"], &[]);
    for (i, (method, target, body)) in ROUTES.into_iter().enumerate() {
        let answer = ask(&guarded, method, target, &[], body);
        assert_eq!(answer.status, 401, "{method} {target}: {}", answer.text());
        let answer = ask(
            &guarded,
            method,
            target,
            &[("Authorization", "Bearer wrong-horse")],
            body,
        );
        assert_eq!(answer.status, 401, "{method} {target}: {}", answer.text());
        let answer = ask(
            &guarded,
            method,
            target,
            &[("Authorization", &bearer)],
            body,
        );
        assert_eq!(answer.status, 200, "{method} {target}: {}", answer.text());
        // The same answer as the open server's (a render's own clock aside).
        if !target.starts_with("/graphite/render") {
            assert_eq!(answer.body, answers[i], "{method} {target}");
        }
    }
}
