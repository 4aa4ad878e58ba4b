//! The slice engine's behaviour suite, for a space other than counters:
//! every test runs on SQLite (memory and file), a real redis-server and a
//! real Redis Cluster, through `Backend::slice_store`. The counters' own
//! suite (tests/counters.rs) covers the counters' space on the same stores.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::{Fixture, Kind, apply_numbered};
use tally::engine::kinds::{StatsValue, TopValue};
use tally::engine::plan::{Item, plan};
use tally::engine::read::{merge_values, read_range};
use tally::engine::writer::Writer;
use tally::engine::{
    Applied, Batch, CleanJob, Kind as ValueKind, Retention, SeriesList, SliceRead, SliceSel,
    SliceStore, Space, Value,
};
use tally::{Error, Increment, Name, Timestamp};

per_backend!(features:
    writes_read_back_at_every_resolution,
    ranges_merge_slices_and_series,
    overflow_anywhere_writes_nothing,
    sequenced_batches_apply_once,
    list_delete_and_clean,
    collapsed_listings_name_each_branch_once,
    a_space_does_not_mix_with_counters,
    the_writer_serves_any_space,
    statistics_merge_in_the_store,
    kinds_no_store_keeps_yet_are_refused,
);

/// Sums at 1 s (kept 10), 10 s (kept 10) and 100 s (kept 10).
fn visits() -> Arc<Space> {
    common::space(
        "visits",
        ValueKind::Sum,
        &[(100, 10), (1, 10), (10, 10)],
        Retention::Cleaner,
    )
}

async fn store(f: &Fixture) -> Arc<dyn SliceStore> {
    f.backend
        .slice_store(Arc::new(f.clock.clone()))
        .await
        .unwrap()
}

fn name(n: &str) -> Name {
    Name::new(n).unwrap()
}

fn ts(secs: f64) -> Timestamp {
    Timestamp::from_secs_f64(secs).unwrap()
}

/// `read` through [`SliceStore::read_many`], asking which names are series.
async fn held_read(s: &dyn SliceStore, read: SliceRead<'_>) -> tally::engine::HeldReads {
    s.read_many(&[(read, true)]).await.unwrap().remove(0)
}

/// A planned batch of sums `(series, at, delta)`.
fn batch(space: &Arc<Space>, items: &[(&str, f64, i64)]) -> Batch {
    let names: Vec<Name> = items.iter().map(|(n, _, _)| name(n)).collect();
    Batch {
        space: space.clone(),
        writes: plan(
            space,
            names
                .iter()
                .zip(items)
                .map(|(n, &(_, at, d))| (n, ts(at), Value::Sum(d))),
        )
        .unwrap(),
        seq: None,
    }
}

fn sums(slices: &[(u64, Value)]) -> Vec<(u64, i64)> {
    slices
        .iter()
        .map(|(s, v)| (*s, v.as_sum().unwrap()))
        .collect()
}

/// One series' sums at each of `precisions`, slice by slice.
async fn sums_of(
    s: &dyn SliceStore,
    space: &Arc<Space>,
    series: &str,
    precisions: &[u64],
) -> Vec<Vec<(u64, i64)>> {
    let got = s
        .read(SliceRead::new(space, &[name(series)], precisions))
        .await
        .unwrap();
    got[0].iter().map(|slices| sums(slices)).collect()
}

async fn writes_read_back_at_every_resolution(kind: Kind) {
    let f = Fixture::new(kind).await;
    let s = store(&f).await;
    let space = visits();
    let b = batch(
        &space,
        &[
            ("home", 1002.5, 2),
            ("home", 1009.0, 3),
            ("home", 1011.0, -1),
        ],
    );
    assert_eq!(s.apply(&b).await.unwrap(), Applied::Written);
    s.apply(&b).await.unwrap();
    let (names, precisions) = ([name("home"), name("none")], [1, 10, 100]);
    let got = s
        .read(SliceRead::new(&space, &names, &precisions))
        .await
        .unwrap();
    assert_eq!(sums(&got[0][0]), vec![(1002, 4), (1009, 6), (1011, -2)]);
    assert_eq!(sums(&got[0][1]), vec![(1000, 10), (1010, -2)]);
    assert_eq!(sums(&got[0][2]), vec![(1000, 8)]);
    assert!(got[1].iter().all(Vec::is_empty));
    // The sums' own read (counters' fast path) answers the same.
    let fast = s
        .read_sums(SliceRead::new(&space, &names, &precisions))
        .await
        .unwrap();
    let slow: Vec<Vec<Vec<(u64, i64)>>> = got
        .iter()
        .map(|per| per.iter().map(|sl| sums(sl)).collect())
        .collect();
    assert_eq!(fast, slow);
    let range = s
        .read(
            SliceRead::new(&space, &[name("home")], &[1]).slices(SliceSel::Range {
                from: 1005,
                to: 1011,
            }),
        )
        .await
        .unwrap();
    assert_eq!(sums(&range[0][0]), vec![(1009, 6), (1011, -2)]);
}

