//! The sums' fast path (`lua/sum_fast.lua`) and short call
//! (`lua/sum_short.lua`) against the full path, on a real redis-server:
//! each call runs on the same stored state through the apply script with
//! and without the fast path, and must answer the same and leave every key
//! the same; a third script, the fast path alone, says which calls it
//! takes, and the short call of each one-counter write must do what the
//! fast path does where it takes the write into a pending slice, and
//! nothing elsewhere.

use super::kinds;
use super::testing::{FOLDING, batch_of, cells_at, counters_at, sums_of, write};
use super::*;
use super::protocol::{ApplyCall, Route, SHORT_LUA, short_call};
use crate::engine::{Applied, SeriesWrite, Value};

/// Every key of the server: its name, its DUMP and whether it expires,
/// in name order.
async fn state(conn: &mut crate::backend::redis::RedisHandle) -> Vec<(String, Vec<u8>, bool)> {
    let mut names: Vec<String> = redis::cmd("KEYS").arg("*").query_async(conn).await.unwrap();
    names.sort();
    let mut out = Vec::new();
    for name in names {
        let dump: Vec<u8> = redis::cmd("DUMP").arg(&name).query_async(conn).await.unwrap();
        let ttl: i64 = redis::cmd("PTTL").arg(&name).query_async(conn).await.unwrap();
        out.push((name, dump, ttl > 0));
    }
    out
}

/// Puts back `saved` ([`state`]) as the server's only keys.
async fn restore(conn: &mut crate::backend::redis::RedisHandle, saved: &[(String, Vec<u8>, bool)]) {
    let _: () = redis::cmd("FLUSHALL").query_async(conn).await.unwrap();
    for (name, dump, expires) in saved {
        let ttl = if *expires { 604_800_000 } else { 0 };
        let _: () = redis::cmd("RESTORE")
            .arg(name)
            .arg(ttl)
            .arg(dump.as_slice())
            .query_async(conn)
            .await
            .unwrap();
    }
}

/// `call` sent as EVAL of `script`: its reply, or its error's text.
async fn run(
    conn: &mut crate::backend::redis::RedisHandle,
    script: &str,
    call: &ApplyCall<'_>,
) -> std::result::Result<redis::Value, String> {
    let mut cmd = redis::cmd("EVAL");
    cmd.arg(script);
    for arg in call.cmd.args_iter().skip(2) {
        match arg {
            redis::Arg::Simple(bytes) => cmd.arg(bytes),
            _ => unreachable!("only plain arguments"),
        };
    }
    cmd.query_async(conn).await.map_err(|e| e.to_string())
}

/// One call to run both ways.
struct Case {
    what: &'static str,
    before: Vec<Batch>,
    count: Option<&'static str>,
    call: Batch,
    /// Whether the fast path takes the call.
    fast: bool,
    /// Whether it is a write into the pending slice, which the short call
    /// takes too (the fast path also takes a counter without one).
    short: bool,
}

