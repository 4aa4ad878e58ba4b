//! Statistics over HTTP.

use super::*;

per_backend!(server: stats_over_http);

/// Statistics over HTTP (issue 9 part 3): one value and several, a batch
/// all or nothing, reads per precision with a range summary, listing,
/// ranking, bad input (400, nothing written) and delete; in both modes.
pub(super) async fn stats_over_http(kind: Kind) {
    for exact in [false, true] {
        let s = server(kind, ServerSettings::default(), exact).await;
        let at = (s.f.clock.now().whole_secs() / 60 * 60 + 15) as f64;
        let ok = if exact {
            StatusCode::OK
        } else {
            StatusCode::ACCEPTED
        };
        let a = s
            .post(
                "/v1/stats/lat/record",
                json!({ "values": [10.0, 20.0], "at": at }),
            )
            .await;
        assert_eq!(a.status, ok, "{}", a.text);
        let a = s
            .post("/v1/stats/lat/record", json!({ "value": 30, "at": at }))
            .await;
        assert_eq!(a.status, ok, "{}", a.text);
        // Bad input: 400 naming the problem, nothing written.
        for bad in [
            json!({ "values": [] }),
            json!({ "value": 1.0, "values": [2.0] }),
            json!({ "value": "12" }),
            json!({}),
        ] {
            s.post("/v1/stats/bad/record", bad.clone()).await.error(
                StatusCode::BAD_REQUEST,
                if bad.get("value").is_some_and(|v| v.is_string()) {
                    "invalid_json"
                } else {
                    "invalid_input"
                },
            );
        }
        let batch = json!({ "observations": [{ "name": "ok", "value": 1.0 }, { "name": "bad\u{7}", "value": 2.0 }] });
        s.post("/v1/record", batch)
            .await
            .error(StatusCode::BAD_REQUEST, "invalid_name");
        s.get_errors(
            StatusCode::BAD_REQUEST,
            &[
                ("/v1/stats/lat?quantiles=0,0.5", "invalid_input"),
                ("/v1/stats/top?by=median", "invalid_input"),
                ("/v1/stats/lat?precision=7", "unknown_precision"),
            ],
        )
        .await;
        let batch = json!({ "observations": [{ "name": "api:/a", "value": 5.0, "at": at }, { "name": "api:/b", "value": 7.0, "at": at }] });
        assert_eq!(s.post("/v1/record", batch).await.status, ok);
        s.flush().await;
        let body = s
            .get("/v1/stats/lat?precision=60&quantiles=0.5,0.99")
            .await
            .json();
        let slice = &body["precisions"]["60"][0];
        assert_eq!(slice["start"], at as u64 - 15, "{body}");
        assert_eq!(
            (&slice["count"], &slice["sum"], &slice["min"], &slice["max"]),
            (&json!(3), &json!(60.0), &json!(10.0), &json!(30.0))
        );
        assert_eq!(
            (&slice["mean"], &slice["stddev"]),
            (&json!(20.0), &json!(10.0))
        );
        assert_eq!(slice["quantiles"]["0.99"], 30.0, "{body}");
        let all = s
            .get(&format!(
                "/v1/stats/lat?from={}&to={}",
                at - 15.0,
                at + 44.0
            ))
            .await
            .json();
        assert_eq!(all["precisions"].as_object().unwrap().len(), 7, "{all}");
        assert_eq!(all["summary"]["count"], 3, "{all}");
        let list = s.get("/v1/stats?prefix=api:").await.json();
        assert_eq!(list, json!({ "stats": ["api:/a", "api:/b"], "next": null }));
        assert_eq!(
            s.get("/v1/stats?prefix=bad").await.json()["stats"],
            json!([])
        );
        let top = s
            .get(&format!(
                "/v1/stats/top?by=max&prefix=api:&from={}&to={}&limit=1",
                at - 15.0,
                at
            ))
            .await
            .json();
        assert_eq!(top["stats"][0]["name"], "api:/b", "{top}");
        assert_eq!(top["stats"].as_array().unwrap().len(), 1);
        s.delete_once("/v1/stats/lat").await;
        // A deleted (or never recorded) statistic is not found.
        s.get("/v1/stats/lat")
            .await
            .error(StatusCode::NOT_FOUND, "not_found");
        // The server records its own requests' durations, per route.
        s.flush().await;
        let own = s.get("/v1/stats?prefix=tally:http:latency").await.json();
        let names = own["stats"].as_array().unwrap();
        assert!(names.contains(&json!("tally:http:latency")), "{own}");
        assert!(
            names.contains(&json!("tally:http:latency:POST /v1/stats/{name}/record")),
            "{own}"
        );
    }
}