async fn ranges_merge_slices_and_series(kind: Kind) {
    let f = Fixture::new(kind).await;
    let s = store(&f).await;
    let space = visits();
    s.apply(&batch(
        &space,
        &[
            ("a", 1001.0, 1),
            ("a", 1005.0, 2),
            ("a", 1050.0, 4),
            ("b", 1005.0, 10),
        ],
    ))
    .await
    .unwrap();
    let now = ts(1055.0);
    let (a, b) = (name("a"), name("b"));
    // 1 s keeps 10 slices: [1046, 1055]. The range from 1050 is read at 1 s.
    let v = read_range(
        s.as_ref(),
        &space,
        std::slice::from_ref(&a),
        now,
        1050,
        1055,
    )
    .await
    .unwrap();
    assert_eq!(v, vec![Value::Sum(4)]);
    // From 1002: beyond 1 s's reach, within 10 s's; slices 1000..=1055.
    let v = read_range(s.as_ref(), &space, &[a.clone(), b.clone()], now, 1002, 1055)
        .await
        .unwrap();
    assert_eq!(v, vec![Value::Sum(7), Value::Sum(10)]);
    // Every series of the range merged into one value.
    assert_eq!(merge_values(space.kind, &v).unwrap(), Value::Sum(17));
    assert!(matches!(
        read_range(s.as_ref(), &space, &[name("a")], now, 9, 8).await,
        Err(Error::InvalidTime(_))
    ));
}

/// An overflow in one series refuses the batch: nothing of it is written,
/// the other series included (on a cluster, also when they live on other
/// shards: their part is taken back).
async fn overflow_anywhere_writes_nothing(kind: Kind) {
    let f = Fixture::new(kind).await;
    let s = store(&f).await;
    let space = visits();
    s.apply(&batch(&space, &[("full", 1000.0, i64::MAX)]))
        .await
        .unwrap();
    // Names spread over shards, so a cluster splits the batch.
    let mut items: Vec<(String, f64, i64)> =
        (0..40).map(|i| (format!("s{i}"), 1000.0, 1)).collect();
    items.push(("full".into(), 1000.0, 1));
    let items: Vec<(&str, f64, i64)> = items.iter().map(|(n, a, d)| (n.as_str(), *a, *d)).collect();
    let err = s.apply(&batch(&space, &items)).await.unwrap_err();
    let (kind, series, precision, slice, delta) = err.overflow().unwrap_or_else(|| panic!("{err}"));
    assert_eq!(kind, "counter");
    assert_eq!(series, "full");
    assert_eq!(slice, 1000 / precision * precision);
    assert_eq!(delta, 1);
    let names: Vec<Name> = (0..40).map(|i| name(&format!("s{i}"))).collect();
    let got = s
        .read(SliceRead::new(&space, &names, &[1, 10, 100]))
        .await
        .unwrap();
    assert!(got.iter().flatten().all(Vec::is_empty), "{got:?}");
    assert_eq!(
        s.list(SeriesList::new(&space, 100)).await.unwrap(),
        vec!["full"]
    );
}

async fn sequenced_batches_apply_once(kind: Kind) {
    let f = Fixture::new(kind).await;
    let s = store(&f).await;
    let space = visits();
    let mut b = batch(&space, &[("x", 1000.0, 5), ("y", 1000.0, 1)]);
    let (written, duplicate) = (Applied::Written, Applied::Duplicate);
    let steps = [
        (0, 1, written),
        (0, 1, duplicate),
        (0, 2, written),
        (1, 1, written),
    ];
    apply_numbered(s.as_ref(), &mut b, 0xbee, &steps).await;
    let got = sums_of(s.as_ref(), &space, "x", &[100]).await;
    assert_eq!(got[0], vec![(1000, 15)]);
}

