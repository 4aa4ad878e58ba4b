//! What the store's tests share.

use super::super::{Redis, RedisHandle};
use super::super::layout::Layout;
use super::RedisSliceStore;
use crate::clock::SharedClock;
use crate::engine::store::WriteSeq;
use crate::engine::{Batch, CellDelta, SeriesWrite, Space, Value};
use crate::name::Name;

/// A connection to `url` and a store on it in the default layout.
pub(super) async fn default_store(url: &str) -> (Redis, RedisSliceStore) {
    let redis = Redis::connect(url).await.unwrap();
    let clock: SharedClock = std::sync::Arc::new(crate::clock::ManualClock::at(0.0));
    let store = RedisSliceStore::new(redis.clone(), Layout::default(), clock).unwrap();
    (redis, store)
}

/// A write of `delta` into each (precision, slice) of `cells` of the
/// series `name`.
pub(in super::super) fn write(name: &str, cells: &[(u64, u64)], delta: &Value) -> SeriesWrite {
    SeriesWrite {
        name: Name::new(name).unwrap(),
        cells: cells
            .iter()
            .map(|&(precision, slice)| CellDelta {
                precision,
                slice,
                delta: delta.clone(),
            })
            .collect(),
    }
}

/// A batch of `writes` into `space`; with `seq`, sent as that write of
/// writer 1's lane 0.
pub(super) fn batch_of(
    space: &std::sync::Arc<Space>,
    writes: Vec<SeriesWrite>,
    seq: Option<u64>,
) -> Batch {
    Batch {
        space: space.clone(),
        writes,
        seq: seq.map(|seq| WriteSeq {
            writer: 1,
            lane: 0,
            seq,
        }),
    }
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

/// What the DUMP readers' tests read from: a new server, the default store
/// on it and a connection; up to 512 entries of up to 10,000 bytes stay in
/// a hash's listpack there.
pub(super) async fn listpack_server() -> (tally_testkit::RedisServer, RedisSliceStore, RedisHandle)
{
    let server = tally_testkit::RedisServer::start();
    let (redis, store) = default_store(&server.url()).await;
    let mut conn = redis.handle();
    for (setting, value) in [
        ("hash-max-listpack-entries", "512"),
        ("hash-max-listpack-value", "10000"),
    ] {
        config_set(&mut conn, setting, value).await;
    }
    (server, store, conn)
}

/// `HSET key field value`.
pub(super) async fn hset(
    conn: &mut impl redis::aio::ConnectionLike,
    key: &str,
    field: impl redis::ToRedisArgs,
    value: impl redis::ToRedisArgs,
) {
    let _: () = redis::cmd("HSET")
        .arg(key)
        .arg(field)
        .arg(value)
        .query_async(conn)
        .await
        .unwrap();
}

/// `CONFIG SET setting value`.
pub(super) async fn config_set(
    conn: &mut impl redis::aio::ConnectionLike,
    setting: &str,
    value: &str,
) {
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg(setting)
        .arg(value)
        .query_async(conn)
        .await
        .unwrap();
}

/// The DUMP payload of `key`.
pub(super) async fn dump_payload(conn: &mut impl redis::aio::ConnectionLike, key: &str) -> Vec<u8> {
    redis::cmd("DUMP").arg(key).query_async(conn).await.unwrap()
}

/// A redis-server and a store on it in the default layout, its clock at
/// `now`, with counters at 1 and 60 s (10 samples): the server must live
/// as long as the store is used.
pub(super) async fn counters_at(
    now: u64,
) -> (
    tally_testkit::RedisServer,
    Redis,
    RedisSliceStore,
    std::sync::Arc<crate::engine::Space>,
) {
    let server = tally_testkit::RedisServer::start();
    let redis = Redis::connect(&server.url()).await.unwrap();
    let clock: SharedClock = std::sync::Arc::new(crate::clock::ManualClock::at(now as f64));
    let store = RedisSliceStore::new(redis.clone(), Layout::default(), clock).unwrap();
    let space = std::sync::Arc::new(crate::engine::Space::counters(&FOLDING, 10));
    (server, redis, store, space)
}

/// The precisions of [`counters_at`]'s space: as few as counters fold with
/// ([`super::protocol::SUM_FOLD_MIN`]), 1 and 60 s among them.
pub(super) const FOLDING: [u64; 5] = [1, 5, 10, 30, 60];

/// A cell of each of [`FOLDING`]'s precisions at `second`.
pub(super) fn cells_at(second: u64) -> Vec<(u64, u64)> {
    FOLDING.iter().map(|&p| (p, second / p * p)).collect()
}

/// The slices of counter `name` of `space` at 1 and 60 s, read through
/// `store` (pending slices included).
pub(super) async fn sums_of(
    store: &RedisSliceStore,
    space: &crate::engine::Space,
    name: &str,
) -> Vec<Vec<(u64, i64)>> {
    let names = [Name::new(name).unwrap()];
    let mut read = store
        .read_sum_slices(crate::engine::SliceRead::new(space, &names, &[1, 60]))
        .await
        .unwrap();
    read.swap_remove(0)
}

/// How many times the server behind `redis` ran `command` since its
/// statistics were last reset (`INFO commandstats`; a script's commands
/// count).
pub(super) async fn calls(redis: &Redis, command: &str) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut redis.handle())
        .await
        .unwrap();
    tally_testkit::command_calls(&info, command)
}
