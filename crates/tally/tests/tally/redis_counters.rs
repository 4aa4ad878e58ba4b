//! Redis-only counter tests: surviving a server restart, and compatibility
//! of the `ria` layout with the book's own code (ported here in raw commands).

use crate::common;

use std::time::{Duration, Instant};

use common::{Fixture, Kind, table_of_3};
use redis::AsyncCommands;
use tally::counters::{CounterWriter, WhenFull, WriterSettings};
use tally::{CleanerSettings, CounterSettings, Error, Sample, Timestamp};
use tally_testkit::RedisOptions;

fn s(start: u64, count: i64) -> Sample {
    Sample { start, count }
}

const BOOK_PRECISIONS: [u64; 7] = [1, 5, 60, 300, 3600, 18000, 86400];

/// The book's `update_counter` (Python, MULTI/EXEC pipeline), in raw commands.
async fn book_update_counter(
    conn: &mut redis::aio::MultiplexedConnection,
    precisions: &[u64],
    name: &str,
    count: i64,
    now: f64,
) {
    let mut pipe = redis::pipe();
    pipe.atomic();
    for &prec in precisions {
        let pnow = (now / prec as f64) as u64 * prec;
        let hash = format!("{prec}:{name}");
        pipe.zadd("known:", &hash, 0).ignore();
        pipe.hincr(format!("count:{hash}"), pnow.to_string(), count)
            .ignore();
    }
    let () = pipe.query_async(conn).await.unwrap();
}

/// The book's `get_counter`: HGETALL, ints, sorted.
async fn book_get_counter(
    conn: &mut redis::aio::MultiplexedConnection,
    name: &str,
    precision: u64,
) -> Vec<(u64, i64)> {
    let data: Vec<(String, String)> = conn
        .hgetall(format!("count:{precision}:{name}"))
        .await
        .unwrap();
    let mut out: Vec<(u64, i64)> = data
        .into_iter()
        .map(|(k, v)| (k.parse().unwrap(), v.parse().unwrap()))
        .collect();
    out.sort();
    out
}

/// The first pass (passes = 0) of the book's `clean_counters`, with
/// `time.time()` replaced by `now`, command for command.
async fn book_clean_first_pass(
    conn: &mut redis::aio::MultiplexedConnection,
    now: f64,
    sample_count: u64,
) {
    let passes = 0u64;
    let mut index: isize = 0;
    loop {
        let zcard: isize = conn.zcard("known:").await.unwrap();
        if index >= zcard {
            break;
        }
        let hash: Vec<String> = conn.zrange("known:", index, index).await.unwrap();
        index += 1;
        let Some(hash) = hash.into_iter().next() else {
            break;
        };
        let prec: u64 = hash.split(':').next().unwrap().parse().unwrap();
        let bprec = (prec / 60).max(1);
        if !passes.is_multiple_of(bprec) {
            continue;
        }
        let hkey = format!("count:{hash}");
        let cutoff = now - (sample_count * prec) as f64;
        let mut samples: Vec<u64> = conn
            .hkeys::<_, Vec<String>>(&hkey)
            .await
            .unwrap()
            .iter()
            .map(|k| k.parse().unwrap())
            .collect();
        samples.sort();
        let remove = samples.partition_point(|&x| (x as f64) <= cutoff);
        if remove > 0 {
            let _: i64 = conn.hdel(&hkey, &samples[..remove]).await.unwrap();
            if remove == samples.len() {
                // WATCH / HLEN / MULTI ZREM EXEC: no writer runs in this test.
                let len: i64 = conn.hlen(&hkey).await.unwrap();
                if len == 0 {
                    let _: i64 = conn.zrem("known:", &hash).await.unwrap();
                    index -= 1;
                }
            }
        }
    }
}