async fn list_delete_and_clean(kind: Kind) {
    let f = Fixture::new(kind).await;
    let s = store(&f).await;
    let space = visits();
    let names = ["app:a", "app:b", "app:c", "db:x"];
    for (i, n) in names.iter().enumerate() {
        s.apply(&batch(&space, &[(n, 1000.0 + i as f64, 1), (n, 2000.0, 1)]))
            .await
            .unwrap();
    }
    assert_eq!(s.list(SeriesList::new(&space, 10)).await.unwrap(), names);
    assert_eq!(
        s.list(
            SeriesList::new(&space, 10)
                .prefix("app:")
                .after(Some("app:a"))
        )
        .await
        .unwrap(),
        vec!["app:b", "app:c"]
    );
    assert_eq!(
        s.list(SeriesList::new(&space, 1).prefix("app:"))
            .await
            .unwrap(),
        vec!["app:a"]
    );
    // Registered names, exactly (a prefix of one is not one).
    let asked = [name("app:b"), name("app"), name("app:bb"), name("db:x")];
    assert_eq!(
        s.contains(&space, &asked).await.unwrap(),
        [true, false, false, true]
    );
    // A read that tells names of no series apart: the slices `read` gives
    // for each series, None for the others (including one whose selected
    // slices are all empty: app:b holds nothing at or after 2001).
    let precisions = [1, 100];
    let all = SliceRead::new(&space, &asked, &precisions);
    let read = s.read(all).await.unwrap();
    let held = held_read(s.as_ref(), all).await;
    assert_eq!(
        held,
        [Some(read[0].clone()), None, None, Some(read[3].clone())]
    );
    assert!(read[0][0].contains(&(2000, Value::Sum(1))), "{read:?}");
    let late = all.slices(SliceSel::Range {
        from: 2001,
        to: 3000,
    });
    assert_eq!(
        held_read(s.as_ref(), late).await,
        [
            Some(vec![vec![], vec![]]),
            None,
            None,
            Some(vec![vec![], vec![]])
        ]
    );
    // Several reads in one call answer each as it does alone, in order;
    // one that does not ask which names are series reads as read does.
    let one = [name("db:x")];
    let db = SliceRead::new(&space, &one, &precisions[1..]);
    let plain: Vec<_> = read.iter().cloned().map(Some).collect();
    assert_eq!(
        s.read_many(&[(late, true), (all, true), (db, true), (all, false)])
            .await
            .unwrap(),
        [
            held_read(s.as_ref(), late).await,
            held,
            held_read(s.as_ref(), db).await,
            plain
        ]
    );
    assert_eq!(s.read_many(&[]).await.unwrap(), Vec::<Vec<_>>::new());
    assert!(s.delete(&space, &name("app:c")).await.unwrap());
    assert!(!s.delete(&space, &name("app:c")).await.unwrap());
    assert_eq!(
        s.list(SeriesList::new(&space, 10).prefix("app:"))
            .await
            .unwrap(),
        ["app:a", "app:b"]
    );
    assert_eq!(
        s.contains(&space, &[name("app:c"), name("app:a")])
            .await
            .unwrap(),
        [false, true]
    );
    // At 2000.5, every precision keeps 10 slices: the slices of 1000..=1003
    // go at 1 s and 10 s; at 100 s, 1000 is older than 2000 - 10 x 100 too.
    let job = CleanJob {
        pass: 0,
        now: ts(2000.5),
        samples: 10,
        interval_secs: 60,
        batch: 2,
        last_visits: Vec::new(),
    };
    let report = s.clean(&space, &job).await.unwrap();
    assert_eq!(report.scanned, 3);
    // SQLite's writes already trimmed them: opening 2000 removed what
    // fell out of the window that ends there.
    let expected = if kind.trims_on_write() { 0 } else { 9 };
    assert_eq!(report.samples_removed, expected);
    assert_eq!(report.counters_removed, 0);
    let got = sums_of(s.as_ref(), &space, "db:x", &[1, 10, 100]).await;
    assert_eq!(got[0], vec![(2000, 1)]);
    assert_eq!(got[1], vec![(2000, 1)]);
    assert_eq!(got[2], vec![(2000, 1)]);
    // A pass that remembers the last visit removes exactly what passed the
    // cutoff since (Redis deletes those slices by name): at 2012.5, the
    // three series' 1 s slice 2000, and nothing newer.
    s.apply(&batch(&space, &[("db:x", 2009.0, 1)]))
        .await
        .unwrap();
    let visited = CleanJob {
        pass: 1,
        now: ts(2012.5),
        last_visits: vec![(1, ts(2000.5)), (10, ts(2000.5)), (100, ts(2000.5))],
        ..job.clone()
    };
    let report = s.clean(&space, &visited).await.unwrap();
    assert_eq!(
        (
            report.scanned,
            report.samples_removed,
            report.counters_removed
        ),
        (3, 3, 0)
    );
    let got = sums_of(s.as_ref(), &space, "db:x", &[1, 10, 100]).await;
    assert_eq!(got[0], vec![(2009, 1)]);
    assert_eq!(got[1], vec![(2000, 2)]);
    assert_eq!(got[2], vec![(2000, 2)]);
    // Later still, everything goes, and so do the emptied series.
    let later = CleanJob {
        now: ts(10_000.0),
        ..job
    };
    let report = s.clean(&space, &later).await.unwrap();
    assert_eq!(report.counters_removed, 3);
    assert!(
        s.list(SeriesList::new(&space, 10))
            .await
            .unwrap()
            .is_empty()
    );
}