#[tokio::test]
async fn the_fast_path_does_what_the_full_path_does() {
    let now = 1_000_020u64;
    let (_server, redis, store, space) = counters_at(now).await;
    let keys = store.layout.space_keys(&space);
    let sums = kinds::of(Kind::Sum).unwrap();
    let (with_fast, full) = (sums.apply_lua(), sums.full_apply_lua());
    let fast_alone = format!(
        "{}\nreturn 'full path'",
        with_fast.strip_suffix(full.as_str()).unwrap()
    );
    assert!(fast_alone.len() > 100, "the sums' script starts with its fast path");
    let at = cells_at;
    let batch = |writes: Vec<SeriesWrite>, seq: Option<u64>| batch_of(&space, writes, seq);
    let one = |n: i64, second: u64, seq: Option<u64>| {
        batch(vec![write("a", &at(second), &Value::Sum(n))], seq)
    };
    let pending = keys.pending("a");
    let mut conn = redis.handle();
    // What a case is, what is written first, the pending count then set by
    // hand (if any), the call, and whether the fast path takes it.
    let busy = || vec![one(1, now, None); 2];
    let lane = |seqs: [u64; 2]| seqs.map(|seq| one(1, now, Some(seq))).to_vec();
    let case = |what, before, count, call, fast| Case {
        what,
        before,
        count,
        call,
        fast,
        short: fast,
    };
    // A counter without a pending slice, which the fast path writes to
    // every precision.
    let sparse = |what, before, call| Case {
        what,
        before,
        count: None,
        call,
        fast: true,
        short: false,
    };
    let both = vec![
        write("a", &at(now), &Value::Sum(1)),
        write("b", &at(now), &Value::Sum(1)),
    ];
    // Deltas and pending counts of 16 and 17 characters (SUM_SMALL).
    let (d16, d17) = (-100_000_000_000_000, -1_000_000_000_000_000);
    let (c16, c17) = (Some("-100000000000000"), Some("10000000000000000"));
    let big = 900_000_000_000_000_001;
    let cases = vec![
        sparse("a new counter", vec![], one(1, now, None)),
        sparse("the opening write", vec![one(1, now, None)], one(1, now, None)),
        sparse("a counter written a second before", vec![one(1, now - 1, None)], one(2, now, None)),
        sparse("a new counter with its lane's record", vec![], one(1, now, Some(1))),
        sparse("the opening write with its lane's record", lane([1, 1]), one(1, now, Some(2))),
        sparse("a count past 9 * 10^17, which opens nothing", vec![one(big, now, None)], one(1, now, None)),
        case("a delta of 0", vec![one(1, now - 1, None)], None, one(0, now, None), false),
        case("an overflow, taken back", vec![one(i64::MAX, now + 1, None)], None, one(1, now, None), false),
        case("into the pending slice", busy(), None, one(3, now, None), true),
        case("a negative delta", busy(), None, one(-7, now, None), true),
        case("with its lane's record", lane([1, 2]), None, one(2, now, Some(3)), true),
        case("a replayed write", lane([1, 5]), None, one(2, now, Some(4)), true),
        case("the next slice, which folds", busy(), None, one(1, now + 1, None), false),
        case("an older slice", busy(), None, one(1, now - 1, None), false),
        case("a delta of 17 characters", busy(), None, one(d17, now, None), false),
        case("a delta of 16 characters", busy(), None, one(d16, now, None), true),
        case("a count of 16 characters", busy(), c16, one(1, now, None), true),
        case("a count of 17 characters", busy(), c17, one(1, now, None), false),
        case("a count that is not a number", busy(), Some("x"), one(1, now, None), false),
        case("two counters in one call", busy(), None, batch(both, None), false),
    ];
    let mut shorts = 0;
    for (i, c) in cases.iter().enumerate() {
        let Case {
            what,
            before,
            count,
            call,
            fast,
            short,
        } = c;
        let _: () = redis::cmd("FLUSHALL").query_async(&mut conn).await.unwrap();
        for b in before {
            store.apply_batch(b).await.unwrap();
        }
        if let Some(count) = count {
            let _: () = redis::cmd("HSET")
                .arg(&pending)
                .arg("b")
                .arg(*count)
                .query_async(&mut conn)
                .await
                .unwrap();
        }
        let saved = state(&mut conn).await;
        let calls = store.apply_calls(keys, call, Route::of(keys, &space)).unwrap();
        assert_eq!(calls.len(), 1, "{what}");
        let took = run(&mut conn, &fast_alone, &calls[0]).await;
        restore(&mut conn, &saved).await;
        let fast_reply = run(&mut conn, &with_fast, &calls[0]).await;
        let fast_state = state(&mut conn).await;
        restore(&mut conn, &saved).await;
        let full_reply = run(&mut conn, &full, &calls[0]).await;
        let full_state = state(&mut conn).await;
        assert_eq!(fast_reply, full_reply, "case {i}, {what}: the reply");
        assert_eq!(fast_state, full_state, "case {i}, {what}: what is stored");
        assert_eq!(
            took != Ok(redis::Value::BulkString(b"full path".to_vec())),
            *fast,
            "case {i}, {what}: taken by the fast path ({took:?})"
        );
        // What the fast path answers: written (something changed) or a
        // replay (nothing did).
        match (fast, &fast_reply) {
            (true, Ok(redis::Value::Int(1 | 2))) => {
                assert_ne!(fast_state, saved, "case {i}, {what}: written")
            }
            (true, Ok(redis::Value::Int(0))) => {
                assert_eq!(fast_state, saved, "case {i}, {what}: a replay")
            }
            (true, other) => panic!("case {i}, {what}: the fast path answered {other:?}"),
            (false, _) => {}
        }
        // The short call of a one-counter write: what the full path does
        // where the fast path takes the write, else nothing (3).
        if let Some((cmd, _)) = short_call(&store.short, keys, call, |_, _| true).unwrap() {
            restore(&mut conn, &saved).await;
            let mut eval = redis::cmd("EVAL");
            eval.arg(SHORT_LUA);
            for arg in cmd.args_iter().skip(2) {
                match arg {
                    redis::Arg::Simple(bytes) => eval.arg(bytes),
                    _ => unreachable!("only plain arguments"),
                };
            }
            let reply: std::result::Result<redis::Value, String> =
                eval.query_async(&mut conn).await.map_err(|e| e.to_string());
            let short_state = state(&mut conn).await;
            if *short {
                assert_eq!(reply, full_reply, "case {i}, {what}: the short call's reply");
                assert_eq!(short_state, full_state, "case {i}, {what}: after the short call");
            } else {
                assert_eq!(reply, Ok(redis::Value::Int(3)), "case {i}, {what}: short call");
                assert_eq!(short_state, saved, "case {i}, {what}: the short call left all");
            }
            shorts += 1;
        }
    }
    assert_eq!(shorts, cases.len() - 1, "every one-counter write has a short call");
}

