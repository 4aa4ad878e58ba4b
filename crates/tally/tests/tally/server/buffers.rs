//! Buffered rows over HTTP.

use super::*;

per_backend!(server: buffered_rows_over_http);

async fn buffered_rows_over_http(kind: Kind) {
    let mut s = server(kind, ServerSettings::default(), true).await;
    // No buffers configured: the routes say so.
    s.get("/v1/buffers/stats")
        .await
        .error(StatusCode::NOT_FOUND, "not_found");
    let (_dir, flusher) = with_buffers(&mut s).await;

    let change = json!({ "table": "groups", "key": { "id": "42" }, "add": { "times_seen": 2 }, "set": { "last_seen": "today" } });
    assert_eq!(
        s.post("/v1/buffers/incr", change.clone()).await.json(),
        json!({ "buffered": true })
    );
    assert_eq!(
        s.post("/v1/buffers/incr", change).await.json(),
        json!({ "buffered": true })
    );
    // Pending, not yet in SQL: the read adds them.
    let row = s.get("/v1/buffers/groups/row?id=42").await.json();
    assert_eq!(row["counters"]["times_seen"], 4, "{row}");
    assert_eq!(row["stored"], Value::Null, "{row}");
    assert_eq!(
        s.get("/v1/buffers/stats").await.json()["backlog"]["pending_rows"],
        1
    );
    flusher.drain().await.unwrap();
    let row = s.get("/v1/buffers/groups/row?id=42").await.json();
    assert_eq!(
        (
            row["counters"]["times_seen"].clone(),
            row["last_write"]["last_seen"].clone()
        ),
        (json!(4), json!("today")),
        "{row}"
    );
    assert!(row["stored"].is_object(), "{row}");
    let metrics = s.get("/metrics").await.text;
    assert!(
        metrics.contains("tally_buffer_rows_written_total 1\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("tally_buffer_pending_rows 0\n"),
        "{metrics}"
    );
    // What the table mapping refuses (an unknown table or column, a missing
    // key column) is 422: the document leaves the mapping to the
    // configuration. What the document refuses is 400.
    for (bad, status, code) in [
        (
            json!({ "table": "nope", "key": { "id": "1" }, "add": { "times_seen": 1 } }),
            StatusCode::UNPROCESSABLE_ENTITY,
            "unprocessable",
        ),
        (
            json!({ "table": "groups", "key": { "id": "1" }, "add": { "drop table": 1 } }),
            StatusCode::UNPROCESSABLE_ENTITY,
            "unprocessable",
        ),
        (
            json!({ "table": "groups", "key": { "id": "1" }, "add": { "times_seen": 1.5 } }),
            StatusCode::BAD_REQUEST,
            "invalid_json",
        ),
    ] {
        s.post("/v1/buffers/incr", bad).await.error(status, code);
    }
    s.get("/v1/buffers/groups/row")
        .await
        .error(StatusCode::UNPROCESSABLE_ENTITY, "unprocessable");
}