/// A space and the counters may hold series of the same name: each sees
/// only its own.
/// A collapsed listing (a Graphite find's level) against a model of it:
/// the names in byte order, of those with more than `nodes` nodes sharing
/// their first `nodes` only the first, after a cursor that skips its own
/// branch; whole, and page by page at several page sizes. Branches of one
/// name and of many (more than SQLite steps through before it seeks), a
/// node that is a prefix of another (`a.b` and `a.bc`), `/` right after a
/// node (what SQLite seeks to past a branch) and U+10FFFF.
async fn collapsed_listings_name_each_branch_once(kind: Kind) {
    let f = Fixture::new(kind).await;
    let s = store(&f).await;
    let space = visits();
    let mut names: Vec<String> = [
        "a",
        "a.b",
        "a.b.c",
        "a.b.d",
        "a.b.d.e",
        "a.bc",
        "a.bc.x",
        "a.b/x",
        "a.c.x.y",
        "a. .z",
        "b.\u{10FFFF}",
        "b.\u{10FFFF}.x",
        "b.\u{10FFFF}x.y",
        "c",
    ]
    .map(str::to_owned)
    .into();
    names.extend((0..12).map(|i| format!("a.h.m{i:02}")));
    names.extend((0..6).map(|i| format!("a.h.m05.x{i}")));
    names.extend((0..3).map(|i| format!("a.i{i}.z")));
    for chunk in names.chunks(10) {
        let items: Vec<(&str, f64, i64)> = chunk.iter().map(|n| (n.as_str(), 1000.0, 1)).collect();
        s.apply(&batch(&space, &items)).await.unwrap();
    }
    names.sort();
    // The model's own branch: the first `nodes` nodes and a dot.
    let branch = |name: &str, nodes: usize| -> Option<String> {
        let parts: Vec<&str> = name.split('.').collect();
        (nodes > 0 && parts.len() > nodes).then(|| format!("{}.", parts[..nodes].join(".")))
    };
    let model = |prefix: &str, after: Option<&str>, nodes: usize| -> Vec<String> {
        let mut current = after.and_then(|a| branch(a, nodes));
        let mut out = Vec::new();
        for n in names.iter().filter(|n| n.starts_with(prefix)) {
            if after.is_some_and(|a| n.as_str() <= a)
                || current.as_deref().is_some_and(|b| n.starts_with(b))
            {
                continue;
            }
            current = branch(n, nodes);
            out.push(n.clone());
        }
        out
    };
    for prefix in ["", "a", "a.", "a.b", "a.h.", "b.", "z"] {
        for nodes in 1..=3 {
            let wanted = model(prefix, None, nodes);
            let whole = SeriesList::new(&space, 1000).prefix(prefix).collapse(nodes);
            let at = format!("prefix {prefix:?}, {nodes} nodes");
            assert_eq!(s.list(whole).await.unwrap(), wanted, "{at}");
            for limit in [1, 2, 3] {
                let mut paged: Vec<String> = Vec::new();
                loop {
                    let page = SeriesList::new(&space, limit)
                        .prefix(prefix)
                        .after(paged.last().map(String::as_str))
                        .collapse(nodes);
                    let page = s.list(page).await.unwrap();
                    assert!(page.len() <= limit, "{at}: {page:?}");
                    let end = page.len() < limit;
                    paged.extend(page);
                    if end {
                        break;
                    }
                }
                assert_eq!(paged, wanted, "{at}, pages of {limit}");
            }
            for after in [
                "a.b",
                "a.b.c",
                "a.b.d.e",
                "a.h.m05",
                "a.h.m05.x3",
                "a.b.",
                "b",
            ] {
                let list = whole.after(Some(after));
                let at = format!("{at}, after {after:?}");
                assert_eq!(
                    s.list(list).await.unwrap(),
                    model(prefix, Some(after), nodes),
                    "{at}"
                );
            }
        }
    }
}

