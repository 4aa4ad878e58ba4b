//! Redis-only time-series tests: a merge interrupted by a crash after its
//! first step (the data moved into the journal) loses nothing, and the next
//! merge of the same keys finishes it. On a standalone server and a cluster.

use crate::common;

use common::{Fixture, Kind, Total, range_totals};
use tally::Clock;
use tally::tsdb::TsdbSettings;
use tally::tsdb::precision::vshard_of;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupted_merge_is_finished_by_the_next_one_standalone() {
    interrupted_merge_is_finished_by_the_next_one(Kind::RedisDefault).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupted_merge_is_finished_by_the_next_one_cluster() {
    interrupted_merge_is_finished_by_the_next_one(Kind::RedisCluster).await;
}

async fn interrupted_merge_is_finished_by_the_next_one(kind: Kind) {
    let f = Fixture::near_now(kind).await;
    let ts = f.tsdb(TsdbSettings::default()).await;
    let now = f.clock.now().whole_secs();
    let (into, from) = ("1".to_owned(), "2".to_owned());
    assert_ne!(vshard_of(&into), vshard_of(&from));
    ts.incr("group", &into, 3).await.unwrap();
    ts.incr("group", &from, 4).await.unwrap();
    ts.record("group", &from, &["u1".into(), "u2".into()], None)
        .await
        .unwrap();

    // Step 1 of a merge, as the store runs it, for the 10 s bucket only;
    // then the process "dies".
    let from_tag = format!("{{tally:ts:group:{}}}", vshard_of(&from));
    let journal = format!("{from_tag}:mj:{into}");
    let bucket = now / 10 * 10;
    let label = format!("10:{bucket}");
    let mut raw = f.raw_any().await;
    let take = redis::Script::new(include_str!(
        "../../src/backend/redis/lua/ts_merge_take.lua"
    ));
    let mut invocation = take.prepare_invoke();
    invocation
        .key(&journal)
        .key(format!("{from_tag}:c:10:{bucket}"))
        .key(format!("{from_tag}:d:10:{bucket}:{from}"))
        .key(format!("{from_tag}:f:10:{bucket}:{from}"))
        .key(format!("{journal}:d:{label}"))
        .key(format!("{journal}:f:{label}"))
        .arg(&from)
        .arg("crashed-merge")
        .arg(now + 3600)
        .arg(&label);
    let (state, _): (i64, String) = match &mut raw {
        common::RawConn::Single(c) => invocation.invoke_async(c).await.unwrap(),
        common::RawConn::Cluster(c) => invocation.invoke_async(c).await.unwrap(),
    };
    assert_eq!(state, 1);
    let k = vec![into.clone(), from.clone()];
    let t = now as f64;
    let sums = range_totals(&ts, Total::Sum, "group", &k, (t, t), 10).await;
    // Moved, not lost: it is in the journal, which has a TTL.
    assert_eq!(sums, vec![3, 0]);
    let ttl: i64 = raw.query(redis::cmd("TTL").arg(&journal)).await;
    assert!(ttl > 0, "{ttl}");

    // The next merge finishes the interrupted one, then merges the rest.
    ts.merge("group", &into, &from).await.unwrap();
    for rollup in [10, 3600, 86_400] {
        let sums = range_totals(&ts, Total::Sum, "group", &k, (t, t), rollup).await;
        assert_eq!(sums, vec![7, 0], "rollup {rollup}");
        let d = range_totals(&ts, Total::Distinct, "group", &k, (t, t), rollup).await;
        assert_eq!(d[0], 2, "rollup {rollup}");
    }
    let exists: i64 = raw.query(redis::cmd("EXISTS").arg(&journal)).await;
    assert_eq!(exists, 0, "the journal is gone");
}