/// The store sends a busy counter's writes into the slice its pending
/// slice was last seen at as the short call, and the full call again when
/// the short one finds the pending slice elsewhere; every count lands once.
#[tokio::test]
async fn busy_writes_take_the_short_call() {
    let now = 1_000_020u64;
    let (_server, redis, store, space) = counters_at(now).await;
    let keys = store.layout.space_keys(&space);
    let pending = keys.pending("a");
    let one = |n: i64, seq: u64| {
        batch_of(&space, vec![write("a", &cells_at(now), &Value::Sum(n))], Some(seq))
    };
    let short_loaded = || async {
        let loaded: Vec<bool> = redis::cmd("SCRIPT")
            .arg("EXISTS")
            .arg(store.short.get_hash())
            .query_async(&mut redis.handle())
            .await
            .unwrap();
        loaded[0]
    };
    // The first write goes to every precision, the second opens the
    // pending slice and says so: the store notes where it is.
    store.apply_batch(&one(1, 1)).await.unwrap();
    assert_eq!(store.pending_seen(&pending), None);
    store.apply_batch(&one(2, 2)).await.unwrap();
    assert_eq!(store.pending_seen(&pending), Some(now));
    assert!(!short_loaded().await, "no short call yet");
    // The third is the short call; its replay writes nothing.
    assert_eq!(store.apply_batch(&one(4, 3)).await.unwrap(), Applied::Written);
    assert!(short_loaded().await, "the third write was the short call");
    assert_eq!(store.apply_batch(&one(4, 3)).await.unwrap(), Applied::Duplicate);
    // Another writer's fold moved the pending slice: the short call writes
    // nothing, the full call follows, and the store notes the slice again.
    let _: () = redis::cmd("HSET")
        .arg(&pending)
        .arg("s")
        .arg(now - 1)
        .query_async(&mut redis.handle())
        .await
        .unwrap();
    let _: () = redis::cmd("HSET")
        .arg(&pending)
        .arg("t")
        .arg(
            FOLDING
                .iter()
                .map(|&p| format!("{p}:{}", if p == 1 { now - 1 } else { now / p * p }))
                .collect::<Vec<_>>()
                .join(" "),
        )
        .query_async(&mut redis.handle())
        .await
        .unwrap();
    store.apply_batch(&one(8, 4)).await.unwrap();
    assert_eq!(store.pending_seen(&pending), Some(now));
    // The second write went to every precision (1 + 2), the short call's 4
    // waited in the pending slice, which the last write found moved to
    // now - 1 and folded there before writing its 8 to every precision.
    assert_eq!(
        sums_of(&store, &space, "a").await,
        vec![vec![(now - 1, 4), (now, 11)], vec![(now / 60 * 60, 15)]]
    );
}

