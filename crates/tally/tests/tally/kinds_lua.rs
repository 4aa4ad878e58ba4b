//! The kinds' Lua merges (`kind_stats.lua`, `kind_gauge.lua`) against their
//! Rust twins on a real redis-server: over many seeded random pairs the
//! script writes the very bytes the Rust merge encodes. Also: the distinct
//! kind's Redis-encoded HyperLogLog against Redis's own registers, the
//! encoded size and Redis memory of a busy statistic, and the cost of a Lua
//! merge (printed; run with `--no-capture` to read the figures).

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redis::{Commands, Connection, Script};
use tally::engine::kinds::{DistinctValue, GaugeValue, SketchSettings, StatsValue};
use tally::engine::{Aggregate, Codec};
use tally_testkit::{RedisServer, normal_cdf};

const KIND_STATS: &str = include_str!("../../src/backend/redis/lua/kind_stats.lua");
const KIND_GAUGE: &str = include_str!("../../src/backend/redis/lua/kind_gauge.lua");

/// A fresh redis-server (stopped on drop) and a connection to it.
fn redis() -> (RedisServer, Connection) {
    let server = RedisServer::start();
    let conn = redis::Client::open(server.url())
        .unwrap()
        .get_connection()
        .unwrap();
    (server, conn)
}

/// `merge_stats(ARGV[1] or false, ARGV[2])`; an empty ARGV[1] is "absent".
fn stats_script() -> Script {
    Script::new(&format!(
        "{KIND_STATS}\nlocal old = false\nif ARGV[1] ~= '' then old = ARGV[1] end\n\
         return merge_stats(old, ARGV[2])"
    ))
}

fn lua_merge_stats(
    conn: &mut Connection,
    script: &Script,
    old: Option<&StatsValue>,
    delta: &StatsValue,
) -> redis::RedisResult<Vec<u8>> {
    script
        .arg(old.map(Codec::to_bytes).unwrap_or_default())
        .arg(delta.to_bytes())
        .invoke(conn)
}

/// A lognormal sample (sigma in log space), by Box-Muller.
fn lognormal(rng: &mut StdRng, mu: f64, sigma: f64) -> f64 {
    (mu + sigma * normal(rng)).exp()
}