async fn a_space_does_not_mix_with_counters(kind: Kind) {
    let f = Fixture::new(kind).await;
    let s = store(&f).await;
    let space = visits();
    f.counters
        .incr_many(&[Increment::new("same", 3).at(1000.0)])
        .await
        .unwrap();
    s.apply(&batch(&space, &[("same", 1000.0, 40)]))
        .await
        .unwrap();
    assert_eq!(f.counters.get("same", 60).await.unwrap()[0].count, 3);
    let got = sums_of(s.as_ref(), &space, "same", &[10]).await;
    assert_eq!(got[0], vec![(1000, 40)]);
    assert!(s.delete(&space, &name("same")).await.unwrap());
    assert_eq!(f.all_names().await, vec!["same"]);
    assert_eq!(f.counters.get("same", 60).await.unwrap()[0].count, 3);
}

async fn the_writer_serves_any_space(kind: Kind) {
    let f = Fixture::new(kind).await;
    let s = store(&f).await;
    let space = visits();
    let w = Writer::start(
        Arc::new(s.clone()),
        space.clone(),
        Arc::new(f.clock.clone()),
        common::small_chunks(Duration::from_millis(10)),
    )
    .unwrap();
    common::concurrently(4, &w, |w, t| async move {
        for i in 0..300u64 {
            // Within the 10 slices kept at 1 s: SQLite's writes trim
            // what falls out of them.
            let at = 1000.0 + (i % 10) as f64;
            w.add(
                &format!("v{}", (u64::from(t) + i) % 7),
                Value::Sum(1),
                Some(at),
            )
            .await
            .unwrap();
            if i % 50 == 0 {
                tokio::task::yield_now().await;
            }
        }
    })
    .await;
    w.add_many(&[Item {
        name: name("v0"),
        at: ts(1000.0),
        delta: Value::Sum(5),
    }])
    .await
    .unwrap();
    w.shutdown().await;
    let names: Vec<Name> = (0..7).map(|i| name(&format!("v{i}"))).collect();
    let got = s
        .read(SliceRead::new(&space, &names, &[1, 100]))
        .await
        .unwrap();
    let total_100: i64 = got.iter().map(|per| sums(&per[1])[0].1).sum();
    let total_1: i64 = got
        .iter()
        .flat_map(|per| sums(&per[0]))
        .map(|(_, c)| c)
        .sum();
    assert_eq!((total_1, total_100), (1205, 1205));
    let stats = w.stats();
    assert_eq!(
        (stats.accepted, stats.written, stats.rejected),
        (1201, 1201, 0)
    );
}

