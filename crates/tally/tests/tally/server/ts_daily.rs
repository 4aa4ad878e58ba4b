//! Time series and daily counts over HTTP.

use super::*;

per_backend!(server: time_series_and_daily_over_http);

pub(super) async fn time_series_and_daily_over_http(kind: Kind) {
    let s = server(kind, ServerSettings::default(), true).await;
    let now = s.f.clock.now().whole_secs() as f64;
    let a = s
        .post(
            "/v1/ts/group/incr",
            json!({ "key": "42", "count": 3, "at": now }),
        )
        .await;
    assert_eq!(
        (a.status, a.json()),
        (StatusCode::OK, json!({ "written": 1 })),
        "{}",
        a.text
    );
    let batch = json!({ "increments": [{ "model": "group", "key": "42", "at": now - 20.0 }, { "model": "group", "key": "7", "count": 2, "at": now }] });
    assert_eq!(
        s.post("/v1/ts/incr", batch).await.json(),
        json!({ "written": 2 })
    );
    // A read of `group` over the last 30 s.
    let last_30s = |query: &str| format!("/v1/ts/group/{query}&start={}&end={now}", now - 30.0);
    let range = s
        .get(&format!("{}&rollup=10", last_30s("range?keys=42,7")))
        .await
        .json();
    assert_eq!(range["rollup"], 10);
    let k42: i64 = range["series"][0]["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p[1].as_i64().unwrap())
        .sum();
    assert_eq!(
        (range["series"][0]["key"].clone(), k42),
        (json!("42"), 4),
        "{range}"
    );
    let sums = s.get(&last_30s("sums?keys=7")).await.json();
    assert_eq!(sums["totals"][0]["total"], 2, "{sums}");
    s.post(
        "/v1/ts/group/distinct",
        json!({ "key": "42", "values": ["a", "b", "a", "c"], "at": now }),
    )
    .await;
    let d = s
        .get(&last_30s("distinct?keys=42&view=totals"))
        .await
        .json();
    assert_eq!(d["totals"][0]["total"], 3, "{d}");
    s.post(
        "/v1/ts/group/frequent",
        json!({ "key": "42", "items": [["x", 5], ["y", 9]], "at": now }),
    )
    .await;
    let top = s.get(&last_30s("top?key=42&n=1")).await.json();
    assert_eq!(top["items"], json!([{ "item": "y", "count": 9 }]), "{top}");
    s.get_errors(
        StatusCode::BAD_REQUEST,
        &[
            ("/v1/ts/group/range", "invalid_input"),
            ("/v1/ts/group/distinct?keys=42&view=pie", "invalid_input"),
        ],
    )
    .await;
    assert_eq!(
        s.post("/v1/ts/group/merge", json!({ "into": "42", "from": "7" }))
            .await
            .json(),
        json!({ "merged": true })
    );
    assert_eq!(
        s.post("/v1/ts/group/delete", json!({ "keys": ["42"] }))
            .await
            .json(),
        json!({ "deleted": 1 })
    );

    let v = s.post("/v1/daily/314/incr", json!({ "count": 2 })).await;
    assert_eq!(v.status, StatusCode::OK, "{}", v.text);
    assert_eq!(v.json()["total"], 2);
    let views = json!({ "views": [{ "entity": "314", "at": now - 86_400.0 }, { "entity": "99" }] });
    assert_eq!(
        s.post("/v1/daily/incr", views).await.json()["counted"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    let summary = s.get("/v1/daily/314?days=3").await.json();
    let counts: Vec<i64> = summary["days"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["count"].as_i64().unwrap())
        .collect();
    assert_eq!(counts, vec![0, 1, 2], "{summary}");
    assert_eq!(
        (summary["today"]["count"].clone(), summary["total"].clone()),
        (json!(2), json!(3))
    );
    let today = summary["today"]["day"].as_str().unwrap().to_owned();
    assert_eq!(
        s.get(&format!("/v1/daily/314/days/{today}")).await.json()["count"],
        2
    );
    s.get_errors(
        StatusCode::BAD_REQUEST,
        &[
            ("/v1/daily/314/days/2026-13-01", "invalid_input"),
            ("/v1/daily/314/days/2026é1-22", "invalid_input"),
        ],
    )
    .await;
}
