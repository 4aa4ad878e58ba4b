//! What the store's tests share.

use super::super::Redis;
use super::super::layout::Layout;
use super::RedisSliceStore;
use crate::clock::SharedClock;

/// A connection to `url` and a store on it in the default layout.
pub(super) async fn default_store(url: &str) -> (Redis, RedisSliceStore) {
    let redis = Redis::connect(url).await.unwrap();
    let clock: SharedClock = std::sync::Arc::new(crate::clock::ManualClock::at(0.0));
    let store = RedisSliceStore::new(redis.clone(), Layout::default(), clock).unwrap();
    (redis, store)
}

/// Texts that take every listpack entry encoding (integers of each
/// width and their edges, numbers a listpack keeps as strings, short,
/// 12-bit and 32-bit string lengths): the DUMP parser's cases.
pub(super) fn listpack_edge_texts() -> Vec<String> {
    [
        "0",
        "7",
        "127",
        "128",
        "-1",
        "-4096",
        "4095",
        "4096",
        "-32768",
        "32767",
        "40000",
        "-8388608",
        "8388607",
        "9000000",
        "2147483647",
        "-2147483648",
        "2147483648",
        "1700000000",
        "9223372036854775807",
        "-9223372036854775808",
        "18446744073709551616",
        "007",
        "",
        "abc",
        "12x",
        "1e3",
    ]
    .iter()
    .map(|t| t.to_string())
    .chain(["x".repeat(100), "y".repeat(5000)])
    .collect()
}

/// Up to 512 entries of up to 10,000 bytes stay in a hash's listpack.
pub(super) async fn keep_long_values_in_listpacks(conn: &mut impl redis::aio::ConnectionLike) {
    for (setting, value) in [
        ("hash-max-listpack-entries", "512"),
        ("hash-max-listpack-value", "10000"),
    ] {
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg(setting)
            .arg(value)
            .query_async(conn)
            .await
            .unwrap();
    }
}