/// On a server in the book's layout, counters keep the book's keys and
/// every other space lives in the default layout under the default prefix.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spaces_on_a_book_layout_server_use_tagged_keys() {
    use redis::AsyncCommands;
    let f = Fixture::new(Kind::RedisRia).await;
    let s = store(&f).await;
    let space = visits();
    s.apply(&batch(&space, &[("home", 1000.0, 2)]))
        .await
        .unwrap();
    f.counters
        .incr_many(&[Increment::new("home", 1).at(1000.0)])
        .await
        .unwrap();
    let mut raw = f.raw().await;
    let shard = tally::backend::redis::layout::shard_of("home");
    let tag = format!("{{tally:{shard}}}");
    let got: Option<i64> = raw
        .hget(format!("{tag}:visits:10:home"), "1000")
        .await
        .unwrap();
    assert_eq!(got, Some(2));
    let members: Vec<String> = raw
        .zrange(format!("{tag}:visits:names"), 0, -1)
        .await
        .unwrap();
    assert_eq!(members, ["home"]);
    let known: Vec<String> = raw.zrange("known:", 0, -1).await.unwrap();
    assert!(
        known.iter().all(|m| m.ends_with(":home")) && known.len() == 7,
        "{known:?}"
    );
    let book: Option<i64> = raw.hget("count:60:home", "960").await.unwrap();
    assert_eq!(book, Some(1));
}

/// The seam for kinds kept as blobs: `engine_apply.lua` merges each field
/// with the kind's function from `KIND_MERGE` (here a toy kind that
/// appends), and on a refusal restores every field it already merged and
/// names the operation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blob_kinds_merge_through_their_lua_function_and_are_restored_on_refusal() {
    use redis::AsyncCommands;
    let server = tally_testkit::RedisServer::start();
    let mut raw = redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let toy = r#"
KIND_MERGE[99] = function(old, delta)
  if delta == 'big' then return redis.error_reply('TALLY_OVERFLOW toy past its range') end
  if delta == 'bad' then return redis.error_reply('TALLY_FAILED toy not a toy') end
  return (old or '') .. delta
end
"#;
    let script = redis::Script::new(&format!(
        "{}{}{toy}{}",
        include_str!("../../src/backend/redis/lua/engine_undo.lua"),
        include_str!("../../src/backend/redis/lua/engine_kinds.lua"),
        include_str!("../../src/backend/redis/lua/engine_apply.lua"),
    ));
    let _: () = raw.hset("h1", "10", "x").await.unwrap();
    // Two hashes (h1: fields 10, 20; h2: field 10), then the registry.
    let call = |last: &'static str| {
        let mut inv = script.prepare_invoke();
        inv.key("h1").key("h2").key("reg");
        inv.arg("0").arg(0).arg(99).arg(2);
        inv.arg(2).arg("10").arg("a").arg("20").arg("b");
        inv.arg(1).arg("10").arg(last);
        // One member, vouched for by h2 (KEYS[2]).
        inv.arg(1).arg("series").arg(2);
        inv
    };
    let err = call("big").invoke_async::<i64>(&mut raw).await.unwrap_err();
    assert_eq!(err.code(), Some("TALLY_OVERFLOW"), "{err}");
    assert!(err.detail().unwrap().starts_with("2 "), "{err}");
    let err = call("bad").invoke_async::<i64>(&mut raw).await.unwrap_err();
    assert_eq!(err.code(), Some("TALLY_FAILED"), "{err}");
    assert!(
        err.detail().unwrap().starts_with("2 toy not a toy"),
        "{err}"
    );
    // Nothing remains of the refused calls.
    let h1: Vec<(String, String)> = raw.hgetall("h1").await.unwrap();
    assert_eq!(h1, [("10".to_owned(), "x".to_owned())]);
    let exists: bool = raw.exists("h2").await.unwrap();
    assert!(!exists);
    let exists: bool = raw.exists("reg").await.unwrap();
    assert!(!exists);
    // A call that every merge accepts is written, and registers its series.
    let done: i64 = call("c").invoke_async(&mut raw).await.unwrap();
    assert_eq!(done, 1);
    let h1: Vec<(String, String)> = raw.hgetall("h1").await.unwrap();
    assert_eq!(
        h1,
        [
            ("10".to_owned(), "xa".to_owned()),
            ("20".to_owned(), "b".to_owned())
        ]
    );
    let h2: Option<String> = raw.hget("h2", "10").await.unwrap();
    assert_eq!(h2.as_deref(), Some("c"));
    let reg: Vec<String> = raw.zrange("reg", 0, -1).await.unwrap();
    assert_eq!(reg, ["series"]);
    // A kind with no merge function is refused, writing nothing.
    let mut inv = script.prepare_invoke();
    inv.key("h3")
        .arg("0")
        .arg(0)
        .arg(42)
        .arg(1)
        .arg(1)
        .arg("1")
        .arg("z");
    let err = inv.invoke_async::<i64>(&mut raw).await.unwrap_err();
    assert!(
        err.to_string().contains("no merge function for kind 42"),
        "{err}"
    );
}