/// Every key and its full content, for comparing two servers.
async fn dump(
    conn: &mut redis::aio::MultiplexedConnection,
) -> Vec<(String, Vec<(String, String)>)> {
    let mut keys: Vec<String> = conn.keys("*").await.unwrap();
    keys.sort();
    let mut out = Vec::new();
    for key in keys {
        let kind: String = redis::cmd("TYPE")
            .arg(&key)
            .query_async(conn)
            .await
            .unwrap();
        let mut content: Vec<(String, String)> = match kind.as_str() {
            "hash" => conn.hgetall(&key).await.unwrap(),
            "zset" => conn.zrange_withscores(&key, 0, -1).await.unwrap(),
            other => panic!("unexpected {other} key {key}"),
        };
        content.sort();
        out.push((key, content));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ria_reads_what_the_book_writes() {
    let f = Fixture::new(Kind::RedisRia).await;
    let mut raw = f.raw().await;
    book_update_counter(&mut raw, &BOOK_PRECISIONS, "hits", 3, 1336376415.5).await;
    book_update_counter(&mut raw, &BOOK_PRECISIONS, "hits", 2, 1336376416.0).await;
    // The Java port's precisions lack 1 s.
    book_update_counter(&mut raw, &BOOK_PRECISIONS[1..], "java", 1, 1336376415.0).await;
    assert_eq!(
        f.counters.get("hits", 5).await.unwrap(),
        vec![s(1336376415, 5)]
    );
    assert_eq!(
        f.counters.get("hits", 1).await.unwrap(),
        vec![s(1336376415, 3), s(1336376416, 2)]
    );
    assert_eq!(
        f.counters.get("java", 60).await.unwrap(),
        vec![s(1336376400, 1)]
    );
    assert!(f.counters.get("java", 1).await.unwrap().is_empty());
    assert_eq!(f.all_names().await, vec!["hits", "java"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn book_reads_what_ria_writes() {
    let f = Fixture::new(Kind::RedisRia).await;
    f.counters.incr_at("hits", 3, 1336376415.5).await.unwrap();
    f.counters.incr_at("hits", 4, 1336376399.0).await.unwrap();
    let mut raw = f.raw().await;
    assert_eq!(
        book_get_counter(&mut raw, "hits", 5).await,
        vec![(1336376395, 4), (1336376415, 3)]
    );
    // Fields are integer text, never "…415.0".
    let fields: Vec<String> = raw.hkeys("count:1:hits").await.unwrap();
    let mut fields = fields;
    fields.sort();
    assert_eq!(fields, vec!["1336376399", "1336376415"]);
    let known: Vec<(String, f64)> = raw.zrange_withscores("known:", 0, -1).await.unwrap();
    let expected: Vec<(String, f64)> = {
        let mut m: Vec<String> = BOOK_PRECISIONS
            .iter()
            .map(|p| format!("{p}:hits"))
            .collect();
        m.sort();
        m.into_iter().map(|m| (m, 0.0)).collect()
    };
    assert_eq!(known, expected);
    // Only the book's keys exist.
    let mut keys: Vec<String> = raw.keys("*").await.unwrap();
    keys.sort();
    let mut want: Vec<String> = BOOK_PRECISIONS
        .iter()
        .map(|p| format!("count:{p}:hits"))
        .collect();
    want.push("known:".into());
    want.sort();
    assert_eq!(keys, want);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ria_clean_leaves_what_the_books_first_pass_leaves() {
    let ours = Fixture::new(Kind::RedisRia).await;
    let book = Fixture::new(Kind::RedisRia).await;
    let mut ours_raw = ours.raw().await;
    let mut book_raw = book.raw().await;
    // A deterministic spread of counters, times and precision sets.
    let now = 1_700_000_000.25;
    let mut seed = 12345u64;
    let mut next = || {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        seed >> 33
    };
    for i in 0..200 {
        let name = format!("c{}", i % 37);
        let precisions: &[u64] = if i % 5 == 0 {
            &BOOK_PRECISIONS[1..]
        } else {
            &BOOK_PRECISIONS
        };
        // Ages from now to 200 days back, biased to recent.
        let age = match next() % 4 {
            0 => next() % 200,
            1 => next() % 20_000,
            2 => next() % 2_000_000,
            _ => next() % 17_280_000,
        } as f64;
        let count = (next() % 9) as i64 + 1;
        for raw in [&mut ours_raw, &mut book_raw] {
            book_update_counter(raw, precisions, &name, count, now - age).await;
        }
    }
    assert_eq!(dump(&mut ours_raw).await, dump(&mut book_raw).await);
    book_clean_first_pass(&mut book_raw, now, 120).await;
    let mut cleaner = ours
        .counters
        .cleaner(CleanerSettings {
            batch: 16,
            ..CleanerSettings::default()
        })
        .unwrap();
    let report = cleaner
        .pass_at(Timestamp::from_secs_f64(now).unwrap())
        .await
        .unwrap();
    assert!(
        report.samples_removed > 0 && report.counters_removed > 0,
        "{report:?}"
    );
    assert_eq!(dump(&mut ours_raw).await, dump(&mut book_raw).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconnects_after_redis_restarts() {
    for kind in [Kind::RedisDefault, Kind::RedisRia] {
        let mut f = Fixture::build(
            kind,
            CounterSettings::default(),
            RedisOptions {
                durable: true,
                ..RedisOptions::default()
            },
        )
        .await;
        f.counters.incr_at("r", 1, 100.0).await.unwrap();
        f.server.as_mut().unwrap().restart();
        // The first call after a restart may see the dropped connection; the
        // client reconnects by itself and later calls succeed.
        let deadline = Instant::now() + tally_testkit::PATIENCE;
        let mut failures = 0;
        loop {
            match f.counters.incr_at("r", 1, 100.0).await {
                Ok(()) => break,
                Err(e) => {
                    assert!(e.is_unavailable(), "{e}");
                    failures += 1;
                    assert!(
                        Instant::now() < deadline,
                        "no reconnect after {failures} failures: {e}"
                    );
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
        assert!(
            failures <= 2,
            "{kind:?}: {failures} failures before reconnecting"
        );
        for _ in 0..10 {
            f.counters.incr_at("r", 1, 100.0).await.unwrap();
        }
        // Durable server: what was acknowledged before the restart is there.
        assert_eq!(f.counters.get("r", 60).await.unwrap(), vec![s(60, 12)]);
        // Down: a clear "unavailable" error, not a hang or a panic.
        f.server.as_mut().unwrap().kill();
        let err = f.counters.incr_at("r", 1, 100.0).await.unwrap_err();
        assert!(err.is_unavailable(), "{err}");
        f.server.as_mut().unwrap().start_again();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aggregator_refuses_when_full_while_redis_is_down() {
    let mut f = Fixture::build(
        Kind::RedisDefault,
        CounterSettings {
            precisions: vec![1],
            samples: 100,
        },
        RedisOptions {
            durable: true,
            ..RedisOptions::default()
        },
    )
    .await;
    let agg = CounterWriter::start(
        f.counters.clone(),
        table_of_3(
            WriterSettings::default(),
            Duration::from_millis(10),
            WhenFull::Error,
        ),
    )
    .unwrap();
    f.server.as_mut().unwrap().kill();
    for i in 0..3 {
        agg.try_add(&format!("b{i}"), 1, Some(50.0)).unwrap();
    }
    // The flush cannot write, and room is only given back once written, so a
    // new (counter, second) is refused at once.
    let err = agg.try_add("b9", 1, Some(50.0)).unwrap_err();
    assert!(matches!(err, Error::Overloaded(_)), "{err}");
    assert!(err.to_string().contains("maximum of 3"), "{err}");
    assert!(matches!(
        agg.add("b9", 1, Some(50.0)).await,
        Err(Error::Overloaded(_))
    ));
    let mut server = f.server.take().unwrap();
    let server = tokio::task::spawn_blocking(move || {
        server.start_again();
        server
    })
    .await
    .unwrap();
    // Redis is back: the retried flush goes through and makes room.
    agg.flush().await.unwrap();
    agg.try_add("b9", 1, Some(50.0)).unwrap();
    agg.flush().await.unwrap();
    assert_eq!(f.counters.get("b0", 1).await.unwrap(), vec![s(50, 1)]);
    assert_eq!(f.counters.get("b9", 1).await.unwrap(), vec![s(50, 1)]);
    let stats = agg.stats();
    assert_eq!((stats.accepted, stats.written), (4, 4));
    assert!(stats.retries > 0);
    drop(server);
}

/// A backend on `server` in the default key layout.
async fn open_default_layout(server: &tally_testkit::RedisServer) -> tally::Backend {
    tally::Backend::open(&tally::BackendConfig::Redis {
        url: server.url(),
        layout: Default::default(),
    })
    .await
    .unwrap()
}

/// Guards the start-up warning: hashes that outgrow `hash-max-listpack-entries`
/// silently cost several times the memory, so the limit is checked at start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listpack_limits_are_checked_against_the_peak_of_a_hash() {
    let interval = Duration::from_secs(60);
    let defaults = CounterSettings::default();
    // A default server (512 entries) holds the default counters (181 at peak).
    let server = tally_testkit::RedisServer::start();
    let backend = open_default_layout(&server).await;
    let check = backend
        .check_counter_encoding(&defaults, interval)
        .await
        .expect("the limits are readable");
    assert_eq!(check.needed_entries, 181);
    assert_eq!(check.nodes.len(), 1);
    assert_eq!(check.nodes[0].max_entries, 512);
    assert!(check.fits(), "{:?}", check.problems());
    // 600 samples kept do not fit in 512 entries.
    let many = CounterSettings {
        samples: 600,
        ..defaults.clone()
    };
    let check = backend
        .check_counter_encoding(&many, interval)
        .await
        .unwrap();
    assert!(!check.fits());

    // A server configured with a small limit is named in the warning.
    let small = tally_testkit::RedisServer::start_with(RedisOptions {
        args: vec![("hash-max-listpack-entries".into(), "128".into())],
        ..RedisOptions::default()
    });
    let backend = open_default_layout(&small).await;
    let check = backend
        .check_counter_encoding(&defaults, interval)
        .await
        .unwrap();
    let problems = check.problems();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].contains("hash-max-listpack-entries is 128") && problems[0].contains("181"),
        "{problems:?}"
    );
    // The embedded store has nothing to check.
    let sqlite = tally::Backend::open(&tally::BackendConfig::SqliteMemory)
        .await
        .unwrap();
    assert!(
        sqlite
            .check_counter_encoding(&defaults, interval)
            .await
            .is_none()
    );
}

/// Counters at 1 s only, keeping 3 slices.
async fn one_second_keeping_3(kind: Kind) -> Fixture {
    let settings = CounterSettings {
        precisions: vec![1],
        samples: 3,
    };
    Fixture::with_settings(kind, settings).await
}

/// The one hash of counter `name` at 1 s, in either layout.
async fn hash_of(conn: &mut redis::aio::MultiplexedConnection, name: &str) -> String {
    let keys: Vec<String> = conn.keys(format!("*:1:{name}")).await.unwrap();
    assert_eq!(keys.len(), 1, "{keys:?}");
    keys.into_iter().next().unwrap()
}

/// A first pass (which reads the fields to find the old ones) removes only
/// plain decimal fields at or before the cutoff: fields that are not slice
/// starts stay, and so does the registration of a counter they keep
/// non-empty.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_pass_leaves_fields_that_are_not_slices() {
    for kind in [Kind::RedisDefault, Kind::RedisRia] {
        let f = one_second_keeping_3(kind).await;
        let mut raw = f.raw().await;
        f.counters.incr_at("x", 1, 100.0).await.unwrap();
        f.counters.incr_at("x", 1, 999.0).await.unwrap();
        f.counters.incr_at("y", 1, 100.0).await.unwrap();
        let junk = [("abc", 1), ("-5", 1), ("99.5", 1), ("1e2", 1), ("", 1)];
        for name in ["x", "y"] {
            let hash = hash_of(&mut raw, name).await;
            let _: () = raw.hset_multiple(&hash, &junk).await.unwrap();
        }
        let mut cleaner = f.counters.cleaner(CleanerSettings::default()).unwrap();
        let report = cleaner
            .pass_at(Timestamp::from_secs(1000).unwrap())
            .await
            .unwrap();
        assert_eq!(report.samples_removed, 2, "{kind:?}");
        assert_eq!(report.counters_removed, 0, "{kind:?}");
        for (name, slices) in [("x", vec!["999"]), ("y", vec![])] {
            let hash = hash_of(&mut raw, name).await;
            let mut fields: Vec<String> = raw.hkeys(&hash).await.unwrap();
            fields.sort();
            let mut want: Vec<String> = junk.iter().map(|(f, _)| f.to_string()).collect();
            want.extend(slices.into_iter().map(String::from));
            want.sort();
            assert_eq!(fields, want, "{kind:?} {name}");
        }
        assert_eq!(f.all_names().await, vec!["x", "y"], "{kind:?}");
    }
}

/// The `ria` rule on a first pass, as the book's `clean_counters`: a
/// `known:` member goes only when this pass removed its hash's last sample;
/// a member whose hash was already empty stays, and so does one with
/// samples left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ria_first_pass_drops_only_members_it_emptied() {
    let f = one_second_keeping_3(Kind::RedisRia).await;
    let mut raw = f.raw().await;
    f.counters.incr_at("gone", 1, 100.0).await.unwrap();
    f.counters.incr_at("kept", 1, 100.0).await.unwrap();
    f.counters.incr_at("kept", 1, 999.0).await.unwrap();
    let _: () = raw.zadd("known:", "1:empty", 0).await.unwrap();
    let mut cleaner = f.counters.cleaner(CleanerSettings::default()).unwrap();
    let report = cleaner
        .pass_at(Timestamp::from_secs(1000).unwrap())
        .await
        .unwrap();
    assert_eq!((report.samples_removed, report.counters_removed), (2, 1));
    let known: Vec<String> = raw.zrange("known:", 0, -1).await.unwrap();
    assert_eq!(known, vec!["1:empty", "1:kept"]);
    assert_eq!(f.counters.get("kept", 1).await.unwrap(), vec![s(999, 1)]);
    let keys: Vec<String> = raw.keys("count:*").await.unwrap();
    assert_eq!(keys, vec!["count:1:kept"]);
}

/// Counter hashes are read from their DUMP (one string per hash) where a
/// hash is a listpack, and with HGETALL otherwise: a hash past the server's
/// listpack limit, and every hash when the user may not DUMP.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_every_hash_encoding_with_or_without_dump() {
    let server = tally_testkit::RedisServer::start_with(RedisOptions {
        args: vec![("hash-max-listpack-entries".into(), "4".into())],
        ..RedisOptions::default()
    });
    let mut raw = redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let () = redis::cmd("ACL")
        .arg(&[
            "SETUSER", "nodump", "on", ">pw", "~*", "&*", "+@all", "-dump",
        ])
        .query_async(&mut raw)
        .await
        .unwrap();
    let nodump = format!("redis://nodump:pw@127.0.0.1:{}/", server.port());
    let settings = CounterSettings {
        precisions: vec![1],
        samples: 100,
    };
    let big: Vec<Sample> = (0..10).map(|i| s(1000 + i, 1 + i as i64)).collect();
    let small = vec![s(1000, 7), s(1001, -2)];
    for (url, first) in [(server.url(), true), (nodump, false)] {
        let backend = tally::Backend::open(&tally::BackendConfig::Redis {
            url,
            layout: Default::default(),
        })
        .await
        .unwrap();
        let clock: tally::clock::SharedClock = std::sync::Arc::new(tally::ManualClock::at(1100.0));
        let store = backend.counter_store(clock.clone()).await.unwrap();
        let counters = tally::Counters::with_clock(store, settings.clone(), clock).unwrap();
        if first {
            for (name, samples) in [("big", &big), ("small", &small)] {
                for x in samples {
                    counters
                        .incr_at(name, x.count, x.start as f64)
                        .await
                        .unwrap();
                }
            }
            let keys: Vec<String> = raw.keys("*:1:*").await.unwrap();
            let mut encodings = Vec::new();
            for key in keys {
                let e: String = redis::cmd("OBJECT")
                    .arg("ENCODING")
                    .arg(&key)
                    .query_async(&mut raw)
                    .await
                    .unwrap();
                encodings.push(e);
            }
            encodings.sort();
            assert_eq!(encodings, ["hashtable", "listpack"]);
        }
        assert_eq!(counters.get("big", 1).await.unwrap(), big, "first: {first}");
        assert_eq!(
            counters.get("small", 1).await.unwrap(),
            small,
            "first: {first}"
        );
        assert!(counters.get("none", 1).await.unwrap().is_empty());
        let both = counters
            .get_many(&["small".into(), "big".into(), "none".into()], Some(1))
            .await
            .unwrap();
        assert_eq!(both[0][0].samples, small);
        assert_eq!(both[1][0].samples, big);
        assert!(both[2][0].samples.is_empty());
        let stats: String = redis::cmd("INFO")
            .arg("commandstats")
            .query_async(&mut raw)
            .await
            .unwrap();
        let calls = |command: &str| tally_testkit::command_calls(&stats, command);
        if first {
            // Every hash DUMPed; only the hashtable read again.
            assert_eq!((calls("dump"), calls("hgetall")), (6, 2), "{stats}");
        } else {
            assert_eq!(calls("hgetall"), 2 + 6, "{stats}");
        }
    }
}

/// The compact layout: a counter counted once at the default precisions is
/// ONE key in Redis (besides its registry shard), a listpack hash of 7
/// integer fields `(precision << 32) | slice index`, read back exactly at
/// every precision; deleting it leaves nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compact_counter_counted_once_is_one_hash_of_seven_integers() {
    let f = Fixture::new(Kind::RedisCompact).await;
    let mut raw = f.raw().await;
    let at = 1_336_376_415u64;
    f.counters.incr_at("ad:1", 3, at as f64).await.unwrap();
    let mut keys: Vec<String> = raw.keys("*").await.unwrap();
    keys.sort();
    let shard = tally::backend::redis::layout::shard_of("ad:1");
    let hash = format!("{{tally:{shard}}}:@:ad:1");
    let registry = format!("{{tally:{shard}}}:names");
    // The writer lane's record, if any, is per writer, not per counter.
    keys.retain(|k| !k.contains(":writer:"));
    assert_eq!(keys, vec![hash.clone(), registry.clone()]);
    assert_eq!(compact_encoding(&mut raw, &hash).await, "listpack");
    let mut fields: Vec<(u64, i64)> = raw.hgetall(&hash).await.unwrap();
    fields.sort_unstable();
    let want: Vec<(u64, i64)> = BOOK_PRECISIONS
        .iter()
        .map(|&p| ((p << 32) | (at / p), 3))
        .collect();
    assert_eq!(fields, want);
    let members: Vec<String> = raw.zrange(&registry, 0, -1).await.unwrap();
    assert_eq!(members, vec!["ad:1"]);
    for p in BOOK_PRECISIONS {
        assert_eq!(
            f.counters.get("ad:1", p).await.unwrap(),
            vec![s(at / p * p, 3)],
            "{p}"
        );
    }
    assert!(f.counters.delete("ad:1").await.unwrap());
    let mut left: Vec<String> = raw.keys("*").await.unwrap();
    left.retain(|k| !k.contains(":writer:"));
    assert!(left.is_empty(), "{left:?}");
}

/// A counter is registered by its first write only: a later write whose
/// series' coarsest hash already held a count sends no `ZADD` (that hash
/// exists only while the series is registered), in every cleaned layout;
/// a counter deleted and written again is registered again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_counter_is_registered_by_its_first_write_only() {
    for kind in [Kind::RedisDefault, Kind::RedisRia, Kind::RedisCompact] {
        let f = Fixture::new(kind).await;
        let mut raw = f.raw().await;
        let zadds = |raw: &mut redis::aio::MultiplexedConnection| {
            let mut raw = raw.clone();
            async move {
                let stats: String = redis::cmd("INFO")
                    .arg("commandstats")
                    .query_async(&mut raw)
                    .await
                    .unwrap();
                tally_testkit::command_calls(&stats, "zadd")
            }
        };
        let at = 1_336_376_415.0;
        f.counters.incr_at("ad:1", 1, at).await.unwrap();
        let first = zadds(&mut raw).await;
        assert!(first >= 1, "{kind:?}: the first write registers");
        // The same slices again.
        f.counters.incr_at("ad:1", 2, at).await.unwrap();
        assert_eq!(zadds(&mut raw).await, first, "{kind:?}");
        // A later second: new finest slices. The book's layout has a
        // member per precision, each vouched for by its own hash's slice,
        // so there the new slices are registered again (a ZADD of members
        // it has); the others' coarsest slice vouches for the series.
        f.counters.incr_at("ad:1", 4, at + 1.0).await.unwrap();
        if kind != Kind::RedisRia {
            assert_eq!(zadds(&mut raw).await, first, "{kind:?}");
        }
        assert_eq!(f.all_names().await, vec!["ad:1"], "{kind:?}");
        assert_eq!(
            f.counters.get("ad:1", 86400).await.unwrap(),
            vec![s(1_336_348_800, 7)],
            "{kind:?}"
        );
        assert!(f.counters.delete("ad:1").await.unwrap());
        assert!(f.all_names().await.is_empty(), "{kind:?}");
        f.counters.incr_at("ad:1", 1, at).await.unwrap();
        assert!(zadds(&mut raw).await > first, "{kind:?}");
        assert_eq!(f.all_names().await, vec!["ad:1"], "{kind:?}");
    }
}

/// How Redis encodes a compact series' hash (`OBJECT ENCODING`).
async fn compact_encoding(raw: &mut redis::aio::MultiplexedConnection, hash: &str) -> String {
    redis::cmd("OBJECT")
        .arg("ENCODING")
        .arg(hash)
        .query_async(raw)
        .await
        .unwrap()
}

/// The compact layout past the listpack limit: a series busy at every
/// precision outgrows `hash-max-listpack-entries` (512 on the test servers)
/// and Redis keeps its one hash as a hashtable; reads (HGETALL instead of
/// DUMP) and the cleaner's first pass (HKEYS) still name each precision's
/// slices exactly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_compact_series_outgrows_the_listpack_and_reads_the_same() {
    let settings = CounterSettings {
        precisions: vec![1, 60],
        samples: 1_000,
    };
    let f = Fixture::with_settings(Kind::RedisCompact, settings).await;
    let mut raw = f.raw().await;
    let base = 1_000_000u64;
    let increments: Vec<tally::Increment> = (0..600)
        .map(|i| tally::Increment::new("busy", 1).at((base + i) as f64))
        .collect();
    f.counters.incr_many(&increments).await.unwrap();
    let hash = format!(
        "{{tally:{}}}:@:busy",
        tally::backend::redis::layout::shard_of("busy")
    );
    assert_eq!(compact_encoding(&mut raw, &hash).await, "hashtable");
    let fine = f.counters.get("busy", 1).await.unwrap();
    assert_eq!(fine, (0..600).map(|i| s(base + i, 1)).collect::<Vec<_>>());
    let coarse = f.counters.get("busy", 60).await.unwrap();
    assert_eq!(coarse.iter().map(|x| x.count).sum::<i64>(), 600);
    assert_eq!(coarse.len(), 11);
    // At base + 1_299 the 1 s window keeps base + 300 on: 300 go.
    let mut cleaner = f.counters.cleaner(CleanerSettings::default()).unwrap();
    let report = cleaner
        .pass_at(Timestamp::from_secs(base + 1_299).unwrap())
        .await
        .unwrap();
    assert_eq!(report.samples_removed, 300, "{report:?}");
    let fine = f.counters.get("busy", 1).await.unwrap();
    assert_eq!(fine, (300..600).map(|i| s(base + i, 1)).collect::<Vec<_>>());
    assert_eq!(f.counters.get("busy", 60).await.unwrap(), coarse);
}