/// The apply script looks up a call's pending slices with one EXISTS per
/// run of them and reads only those that may exist: on the same stored
/// states it answers and stores what it does when it reads every series'
/// pending slice, and reads none for counters that have none.
#[tokio::test]
async fn the_pending_look_up_does_what_reading_every_pending_slice_does() {
    let now = 1_000_020u64;
    let (_server, redis, store, space) = counters_at(now).await;
    let keys = store.layout.space_keys(&space);
    let looking = kinds::of(Kind::Sum).unwrap().full_apply_lua();
    let look_up = "clear[c] = redis.call('EXISTS', unpack(KEYS, from, to)) == 0";
    assert!(looking.contains(look_up), "the apply script looks its pending slices up");
    let reading = looking.replace(look_up, "clear[c] = false");
    let at = cells_at;
    let batch = |writes: Vec<SeriesWrite>| batch_of(&space, writes, None);
    let one = |name: &str, second: u64| write(name, &at(second), &Value::Sum(1));
    // 100 counters: three runs of 32 pending slices and a fourth of 4.
    let many = |second: u64| batch((0..100).map(|i| one(&format!("c{i}"), second)).collect());
    // Two calls: the second opens the counter's pending slice.
    let busy = |name: &str, second: u64| vec![batch(vec![one(name, second)]); 2];
    let mut twice = vec![one("a", now), one("a", now)];
    twice.extend((0..40).map(|i| one(&format!("c{i}"), now)));
    // A counter written at two finest slices: its hashes are written
    // directly, its sums checked against its pending slice.
    let direct = write("c0", &[vec![(1, now - 1)], cells_at(now)].concat(), &Value::Sum(5));
    let mut first_direct = vec![direct.clone()];
    first_direct.extend((1..50).map(|i| one(&format!("c{i}"), now)));
    let two_busy = [vec![many(now)], busy("c5", now), busy("c70", now)].concat();
    // A case: what it is, what is written first, the call, how many pending
    // slices the look-up leaves to read (HMGET), and a counter's finest
    // slices after it.
    type Case<'a> = (&'a str, Vec<Batch>, Batch, u64, (&'a str, Vec<(u64, i64)>));
    let cases: Vec<Case> = vec![
        ("100 new counters", vec![], many(now), 0, ("c9", vec![(now, 1)])),
        (
            "7 new counters: too few to look up, each read",
            vec![],
            batch((0..7).map(|i| one(&format!("c{i}"), now)).collect()),
            7,
            ("c6", vec![(now, 1)]),
        ),
        ("100 counters written once before", vec![many(now)], many(now), 0, ("c9", vec![(now, 2)])),
        ("100 counters, two of them busy", two_busy, many(now), 64, ("c5", vec![(now, 4)])),
        (
            "a busy counter's older slice, which folds",
            busy("c40", now - 1),
            many(now),
            32,
            ("c40", vec![(now - 1, 2), (now, 1)]),
        ),
        (
            "a counter twice, the first opening its pending slice",
            vec![batch(vec![one("a", now)])],
            batch(twice),
            1,
            ("a", vec![(now, 3)]),
        ),
        (
            "a counter written directly first",
            vec![],
            batch(first_direct.clone()),
            0,
            ("c0", vec![(now - 1, 5), (now, 5)]),
        ),
        (
            "written directly beside its pending slice",
            busy("c0", now),
            batch(first_direct),
            32,
            ("c0", vec![(now - 1, 5), (now, 7)]),
        ),
    ];
    let mut conn = redis.handle();
    for (i, (what, before, call, reads, (name, finest))) in cases.iter().enumerate() {
        let _: () = redis::cmd("FLUSHALL").query_async(&mut conn).await.unwrap();
        for b in before {
            store.apply_batch(b).await.unwrap();
        }
        let saved = state(&mut conn).await;
        let calls = store.apply_calls(keys, call, Route::of(keys, &space)).unwrap();
        assert_eq!(calls.len(), 1, "{what}");
        let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query_async(&mut conn).await.unwrap();
        let looked_reply = run(&mut conn, &looking, &calls[0]).await;
        assert_eq!(super::testing::calls(&redis, "hmget").await, *reads, "case {i}, {what}: pending slices read");
        let looked_state = state(&mut conn).await;
        restore(&mut conn, &saved).await;
        let read_reply = run(&mut conn, &reading, &calls[0]).await;
        let read_state = state(&mut conn).await;
        assert!(looked_reply.is_ok(), "case {i}, {what}: {looked_reply:?}");
        assert_eq!(looked_reply, read_reply, "case {i}, {what}: the reply");
        assert_eq!(looked_state, read_state, "case {i}, {what}: what is stored");
        assert_ne!(looked_state, saved, "case {i}, {what}: written");
        assert_eq!(&sums_of(&store, &space, name).await[0], finest, "case {i}, {what}: {name}");
    }
}