fn stats_of(values: &[f64]) -> Value {
    let mut s = StatsValue::default();
    for &v in values {
        s.record(v).unwrap();
    }
    Value::Stats(Box::new(s))
}

/// A space of statistics: the store merges each write's moments and sketch
/// into the stored ones (in Rust for SQLite, with `kind_stats.lua` on
/// Redis), and reads back exactly what merging them in process gives.
async fn statistics_merge_in_the_store(kind: Kind) {
    let f = Fixture::new(kind).await;
    let s = store(&f).await;
    let space = common::space(
        "latency",
        ValueKind::Stats,
        &[(1, 100), (60, 10)],
        Retention::Cleaner,
    );
    let api = name("api");
    let first = [
        (1000.2, &[1.0, 2.0, 3.0][..]),
        (1000.7, &[0.5, -4.0][..]),
        (1030.0, &[8.0][..]),
    ];
    let writes = plan(
        &space,
        first.iter().map(|(at, vs)| (&api, ts(*at), stats_of(vs))),
    )
    .unwrap();
    let b = Batch {
        space: space.clone(),
        writes,
        seq: None,
    };
    s.apply(&b).await.unwrap();
    s.apply(&batch_of(&space, &api, 1000.0, &[250.0, 0.0]))
        .await
        .unwrap();
    let got = s
        .read(SliceRead::new(&space, std::slice::from_ref(&api), &[1, 60]))
        .await
        .unwrap();
    let want_1000 = stats_of(&[1.0, 2.0, 3.0, 0.5, -4.0, 250.0, 0.0]);
    let want_1030 = stats_of(&[8.0]);
    let want_all = stats_of(&[1.0, 2.0, 3.0, 0.5, -4.0, 250.0, 0.0, 8.0]);
    assert_eq!(
        got[0][0],
        vec![(1000, want_1000.clone()), (1030, want_1030.clone())]
    );
    // Minutes start at 960 and 1020.
    assert_eq!(got[0][1], vec![(960, want_1000), (1020, want_1030)]);
    let merged = read_range(s.as_ref(), &space, &[api], ts(1035.0), 1000, 1035)
        .await
        .unwrap();
    assert_eq!(merged, vec![want_all]);
    assert_eq!(
        s.list(SeriesList::new(&space, 10)).await.unwrap(),
        vec!["api"]
    );
    let err = s
        .read_sums(SliceRead::new(&space, &[name("api")], &[1]))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("keeps stats values, not sums"),
        "{err}"
    );
}

/// One series' statistics of `values` at `at`.
fn batch_of(space: &Arc<Space>, series: &Name, at: f64, values: &[f64]) -> Batch {
    Batch {
        space: space.clone(),
        writes: plan(space, [(series, ts(at), stats_of(values))]).unwrap(),
        seq: None,
    }
}

async fn kinds_no_store_keeps_yet_are_refused(kind: Kind) {
    let f = Fixture::new(kind).await;
    let s = store(&f).await;
    let space = common::space("items", ValueKind::Top, &[(60, 10)], Retention::Cleaner);
    let g = name("t");
    let b = Batch {
        space: space.clone(),
        writes: plan(
            &space,
            [(
                &g,
                ts(1000.0),
                Value::Top(Box::new(TopValue::from_counts([("x", 2)]).unwrap())),
            )],
        )
        .unwrap(),
        seq: None,
    };
    let err = s.apply(&b).await.unwrap_err();
    assert!(
        matches!(&err, Error::Config(m) if m.contains("top values are not kept")),
        "{err}"
    );
    assert!(s.read(SliceRead::new(&space, &[g], &[60])).await.is_err());
}