fn normal(rng: &mut StdRng) -> f64 {
    let u1: f64 = 1.0 - rng.random::<f64>();
    let u2: f64 = rng.random();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// A statistic of random values of a random shape: lognormal, small
/// integers with negatives and zeros, dyadic fractions, or 60 decades.
fn random_stats(rng: &mut StdRng, settings: SketchSettings) -> StatsValue {
    let mut s = StatsValue::new(settings);
    let n = match rng.random_range(0..10) {
        0 => 0,
        1..=3 => rng.random_range(1..5),
        4..=7 => rng.random_range(5..200),
        _ => rng.random_range(200..3000),
    };
    let shape = rng.random_range(0..4);
    for _ in 0..n {
        let x = match shape {
            0 => {
                let mu = rng.random_range(-3.0..8.0);
                lognormal(rng, mu, 0.5)
            }
            1 => f64::from(rng.random_range(-50..50)),
            2 => f64::from(rng.random_range(-4000..4000)) / 64.0,
            _ => {
                let m = 10f64.powf(rng.random_range(-30.0..30.0));
                if rng.random_bool(0.3) { -m } else { m }
            }
        };
        let w = if rng.random_bool(0.9) {
            1
        } else {
            rng.random_range(1..1000)
        };
        s.record_weighted(x, w).unwrap();
    }
    s
}

fn random_settings(rng: &mut StdRng, alpha: f64) -> SketchSettings {
    let bound = if rng.random_bool(0.6) {
        2048
    } else {
        rng.random_range(16..64)
    };
    SketchSettings::new(alpha, bound).unwrap()
}

#[test]
fn lua_stats_merge_writes_the_bytes_of_the_rust_merge() {
    let (_server, mut conn) = redis();
    let script = stats_script();
    let mut rng = StdRng::seed_from_u64(0x5747);
    let mut collapsed = 0;
    for round in 0..400 {
        let alpha = [0.01, 0.02, 0.001, 0.1][round % 4];
        let settings = random_settings(&mut rng, alpha);
        let old = random_stats(&mut rng, settings);
        let settings = random_settings(&mut rng, alpha);
        let delta = random_stats(&mut rng, settings);
        let old = (round % 7 != 0).then_some(old);
        let mut expected = old.clone().unwrap_or_else(StatsValue::identity);
        expected.merge(&delta).unwrap();
        // With nothing stored, the delta is stored as it is.
        let expected_bytes = match &old {
            None => delta.to_bytes(),
            Some(_) => expected.to_bytes(),
        };
        let got = lua_merge_stats(&mut conn, &script, old.as_ref(), &delta).unwrap();
        assert_eq!(got, expected_bytes, "round {round}: bytes differ");
        let back = StatsValue::decode(&got).unwrap();
        assert_eq!(back, expected, "round {round}");
        assert_eq!(back.count(), expected.count());
        assert_eq!((back.min(), back.max()), (expected.min(), expected.max()));
        assert_eq!(back.sum().to_bits(), expected.sum().to_bits());
        assert_eq!(
            back.sum_of_squares().to_bits(),
            expected.sum_of_squares().to_bits()
        );
        if expected.settings().max_buckets() < 2048 {
            collapsed += 1;
        }
    }
    assert!(
        collapsed > 50,
        "too few pairs under a small bound: {collapsed}"
    );
}

#[test]
fn lua_stats_merge_refuses_what_the_rust_merge_refuses() {
    let (_server, mut conn) = redis();
    let script = stats_script();
    let expect_error = |conn: &mut Connection, old: &StatsValue, delta: &StatsValue, msg: &str| {
        let mut rust = old.clone();
        assert!(
            rust.merge(delta).is_err(),
            "the Rust merge accepted it ({msg})"
        );
        let err = lua_merge_stats(conn, &script, Some(old), delta).unwrap_err();
        assert_eq!(error_line(&err), msg);
    };
    let mut big = StatsValue::default();
    big.record_weighted(1.0, (1 << 53) - 1).unwrap();
    let mut two = StatsValue::default();
    two.record_weighted(2.0, 2).unwrap();
    expect_error(&mut conn, &big, &two, "TALLY_OVERFLOW stats count");
    let mut huge = StatsValue::default();
    huge.record(1e154).unwrap();
    expect_error(&mut conn, &huge, &huge, "TALLY_OVERFLOW stats sum");
    let mut coarse = StatsValue::new(SketchSettings::new(0.02, 2048).unwrap());
    coarse.record(1.0).unwrap();
    expect_error(
        &mut conn,
        &two,
        &coarse,
        "TALLY_FAILED stats: relative accuracy 0.02 differs from the stored 0.01",
    );
    let err: redis::RedisResult<Vec<u8>> = script.arg("junk").arg(two.to_bytes()).invoke(&mut conn);
    assert_eq!(
        error_line(&err.unwrap_err()),
        "TALLY_FAILED stats: the stored value is not a statistic"
    );
}

/// The error reply as the script wrote it: "<CODE> <detail>".
fn error_line(e: &redis::RedisError) -> String {
    format!("{} {}", e.code().unwrap_or("?"), e.detail().unwrap_or(""))
}

/// `merge_gauge(old, delta, current)` returning `{blob or '', last}` with
/// last written in full precision.
fn gauge_script() -> Script {
    Script::new(&format!(
        "{KIND_GAUGE}\nlocal old = false\nif ARGV[1] ~= '' then old = ARGV[1] end\n\
         local blob, last = merge_gauge(old, ARGV[2], tonumber(ARGV[3]))\n\
         if type(blob) == 'table' then return blob end\n\
         return {{blob or '', string.format('%.17g', last)}}"
    ))
}

fn random_ops(rng: &mut StdRng) -> GaugeValue {
    let mut g = GaugeValue::identity();
    for _ in 0..rng.random_range(0..8) {
        let x = if rng.random_bool(0.5) {
            f64::from(rng.random_range(-100..100))
        } else {
            rng.random_range(-1e6..1e6)
        };
        let op = if rng.random_bool(0.4) {
            GaugeValue::set(x)
        } else {
            GaugeValue::adjust(x)
        };
        g.merge(&op.unwrap()).unwrap();
    }
    g
}

#[test]
fn lua_gauge_merge_writes_the_bytes_of_the_rust_merge() {
    let (_server, mut conn) = redis();
    let script = gauge_script();
    let mut rng = StdRng::seed_from_u64(0x6a06e);
    for round in 0..400 {
        let current = rng.random_range(-1e3..1e3);
        let old = if rng.random_bool(0.6) {
            let slice = random_ops(&mut rng).applied(current).unwrap();
            (!slice.is_identity()).then_some(slice)
        } else {
            None
        };
        let delta = random_ops(&mut rng);
        let expected = match old {
            Some(mut s) => {
                s.merge(&delta).unwrap();
                s
            }
            None => delta.applied(current).unwrap(),
        };
        let (blob, last): (Vec<u8>, String) = script
            .arg(old.map(|o| o.to_bytes()).unwrap_or_default())
            .arg(delta.to_bytes())
            .arg(format!("{current:?}"))
            .invoke(&mut conn)
            .unwrap();
        let expected_last = expected.reading().map_or(current, |r| r.last);
        assert_eq!(last.parse::<f64>().unwrap(), expected_last, "round {round}");
        if expected.is_identity() {
            assert!(blob.is_empty(), "round {round}: wrote {blob:?}");
        } else {
            assert_eq!(blob, expected.to_bytes(), "round {round}: bytes differ");
            assert_eq!(GaugeValue::decode(&blob).unwrap(), expected);
        }
    }
}

#[test]
fn lua_gauge_merge_keeps_order_and_refuses_infinity() {
    let (_server, mut conn) = redis();
    let script = gauge_script();
    // A slice holding one set, then a delta: `first` then `then` ends at
    // `then`, whichever is larger; adding past f64::MAX is refused.
    let slice = |x: f64| GaugeValue::set(x).unwrap().applied(0.0).unwrap().to_bytes();
    let merge = |conn: &mut Connection, first: f64, then: GaugeValue| {
        script
            .arg(slice(first))
            .arg(then.to_bytes())
            .arg("0")
            .invoke::<(Vec<u8>, String)>(conn)
    };
    for (first, then, last) in [(1.0, 2.0, "2"), (2.0, 1.0, "1")] {
        let (_, got) = merge(&mut conn, first, GaugeValue::set(then).unwrap()).unwrap();
        assert_eq!(got, last);
    }
    let err = merge(&mut conn, f64::MAX, GaugeValue::adjust(f64::MAX).unwrap());
    assert_eq!(error_line(&err.unwrap_err()), "TALLY_OVERFLOW gauge");
}

/// The registers Redis holds for `key` (PFDEBUG GETREG).
fn redis_registers(conn: &mut Connection, key: &str) -> Vec<u8> {
    redis::cmd("PFDEBUG")
        .arg("GETREG")
        .arg(key)
        .query::<Vec<i64>>(conn)
        .unwrap()
        .into_iter()
        .map(|r| r as u8)
        .collect()
}

#[test]
fn distinct_redis_bytes_are_redis_registers() {
    let (_server, mut conn) = redis();
    for n in [3usize, 300, 20_000] {
        let values: Vec<String> = (0..n).map(|i| format!("user:{i}")).collect();
        let ours = DistinctValue::of(&values);
        let _: () = conn.set("ours", ours.redis_bytes()).unwrap();
        let _: () = redis::cmd("DEL").arg("redis").query(&mut conn).unwrap();
        for chunk in values.chunks(1000) {
            let _: i64 = redis::cmd("PFADD")
                .arg("redis")
                .arg(chunk)
                .query(&mut conn)
                .unwrap();
        }
        let count: u64 = redis::cmd("PFCOUNT").arg("ours").query(&mut conn).unwrap();
        assert_eq!(count, ours.estimate(), "{n} values");
        let theirs: u64 = redis::cmd("PFCOUNT").arg("redis").query(&mut conn).unwrap();
        assert_eq!(count, theirs, "{n} values");
        assert_eq!(
            redis_registers(&mut conn, "ours"),
            redis_registers(&mut conn, "redis"),
            "{n} values"
        );
        // PFMERGE takes it as a source.
        let _: () = redis::cmd("PFMERGE")
            .arg("merged")
            .arg("redis")
            .arg("ours")
            .query(&mut conn)
            .unwrap();
        let merged: u64 = redis::cmd("PFCOUNT")
            .arg("merged")
            .query(&mut conn)
            .unwrap();
        assert_eq!(merged, theirs);
        let _: () = redis::cmd("DEL").arg("merged").query(&mut conn).unwrap();
    }
}

// ---- sizes and cost --------------------------------------------------------

/// A Poisson sample (Knuth) for small means, normal approximation above.
fn poisson(rng: &mut StdRng, lambda: f64) -> u64 {
    if lambda > 30.0 {
        return (lambda + lambda.sqrt() * normal(rng)).round().max(0.0) as u64;
    }
    let limit = (-lambda).exp();
    let (mut k, mut p) = (0u64, 1.0);
    loop {
        p *= rng.random::<f64>();
        if p < limit {
            return k;
        }
        k += 1;
    }
}

const MU: f64 = 4.605_170_185_988_091; // ln 100: a median of 100 (ms)
const SIGMA: f64 = 0.5;

/// One slice of `n` lognormal observations at the default settings:
/// recorded one by one up to 100,000, else filled bucket by bucket from
/// the expected counts plus Poisson noise.
fn lognormal_slice(rng: &mut StdRng, n: u64) -> StatsValue {
    let settings = SketchSettings::default();
    let mut s = StatsValue::new(settings);
    if n <= 100_000 {
        for _ in 0..n {
            s.record(lognormal(rng, MU, SIGMA)).unwrap();
        }
        return s;
    }
    let alpha = settings.alpha();
    let ln_gamma = ((1.0 + alpha) / (1.0 - alpha)).ln();
    let (lo, hi) = (
        ((MU - 8.0 * SIGMA) / ln_gamma).floor() as i32,
        ((MU + 8.0 * SIGMA) / ln_gamma).ceil() as i32,
    );
    for i in lo..=hi {
        let p = normal_cdf((f64::from(i) * ln_gamma - MU) / SIGMA)
            - normal_cdf((f64::from(i - 1) * ln_gamma - MU) / SIGMA);
        let c = poisson(rng, n as f64 * p);
        if c > 0 {
            s.record_weighted(settings.bucket_value(i), c).unwrap();
        }
    }
    s
}

/// The book's precisions and 120 slices each, at 1,000 observations a
/// second: one busy statistic's hashes fit the 512 KiB target in Redis.
#[test]
fn a_busy_statistic_fits_its_memory_target() {
    let (_server, mut conn) = redis();
    let mut rng = StdRng::seed_from_u64(86_400);
    for n in [1_000u64, 60_000, 3_600_000, 86_400_000] {
        let s = lognormal_slice(&mut rng, n);
        let buckets = s.sketch().count() - s.sketch().zeros();
        println!(
            "stats slice of {n} lognormal observations: {} bytes encoded ({} observations in buckets, p99 {:.1})",
            s.to_bytes().len(),
            buckets,
            s.quantile(0.99).unwrap().unwrap()
        );
    }
    // The worst case: a day of 86,400,000 observations spread evenly over
    // 2,048 buckets (a distribution 41 e-folds wide), the default bound.
    let settings = SketchSettings::default();
    let mut wide = StatsValue::new(settings);
    for i in 0..2048 {
        let c = poisson(&mut rng, 86_400_000.0 / 2048.0);
        wide.record_weighted(settings.bucket_value(i - 1024), c)
            .unwrap();
    }
    println!(
        "stats slice of {} observations over 2,048 buckets: {} bytes encoded",
        wide.count(),
        wide.to_bytes().len()
    );
    let mut total = 0u64;
    for seconds in [1u64, 5, 60, 300, 3600, 18_000, 86_400] {
        let key = format!("stats:{seconds}:busy");
        let mut largest = 0;
        for slice in 0..120u64 {
            let blob = lognormal_slice(&mut rng, 1000 * seconds).to_bytes();
            largest = largest.max(blob.len());
            let _: () = conn.hset(&key, slice * seconds, blob).unwrap();
        }
        let used: u64 = redis::cmd("MEMORY")
            .arg("USAGE")
            .arg(&key)
            .arg("SAMPLES")
            .arg(0)
            .query(&mut conn)
            .unwrap();
        println!(
            "precision {seconds} s: 120 slices, largest blob {largest} B, hash {used} B in Redis"
        );
        total += used;
    }
    println!("one busy statistic over 7 precisions x 120 slices: {total} B in Redis");
    assert!(total <= 512 * 1024, "{total} B is over the 512 KiB target");
}

/// usec_per_call of EVALSHA from INFO commandstats.
fn usec_per_call(conn: &mut Connection) -> f64 {
    let info: String = redis::cmd("INFO").arg("commandstats").query(conn).unwrap();
    let line = info
        .lines()
        .find(|l| l.starts_with("cmdstat_evalsha:"))
        .expect("evalsha was called");
    let field = line
        .split(',')
        .find_map(|f| f.strip_prefix("usec_per_call="))
        .unwrap();
    field.parse().unwrap()
}

#[test]
fn lua_merge_cost_per_call() {
    let (_server, mut conn) = redis();
    let script = stats_script();
    let looped = Script::new(&format!(
        "{KIND_STATS}\nlocal r\nfor _ = 1, 100 do r = merge_stats(ARGV[1], ARGV[2]) end\nreturn r"
    ));
    let mut rng = StdRng::seed_from_u64(1);
    // A flush's delta: one second of 1,000 observations.
    let delta = lognormal_slice(&mut rng, 1000);
    // A very wide sketch: 18 decades fill the 2,048-bucket bound.
    let mut wide = StatsValue::default();
    for _ in 0..200_000 {
        wide.record(10f64.powf(rng.random_range(-9.0..9.0)))
            .unwrap();
    }
    let mut wide_delta = StatsValue::default();
    for _ in 0..1000 {
        wide_delta
            .record(10f64.powf(rng.random_range(-9.0..9.0)))
            .unwrap();
    }
    let cases = [
        ("1 s slice", lognormal_slice(&mut rng, 1000), &delta),
        ("1 day slice", lognormal_slice(&mut rng, 86_400_000), &delta),
        ("2,048-bucket slice", wide, &wide_delta),
    ];
    for (what, old, delta) in cases {
        // Load the script, then measure only the calls.
        lua_merge_stats(&mut conn, &script, Some(&old), delta).unwrap();
        let _: () = redis::cmd("CONFIG")
            .arg("RESETSTAT")
            .query(&mut conn)
            .unwrap();
        for _ in 0..300 {
            lua_merge_stats(&mut conn, &script, Some(&old), delta).unwrap();
        }
        let cost = usec_per_call(&mut conn);
        // The merge alone: 100 merges in one call.
        let _: () = redis::cmd("CONFIG")
            .arg("RESETSTAT")
            .query(&mut conn)
            .unwrap();
        for _ in 0..10 {
            let _: Vec<u8> = looped
                .arg(old.to_bytes())
                .arg(delta.to_bytes())
                .invoke(&mut conn)
                .unwrap();
        }
        let merge = usec_per_call(&mut conn) / 100.0;
        println!(
            "Lua merge_stats of a {what} ({} B) with a delta ({} B): {cost:.1} us per EVALSHA, \
             {merge:.1} us per merge",
            old.to_bytes().len(),
            delta.to_bytes().len()
        );
        assert!(cost > 0.0 && merge > 0.0);
    }
}

const ENGINE_UNDO: &str = include_str!("../../src/backend/redis/lua/engine_undo.lua");
const STATS_FOLD: &str = include_str!("../../src/backend/redis/lua/stats_fold.lua");

/// `stats_fold.lua` for statistics, after what it needs.
fn with_stats_fold(body: &str) -> Script {
    Script::new(&format!(
        "{ENGINE_UNDO}{KIND_STATS}local FOLD_SUMS = false\n{STATS_FOLD}\n{body}"
    ))
}

/// Writes each delta of ARGV as `engine_apply.lua` writes one statistic's
/// observations of one second: into the pending slice KEYS[1] (fold_same,
/// else fold_open), folding into field 100 of KEYS[2] (precision 1).
/// Returns how many waited in the slice's queue and how many were merged
/// into its value (or opened it).
fn pending_writes_script() -> Script {
    with_stats_fold(
        "local undo, queued, merged = {}, 0, 0\n\
         for i = 1, #ARGV do\n\
           local cur = fold_read(KEYS[1])\n\
           local before = cur[4] and redis.call('HLEN', KEYS[1]) or -1\n\
           local same, e = fold_same(undo, KEYS[1], cur, '1', '100', ARGV[i])\n\
           if not same and not e then\n\
             e = fold_open(undo, KEYS[1], cur, {KEYS[2]}, {'1'}, {'100'}, ARGV[i])\n\
           end\n\
           if e then return redis.error_reply(e) end\n\
           local n = redis.call('HLEN', KEYS[1])\n\
           if before >= 0 and n > before then queued = queued + 1 else merged = merged + 1 end\n\
         end\n\
         return {queued, merged}",
    )
}

/// The cleaner's fold (`engine_fold.lua`'s fold_pending) of the pending
/// slice KEYS[1] into KEYS[2]; returns what field 100 of KEYS[2] holds.
fn pending_fold_script() -> Script {
    with_stats_fold(
        "local e = fold_pending({}, KEYS[1], {KEYS[2]}, {'1'})\n\
         if e then return redis.error_reply(e) end\n\
         return redis.call('HGET', KEYS[2], '100')",
    )
}

/// `merge_stats` of every delta of ARGV in turn, from nothing: what the
/// pending slice held before its queue.
fn merges_one_by_one_script() -> Script {
    Script::new(&format!(
        "{KIND_STATS}\nlocal b = false\n\
         for i = 1, #ARGV do\n\
           b = merge_stats(b, ARGV[i])\n\
           if type(b) == 'table' then return b end\n\
         end\n\
         return b"
    ))
}

/// A delta as the store's writes send them: mostly one observation, at
/// times a bigger statistic (another bucket bound, or none), a weight too
/// big to queue, or (when `wild`) a value whose square is too big to queue
/// (and whose slice then keeps no queue).
fn random_delta(rng: &mut StdRng, alpha: f64, wild: bool) -> StatsValue {
    let settings = SketchSettings::new(alpha, 2048).unwrap();
    let mut d = StatsValue::new(settings);
    match rng.random_range(0..100) {
        0..=4 => {
            let settings = random_settings(rng, alpha);
            return random_stats(rng, settings);
        }
        5 => d.record_weighted(3.0, 1 << 41).unwrap(),
        6 if wild => d.record(-1e151).unwrap(),
        _ => {
            let mu = rng.random_range(-2.0..6.0);
            d.record(lognormal(rng, mu, 1.0)).unwrap();
        }
    }
    d
}

/// Issue 20 §3: a statistic's writes into its pending slice wait in its
/// queue, a field per delta, and are merged (when the queue is full, or by
/// the fold) in the order written, so the value read (Rust: value and
/// deltas) and the value folded (Lua) are byte for byte those of merging
/// every write at once, as the pending slice did before its queue. The
/// pending value is format 3.
#[test]
fn lua_stats_queue_then_fold_writes_the_bytes_of_merges_one_by_one() {
    let (_server, mut conn) = redis();
    let (writes, fold, one_by_one) = (
        pending_writes_script(),
        pending_fold_script(),
        merges_one_by_one_script(),
    );
    let mut rng = StdRng::seed_from_u64(0x9e11);
    let (mut queued, mut merged) = (0, 0);
    for round in 0..60 {
        let alpha = [0.01, 0.02, 0.001][round % 3];
        let n = if round % 10 == 0 {
            1
        } else {
            rng.random_range(2..400)
        };
        let deltas: Vec<Vec<u8>> = (0..n)
            .map(|_| random_delta(&mut rng, alpha, round % 4 == 3).to_bytes())
            .collect();
        let _: () = redis::cmd("DEL")
            .arg("pend")
            .arg("slices")
            .query(&mut conn)
            .unwrap();
        let (q, m): (u64, u64) = writes
            .key("pend")
            .key("slices")
            .arg(&deltas)
            .invoke(&mut conn)
            .unwrap();
        queued += q;
        merged += m;
        let mut expected = StatsValue::identity();
        for d in &deltas {
            expected.merge(&StatsValue::decode(d).unwrap()).unwrap();
        }
        let (value, head, len): (Vec<u8>, Option<Vec<u8>>, usize) = redis::pipe()
            .hget("pend", "b")
            .hget("pend", "q0")
            .hlen("pend")
            .query(&mut conn)
            .unwrap();
        assert_eq!(&value[..4], &[0xdc, 0, 13, 3], "round {round}: format 3");
        // The deltas: the fields past s, b, t and q0.
        let n = if head.is_some() { len - 4 } else { 0 };
        let queued: Vec<Vec<u8>> = (1..=n)
            .map(|i| {
                redis::cmd("HGET")
                    .arg("pend")
                    .arg(format!("q{i}"))
                    .query(&mut conn)
                    .unwrap()
            })
            .collect();
        let queued: Vec<&[u8]> = queued.iter().map(Vec::as_slice).collect();
        let read = StatsValue::decode_pending(&value, None, &queued).unwrap();
        assert_eq!(read.to_bytes(), expected.to_bytes(), "round {round}: read");
        let folded: Vec<u8> = fold.key("pend").key("slices").invoke(&mut conn).unwrap();
        let before: Vec<u8> = one_by_one.arg(&deltas).invoke(&mut conn).unwrap();
        assert_eq!(folded, before, "round {round}: folded");
        assert_eq!(folded, expected.to_bytes(), "round {round}: folded");
        let left: bool = redis::cmd("EXISTS").arg("pend").query(&mut conn).unwrap();
        assert!(!left, "round {round}: the fold took the pending slice");
    }
    println!("{queued} writes queued, {merged} merged");
    assert!(queued > 5000, "too few writes queued: {queued}");
    assert!(merged > 300, "too few writes merged: {merged}");
}

/// The accumulator of a pending slice (`stats_fold.lua`): 200 seconds of
/// random writes (0 to 3 a second) at the precisions 1 s and 1 h, across
/// an hour's end and past the accumulator's bound of 64 values, then the
/// cleaner's fold. Every slice holds the bytes of merging its seconds'
/// values one after another in Rust (each second's value its deltas merged
/// in order), as the folds before the accumulator wrote them.
#[test]
fn lua_stats_accumulator_folds_the_bytes_of_merges_one_by_one() {
    let (_server, mut conn) = redis();
    let writes = with_stats_fold(
        "local sec, undo = tonumber(ARGV[1]), {}\n\
         local p, f = {'1', '3600'}, {ARGV[1], tostring(sec - sec % 3600)}\n\
         for i = 2, #ARGV do\n\
           local cur = fold_read(KEYS[1])\n\
           local same, e = fold_same(undo, KEYS[1], cur, '1', f[1], ARGV[i])\n\
           if not same and not e then\n\
             e = fold_open(undo, KEYS[1], cur, {KEYS[2], KEYS[3]}, p, f, ARGV[i])\n\
           end\n\
           if e then return redis.error_reply(e) end\n\
         end\n\
         return tonumber(redis.call('HGET', KEYS[1], 'ak') or 0)",
    );
    let fold = with_stats_fold(
        "local e = fold_pending({}, KEYS[1], {KEYS[2], KEYS[3]}, {'1', '3600'})\n\
         if e then return redis.error_reply(e) end\n\
         return redis.call('EXISTS', KEYS[1])",
    );
    let mut rng = StdRng::seed_from_u64(0xacc);
    let start = 1_700_000_000 / 3600 * 3600 + 3600 - 50;
    let mut seconds: Vec<(u64, StatsValue)> = Vec::new();
    let mut most = 0;
    for second in start..start + 200 {
        let n = rng.random_range(0..4);
        if n == 0 {
            continue;
        }
        let deltas: Vec<Vec<u8>> = (0..n)
            .map(|_| random_delta(&mut rng, 0.01, false).to_bytes())
            .collect();
        let held: u64 = writes
            .key("pend")
            .key("h1")
            .key("h3600")
            .arg(second)
            .arg(&deltas)
            .invoke(&mut conn)
            .unwrap();
        most = most.max(held);
        let mut value = StatsValue::identity();
        for d in &deltas {
            value.merge(&StatsValue::decode(d).unwrap()).unwrap();
        }
        seconds.push((second, value));
    }
    assert_eq!(most, 64, "the accumulator reached its bound");
    let left: u64 = fold
        .key("pend")
        .key("h1")
        .key("h3600")
        .invoke(&mut conn)
        .unwrap();
    assert_eq!(left, 0, "the cleaner's fold took the pending slice");
    let mut hours: Vec<(u64, StatsValue)> = Vec::new();
    for (second, value) in &seconds {
        let stored: Vec<u8> = conn.hget("h1", second).unwrap();
        assert_eq!(stored, value.to_bytes(), "second {second}");
        let hour = second - second % 3600;
        match hours.last_mut() {
            Some((h, sum)) if *h == hour => sum.merge(value).unwrap(),
            _ => hours.push((hour, value.clone())),
        }
    }
    assert_eq!(hours.len(), 2);
    for (hour, value) in &hours {
        let stored: Vec<u8> = conn.hget("h3600", hour).unwrap();
        assert_eq!(stored, value.to_bytes(), "hour {hour}");
    }
}

/// A write the queue cannot take is merged as before, and refused as
/// before: another accuracy, a count past 2^53. An older Tally, which reads
/// and merges format 1 only, fails on the pending value (format 3 now)
/// instead of reading it without its queue.
#[test]
fn lua_stats_queue_refuses_what_the_merge_refuses() {
    let (_server, mut conn) = redis();
    let writes = pending_writes_script();
    let mut one = StatsValue::default();
    one.record(1.0).unwrap();
    let mut coarse = StatsValue::new(SketchSettings::new(0.02, 2048).unwrap());
    coarse.record(1.0).unwrap();
    let err = writes
        .key("pend")
        .key("slices")
        .arg(one.to_bytes())
        .arg(one.to_bytes())
        .arg(coarse.to_bytes())
        .invoke::<(u64, u64)>(&mut conn)
        .unwrap_err();
    assert_eq!(
        error_line(&err),
        "TALLY_FAILED stats: relative accuracy 0.02 differs from the stored 0.01"
    );
    let mut big = StatsValue::default();
    big.record_weighted(1.0, (1 << 53) - 1).unwrap();
    let err = writes
        .key("pend")
        .key("slices")
        .arg(big.to_bytes())
        .invoke::<(u64, u64)>(&mut conn)
        .unwrap_err();
    assert_eq!(error_line(&err), "TALLY_OVERFLOW stats count");
    // What an older Tally reads and merges.
    let value: Vec<u8> = redis::cmd("HGET")
        .arg("pend")
        .arg("b")
        .query(&mut conn)
        .unwrap();
    let e = StatsValue::decode(&value).unwrap_err().to_string();
    assert!(e.contains("format"), "{e}");
    let merge = stats_script();
    let err = merge
        .arg(&value)
        .arg(one.to_bytes())
        .invoke::<Vec<u8>>(&mut conn)
        .unwrap_err();
    assert_eq!(
        error_line(&err),
        "TALLY_FAILED stats: the stored value is not a statistic"
    );
    let err = merge
        .arg(one.to_bytes())
        .arg(&value)
        .invoke::<Vec<u8>>(&mut conn)
        .unwrap_err();
    assert_eq!(
        error_line(&err),
        "TALLY_FAILED stats: the delta is not a statistic"
    );
}
