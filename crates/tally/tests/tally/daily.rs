//! The daily-statistics behaviour suite: every test runs on SQLite (memory
//! and file), a real redis-server and a real Redis Cluster.

use crate::common;

use common::{Fixture, Kind, RawConn};
use tally::daily::{DailySettings, Day, DayCount};
use tally::engine::Applied;
use tally::engine::WriteSeq;
use tally::{Clock, Error};

/// The behaviour suite on the backends `$set` names, with `$extra` tests:
/// every backend with the default total (below), and Redis with the
/// running total (at the end of this file).
macro_rules! daily_suite {
    ($set:ident: $($extra:ident),* $(,)?) => {
        per_backend!($set:
            counts_views_per_day_and_keeps_a_running_total,
            last_days_come_in_order_with_missing_days_as_zero,
            retention_drops_old_days_without_a_cleaner,
            views_dated_before_the_window_only_count_toward_the_total,
            utc_offset_moves_the_day_boundary,
            bad_input_changes_nothing,
            overflow_changes_nothing,
            concurrent_views_are_exact,
            batches_span_many_entities,
            a_keyed_batch_counts_every_view_of_an_entity,
            the_writer_merges_views_and_they_read_back_exactly,
            a_retried_chunk_applies_each_write_once_and_refuses_only_the_overflow,
            the_writer_drops_an_overflowing_entity_alone,
            adds_racing_the_writers_shutdown_are_written_or_refused,
            the_writer_checks_views_as_incr_many_does,
            $($extra),*
        );
    };
}

daily_suite!(features: redis_keys_follow_the_seed);

fn settings(retention_days: u32) -> DailySettings {
    DailySettings {
        retention_days,
        utc_offset_minutes: 0,
    }
}

fn today(f: &Fixture) -> Day {
    Day::of(f.clock.now(), 0)
}

async fn counts_views_per_day_and_keeps_a_running_total(kind: Kind) {
    let f = Fixture::near_now(kind).await;
    let d = f.daily(settings(30)).await;
    let now = f.clock.now().as_secs_f64();
    for _ in 0..3 {
        d.incr("314").await.unwrap();
    }
    let counted = d.incr_by("314", 2, Some(now - 86_400.0)).await.unwrap();
    assert_eq!(counted.day, today(&f).plus(-1));
    assert_eq!((counted.day_count, counted.total), (2, 5));
    assert_eq!(
        d.today_count("314").await.unwrap(),
        DayCount {
            day: today(&f),
            count: 3
        }
    );
    assert_eq!(d.day("314", today(&f).plus(-1)).await.unwrap(), 2);
    assert_eq!(d.day("314", today(&f).plus(-2)).await.unwrap(), 0);
    assert_eq!(d.total("314").await.unwrap(), 5);
    assert_eq!(d.total("unknown").await.unwrap(), 0);
}

async fn last_days_come_in_order_with_missing_days_as_zero(kind: Kind) {
    let f = Fixture::near_now(kind).await;
    let d = f.daily(settings(30)).await;
    let now = f.clock.now().as_secs_f64();
    for (ago, views) in [(0, 1), (2, 3), (6, 2)] {
        d.incr_by("ad", views, Some(now - ago as f64 * 86_400.0))
            .await
            .unwrap();
    }
    let last = d.last("ad", 7).await.unwrap();
    let t = today(&f);
    let expected: Vec<DayCount> = [2, 0, 0, 0, 3, 0, 1]
        .iter()
        .enumerate()
        .map(|(i, &count)| DayCount {
            day: t.plus(i as i32 - 6),
            count,
        })
        .collect();
    assert_eq!(last, expected);
    // Any days, in the order asked.
    let some = d.days("ad", &[t, t.plus(-6), t.plus(-1)]).await.unwrap();
    assert_eq!(
        some.iter().map(|x| x.count).collect::<Vec<_>>(),
        vec![1, 2, 0]
    );
    assert!(d.last("ad", 0).await.unwrap_err().is_bad_input());
}

async fn retention_drops_old_days_without_a_cleaner(kind: Kind) {
    let f = Fixture::near_now(kind).await;
    let d = f.daily(settings(3)).await;
    let now = f.clock.now().as_secs_f64();
    for ago in 0..3 {
        d.incr_by("e", 10 + ago, Some(now - ago as f64 * 86_400.0))
            .await
            .unwrap();
    }
    let t0 = today(&f);
    assert_eq!(
        d.last("e", 3)
            .await
            .unwrap()
            .iter()
            .map(|x| x.count)
            .collect::<Vec<_>>(),
        vec![12, 11, 10]
    );
    // Two days later, only today's window remains: t0 is the oldest kept.
    f.clock.advance(2.0 * 86_400.0);
    let shown: Vec<i64> = d
        .days("e", &[t0.plus(-2), t0.plus(-1), t0])
        .await
        .unwrap()
        .iter()
        .map(|x| x.count)
        .collect();
    assert_eq!(shown, vec![0, 0, 10], "days out of the window read as 0");
    // The next write drops the old days physically, for this entity only.
    d.incr("e").await.unwrap();
    let store = f
        .backend
        .daily_store("advert", f.kind.daily_total())
        .await
        .unwrap();
    let entity = tally::Name::new("e").unwrap();
    let raw = store
        .days(&entity, &[t0.plus(-2), t0.plus(-1), t0, t0.plus(2)])
        .await
        .unwrap();
    assert_eq!(raw, vec![0, 0, 10, 1]);
    // The all-time total keeps everything.
    assert_eq!(d.total("e").await.unwrap(), 10 + 11 + 12 + 1);
}

async fn views_dated_before_the_window_only_count_toward_the_total(kind: Kind) {
    let f = Fixture::near_now(kind).await;
    let d = f.daily(settings(2)).await;
    let now = f.clock.now().as_secs_f64();
    let counted = d
        .incr_by("old", 4, Some(now - 5.0 * 86_400.0))
        .await
        .unwrap();
    assert_eq!((counted.day_count, counted.total), (0, 4));
    assert_eq!(d.day("old", today(&f).plus(-5)).await.unwrap(), 0);
    assert_eq!(d.total("old").await.unwrap(), 4);
}

async fn utc_offset_moves_the_day_boundary(kind: Kind) {
    let f = Fixture::near_now(kind).await;
    let d = f
        .daily(DailySettings {
            retention_days: 10,
            utc_offset_minutes: 60,
        })
        .await;
    // 23:30 UTC yesterday is already today in UTC+01:00.
    let utc_today = today(&f);
    let at = utc_today.start_secs(0) as f64 - 1800.0;
    let counted = d.incr_by("tz", 1, Some(at)).await.unwrap();
    assert_eq!(counted.day, utc_today);
    assert_eq!(
        Day::of(tally::Timestamp::from_secs_f64(at).unwrap(), 0),
        utc_today.plus(-1)
    );
}

/// Views every writer refuses as bad input: (entity, count, at, what the
/// error says).
const BAD_VIEWS: [(&str, i64, Option<f64>, &str); 7] = [
    ("{advert:1}", 1, None, "must not contain `{`"),
    ("", 1, None, "must not be empty"),
    ("a\nb", 1, None, "control characters"),
    ("ok", 0, None, "from 1 up"),
    ("ok", -3, None, "from 1 up"),
    ("ok", 1, Some(f64::NAN), "not a finite"),
    ("ok", 1, Some(-1.0), "before the Unix epoch"),
];

/// Asserts that `err`, the answer to a view of `entity`, is bad input
/// saying `message`.
fn assert_bad_view(err: &tally::Error, entity: &str, message: &str) {
    assert!(err.is_bad_input(), "{entity:?}: {err}");
    assert!(err.to_string().contains(message), "{entity:?}: {err}");
}

async fn bad_input_changes_nothing(kind: Kind) {
    let f = Fixture::near_now(kind).await;
    let d = f.daily(settings(30)).await;
    for (entity, count, at, message) in BAD_VIEWS {
        let err = d.incr_by(entity, count, at).await.unwrap_err();
        assert_bad_view(&err, entity, message);
    }
    // A batch with one bad view writes nothing at all.
    let batch = vec![
        tally::View {
            entity: "ok".into(),
            count: 1,
            at: None,
        },
        tally::View {
            entity: "bad}".into(),
            count: 1,
            at: None,
        },
    ];
    assert!(d.incr_many(&batch).await.unwrap_err().is_bad_input());
    assert_eq!(d.total("ok").await.unwrap(), 0);
    assert_eq!(d.today_count("ok").await.unwrap().count, 0);
    assert!(d.incr_many(&[]).await.unwrap_err().is_bad_input());
    // Bad settings are refused at start.
    let store = f
        .backend
        .daily_store("advert", f.kind.daily_total())
        .await
        .unwrap();
    let bad = tally::DailyStats::new(store, settings(0)).unwrap_err();
    assert!(matches!(bad, Error::Config(_)), "{bad}");
}

async fn overflow_changes_nothing(kind: Kind) {
    let f = Fixture::near_now(kind).await;
    let d = f.daily(settings(30)).await;
    d.incr_by("big", i64::MAX, None).await.unwrap();
    let err = d.incr_by("big", 1, None).await.unwrap_err();
    assert!(err.is_bad_input(), "{err}");
    assert!(err.to_string().contains("overflow"), "{err}");
    assert_eq!(d.total("big").await.unwrap(), i64::MAX);
    assert_eq!(d.today_count("big").await.unwrap().count, i64::MAX);
    // The day alone can overflow too (the total was reset by nothing else):
    // a view on another day still fits neither.
    let yesterday = f.clock.now().as_secs_f64() - 86_400.0;
    assert!(d.incr_by("big", 1, Some(yesterday)).await.is_err());
    assert_eq!(d.day("big", today(&f).plus(-1)).await.unwrap(), 0);
}

async fn concurrent_views_are_exact(kind: Kind) {
    let f = Fixture::near_now(kind).await;
    let d = f.daily(settings(30)).await;
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            let d = d.clone();
            tokio::spawn(async move {
                for _ in 0..100 {
                    d.incr("hot").await.unwrap();
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(d.total("hot").await.unwrap(), 400);
    assert_eq!(d.today_count("hot").await.unwrap().count, 400);
}

async fn batches_span_many_entities(kind: Kind) {
    let f = Fixture::near_now(kind).await;
    let d = f.daily(settings(30)).await;
    let views: Vec<tally::View> = (0..200)
        .map(|i| tally::View {
            entity: format!("{}", i % 50),
            count: 1 + i % 3,
            at: None,
        })
        .collect();
    let counted = d.incr_many(&views).await.unwrap();
    assert_eq!(counted.len(), 200);
    let mut expected = [0i64; 50];
    for i in 0..200i64 {
        expected[(i % 50) as usize] += 1 + i % 3;
    }
    for (e, &want) in expected.iter().enumerate() {
        assert_eq!(d.total(&e.to_string()).await.unwrap(), want, "entity {e}");
    }
}

/// Regression: on Redis each view of a keyed batch was its own call checking
/// the entity's mark, so an entity's second view in the batch was taken
/// for a repeat and dropped.
async fn a_keyed_batch_counts_every_view_of_an_entity(kind: Kind) {
    let f = Fixture::near_now(kind).await;
    let d = f.daily(settings(30)).await;
    let now = f.clock.now().as_secs_f64();
    let view = |entity: &str, count: i64, days_ago: f64| tally::View {
        entity: entity.into(),
        count,
        at: Some(now - days_ago * 86_400.0),
    };
    let views = [
        view("7", 2, 0.0),
        view("8", 1, 0.0),
        view("7", 3, 1.0),
        view("7", 4, 0.0),
        view("7", 5, 40.0),
    ];
    let (applied, counted) = d.incr_many_once("k-1", &views).await.unwrap();
    assert_eq!(applied, tally::engine::Applied::Written);
    let answers: Vec<(i64, i64)> = counted.iter().map(|c| (c.day_count, c.total)).collect();
    assert_eq!(answers, [(2, 2), (1, 1), (3, 5), (6, 9), (0, 14)]);
    let (applied, _) = d.incr_many_once("k-1", &views).await.unwrap();
    assert_eq!(applied, tally::engine::Applied::Duplicate);
    assert_eq!(d.total("7").await.unwrap(), 14);
    assert_eq!(d.today_count("7").await.unwrap().count, 6);
    assert_eq!(d.day("7", today(&f).plus(-1)).await.unwrap(), 3);
}

async fn redis_keys_follow_the_seed(kind: Kind) {
    let f = Fixture::near_now(kind).await;
    if !kind.is_redis() {
        return; // the key layout only exists on Redis
    }
    let d = f.daily(settings(30)).await;
    let at = f.clock.now().as_secs_f64();
    d.incr_by("314", 2, Some(at)).await.unwrap();
    let day = today(&f).yyyymmdd().to_string();
    let mut raw = f.raw_any().await;
    // The seed's own commands read what Tally wrote.
    let views: Vec<Option<i64>> = raw
        .query(
            redis::cmd("HMGET")
                .arg("{advert:314}:views")
                .arg(&day)
                .arg("19700101"),
        )
        .await;
    assert_eq!(views, vec![Some(2), None]);
    assert_eq!(seed::total(&mut raw, "314").await, 2);
    // The seed's hash is the whole state: no second key, no expiry (the
    // all-time total lives in it).
    let fields: Vec<(String, i64)> = raw
        .query(redis::cmd("HGETALL").arg("{advert:314}:views"))
        .await;
    assert_eq!(fields, vec![(day, 2)]);
    let ttl: i64 = raw.query(redis::cmd("TTL").arg("{advert:314}:views")).await;
    assert_eq!(ttl, -1);
    let stats: i64 = raw
        .query(redis::cmd("EXISTS").arg("{advert:314}:stats"))
        .await;
    assert_eq!(stats, 0);
}

// ---------------------------------------------------------------------------
// The seed's own code and Tally on the same entities (Redis only: the seed's
// code is Redis commands). Regression suite for "daily statistics read the
// seed article's data both ways": `tally daily total` said 0 where the
// article's own total said 9.

per_backend!(
    seed_code_on_redis_standalone(Kind::RedisDefault),
    seed_code_on_redis_cluster(Kind::RedisCluster):
    seed_writes_first_then_tally_reads_and_writes,
    tally_writes_first_then_the_seed_reads_and_writes,
    alternating_writers_agree_after_every_write,
    a_retention_drop_keeps_the_seeds_total,
    concurrent_writers_of_both_kinds_agree,
    data_of_earlier_tally_versions_reads_right_and_migrates,
    values_that_are_not_counts_are_reported,
    sums_stay_exact_beyond_what_doubles_hold,
    sums_stay_exact_on_both_sides_of_2_to_the_53,
    a_big_batch_finds_the_one_earlier_total_in_it
);

/// Seed 004's `ViewStatsRepository`, command for command.
mod seed {
    use super::common::RawConn;
    use tally::daily::Day;

    /// The article's total script, verbatim.
    pub const TOTAL_SCRIPT: &str = "local totalView = 0
local dayViews = redis.call('hvals', KEYS[1])
for _, dayView in ipairs(dayViews) do
    totalView = totalView + tonumber(dayView)
end
return totalView";

    /// Its `VIEW_STATS_DAYS`.
    pub const STATS_DAYS: u32 = 30;

    pub fn key(entity: &str) -> String {
        format!("{{advert:{entity}}}:views")
    }

    /// `incrementViewsCount`: HINCRBY of the day.
    pub async fn incr(raw: &mut RawConn, entity: &str, day: Day, by: i64) -> i64 {
        raw.query(
            redis::cmd("HINCRBY")
                .arg(key(entity))
                .arg(day.yyyymmdd().to_string())
                .arg(by),
        )
        .await
    }

    /// `getViewStats`: one HMGET of the last `n` dates, oldest first,
    /// missing days as 0 (`intval`).
    pub async fn stats(raw: &mut RawConn, entity: &str, today: Day, n: u32) -> Vec<i64> {
        let mut cmd = redis::cmd("HMGET");
        cmd.arg(key(entity));
        for i in (0..n as i32).rev() {
            cmd.arg(today.plus(-i).yyyymmdd().to_string());
        }
        let values: Vec<Option<i64>> = raw.query(&cmd).await;
        values.into_iter().map(|v| v.unwrap_or(0)).collect()
    }

    /// `getViewsCountByDate` (and `getTodayViewsCount`): HGET of the day.
    pub async fn day(raw: &mut RawConn, entity: &str, day: Day) -> i64 {
        let v: Option<i64> = raw
            .query(
                redis::cmd("HGET")
                    .arg(key(entity))
                    .arg(day.yyyymmdd().to_string()),
            )
            .await;
        v.unwrap_or(0)
    }

    /// `getTotalViewsCount`: its EVAL.
    pub async fn total(raw: &mut RawConn, entity: &str) -> i64 {
        raw.query(redis::cmd("EVAL").arg(TOTAL_SCRIPT).arg(1).arg(key(entity)))
            .await
    }
}

/// Writes `fields` into hash `key` in one HSET, as code other than Tally's
/// did.
async fn hset(raw: &mut RawConn, key: &str, fields: &[(&str, &str)]) {
    let mut cmd = redis::cmd("HSET");
    cmd.arg(key);
    for (field, value) in fields {
        cmd.arg(field).arg(value);
    }
    let _: () = raw.query(&cmd).await;
}

/// What the seed-code suite starts from: a fixture near now, Tally's daily
/// statistics keeping `retention_days`, a raw connection for the seed's
/// code, and today.
struct Seeded {
    f: Fixture,
    d: tally::DailyStats,
    raw: RawConn,
    t: Day,
}

impl Seeded {
    async fn new(kind: Kind, retention_days: u32) -> Self {
        let f = Fixture::near_now(kind).await;
        let d = f.daily(settings(retention_days)).await;
        let raw = f.raw_any().await;
        let t = today(&f);
        Seeded { f, d, raw, t }
    }
}

/// Every view written to one entity, by either writer: the expected figures.
#[derive(Default)]
struct Written(std::collections::BTreeMap<Day, i64>);

impl Written {
    fn add(&mut self, day: Day, n: i64) {
        *self.0.entry(day).or_default() += n;
    }

    /// The seed's code writes `n` views of `entity` on `day`, counted here
    /// too; its answer (the day's count).
    async fn seed(&mut self, raw: &mut RawConn, entity: &str, day: Day, n: i64) -> i64 {
        self.add(day, n);
        seed::incr(raw, entity, day, n).await
    }

    fn total(&self) -> i64 {
        self.0.values().sum()
    }
}

/// Tally's reads (the last `n` days, each of them, today, the total) equal
/// the seed's own reads and the expected figures: every view written on
/// days from `floor` on, and all of them in the total.
async fn assert_both_read(
    d: &tally::DailyStats,
    raw: &mut RawConn,
    entity: &str,
    n: u32,
    written: &Written,
) {
    let today = d.today();
    let want: Vec<i64> = (0..n as i32)
        .rev()
        .map(|i| written.0.get(&today.plus(-i)).copied().unwrap_or(0))
        .collect();
    let tally: Vec<i64> = d
        .last(entity, n)
        .await
        .unwrap()
        .iter()
        .map(|x| x.count)
        .collect();
    assert_eq!(tally, want, "Tally's last {n} days");
    assert_eq!(
        seed::stats(raw, entity, today, n).await,
        want,
        "the seed's last {n} days"
    );
    for i in 0..n as i32 {
        let day = today.plus(-i);
        let want = written.0.get(&day).copied().unwrap_or(0);
        assert_eq!(d.day(entity, day).await.unwrap(), want, "Tally, {day}");
        assert_eq!(seed::day(raw, entity, day).await, want, "the seed, {day}");
    }
    let today_count = d.today_count(entity).await.unwrap();
    assert_eq!(today_count.day, today);
    assert_eq!(
        today_count.count,
        seed::day(raw, entity, today).await,
        "today"
    );
    assert_eq!(
        d.total(entity).await.unwrap(),
        written.total(),
        "Tally's total"
    );
    assert_eq!(
        seed::total(raw, entity).await,
        written.total(),
        "the seed's total"
    );
}

/// The issue's own case: 9 views written by the seed's code, then Tally.
async fn seed_writes_first_then_tally_reads_and_writes(kind: Kind) {
    let Seeded {
        f: _f,
        d,
        mut raw,
        t,
    } = Seeded::new(kind, 90).await;
    let mut written = Written::default();
    for (ago, n) in [(0, 4), (1, 3), (5, 2)] {
        written.seed(&mut raw, "314", t.plus(-ago), n).await;
    }
    assert_eq!(written.total(), 9);
    assert_both_read(&d, &mut raw, "314", seed::STATS_DAYS, &written).await;
    let counted = d.incr("314").await.unwrap();
    written.add(t, 1);
    assert_eq!((counted.day_count, counted.total), (5, 10));
    assert_both_read(&d, &mut raw, "314", seed::STATS_DAYS, &written).await;
    // And the seed's next write lands on Tally's day count.
    assert_eq!(written.seed(&mut raw, "314", t, 1).await, 6);
    assert_both_read(&d, &mut raw, "314", seed::STATS_DAYS, &written).await;
}

async fn tally_writes_first_then_the_seed_reads_and_writes(kind: Kind) {
    let Seeded { f, d, mut raw, t } = Seeded::new(kind, 90).await;
    let now = f.clock.now().as_secs_f64();
    let mut written = Written::default();
    for (ago, n) in [(0, 2), (2, 7), (29, 1)] {
        d.incr_by("ad", n, Some(now - ago as f64 * 86_400.0))
            .await
            .unwrap();
        written.add(t.plus(-ago), n);
    }
    assert_both_read(&d, &mut raw, "ad", seed::STATS_DAYS, &written).await;
    assert_eq!(written.seed(&mut raw, "ad", t.plus(-2), 3).await, 10);
    assert_both_read(&d, &mut raw, "ad", seed::STATS_DAYS, &written).await;
    let counted = d
        .incr_by("ad", 1, Some(now - 2.0 * 86_400.0))
        .await
        .unwrap();
    written.add(t.plus(-2), 1);
    assert_eq!((counted.day_count, counted.total), (11, written.total()));
    assert_both_read(&d, &mut raw, "ad", seed::STATS_DAYS, &written).await;
}

async fn alternating_writers_agree_after_every_write(kind: Kind) {
    let Seeded { f, d, mut raw, t } = Seeded::new(kind, 30).await;
    let now = f.clock.now().as_secs_f64();
    let mut written = Written::default();
    for i in 0..24i64 {
        let ago = (i * 7 % 30) as i32;
        let n = 1 + i % 4;
        if i % 2 == 0 {
            written.seed(&mut raw, "alt", t.plus(-ago), n).await;
        } else {
            let counted = d
                .incr_by("alt", n, Some(now - f64::from(ago) * 86_400.0))
                .await
                .unwrap();
            assert_eq!(counted.total, written.total() + n, "write {i}");
            written.add(t.plus(-ago), n);
        }
        assert_both_read(&d, &mut raw, "alt", seed::STATS_DAYS, &written).await;
    }
}

async fn a_retention_drop_keeps_the_seeds_total(kind: Kind) {
    let Seeded {
        f,
        d,
        mut raw,
        t: t0,
    } = Seeded::new(kind, 3).await;
    let mut written = Written::default();
    for (ago, n) in [(0, 10), (1, 11), (2, 12)] {
        written.seed(&mut raw, "e", t0.plus(-ago), n).await;
    }
    d.incr("e").await.unwrap();
    written.add(t0, 1);
    assert_both_read(&d, &mut raw, "e", 3, &written).await;
    // Two days later t0 is the oldest day kept: the two before it read as 0
    // in Tally; the seed still sees them until Tally's next write.
    f.clock.advance(2.0 * 86_400.0);
    assert_eq!(d.day("e", t0.plus(-1)).await.unwrap(), 0);
    assert_eq!(seed::day(&mut raw, "e", t0.plus(-1)).await, 11);
    assert_both_read(&d, &mut raw, "e", 3, &written).await;
    // Tally's next write folds them into `before`: gone from the seed's
    // HMGET, still in both totals.
    d.incr("e").await.unwrap();
    written.add(t0.plus(2), 1);
    assert_eq!(
        seed::stats(&mut raw, "e", t0.plus(2), 5).await,
        vec![0, 0, 11, 0, 1]
    );
    let before: i64 = raw
        .query(redis::cmd("HGET").arg(seed::key("e")).arg("before"))
        .await;
    assert_eq!(before, 11 + 12);
    assert_both_read(&d, &mut raw, "e", 3, &written).await;
    // The seed may still write a day that left the window: both totals
    // count it at once, and Tally's next write folds it in as well.
    written.seed(&mut raw, "e", t0.plus(-5), 4).await;
    assert_both_read(&d, &mut raw, "e", 3, &written).await;
    let counted = d.incr("e").await.unwrap();
    written.add(t0.plus(2), 1);
    assert_eq!(counted.total, written.total());
    assert_eq!(seed::day(&mut raw, "e", t0.plus(-5)).await, 0);
    assert_both_read(&d, &mut raw, "e", 3, &written).await;
    // Views Tally is given for a day before the window go to `before` too.
    let at = f.clock.now().as_secs_f64() - 10.0 * 86_400.0;
    let counted = d.incr_by("e", 5, Some(at)).await.unwrap();
    written.add(t0.plus(-8), 5);
    assert_eq!((counted.day_count, counted.total), (0, written.total()));
    assert_both_read(&d, &mut raw, "e", 3, &written).await;
}

/// Several tasks of each writer at once, while the clock crosses days (so
/// Tally folds old days while the seed's code writes them).
async fn concurrent_writers_of_both_kinds_agree(kind: Kind) {
    let Seeded { f, d, raw, t: t0 } = Seeded::new(kind, 3).await;
    let seeds: Vec<_> = (0..4i64)
        .map(|task| {
            let mut raw = raw.clone();
            tokio::spawn(async move {
                let mut mine = Written::default();
                for i in 0..60i64 {
                    let day = t0.plus(((task + i) % 6) as i32 - 2);
                    mine.seed(&mut raw, "hot", day, 1 + i % 3).await;
                }
                mine
            })
        })
        .collect();
    let tallies: Vec<_> = (0..4i64)
        .map(|task| {
            let (d, clock) = (d.clone(), f.clock.clone());
            tokio::spawn(async move {
                let mut mine = Written::default();
                for i in 0..60i64 {
                    let counted = d.incr_by("hot", 1 + i % 2, None).await.unwrap();
                    mine.add(counted.day, 1 + i % 2);
                    if task == 0 && i % 20 == 19 {
                        clock.advance(86_400.0); // three new days, mid-flight
                    }
                }
                mine
            })
        })
        .collect();
    let mut written = Written::default();
    for task in seeds.into_iter().chain(tallies) {
        for (day, n) in task.await.unwrap().0 {
            written.add(day, n);
        }
    }
    assert_eq!(written.total(), 4 * 120 + 4 * 90);
    let mut raw = raw;
    assert_both_read(&d, &mut raw, "hot", 3, &written).await;
    // One more write of each folds whatever is left behind; still exact.
    written.seed(&mut raw, "hot", t0, 1).await;
    let counted = d.incr("hot").await.unwrap();
    written.add(counted.day, 1);
    assert_eq!(counted.total, written.total());
    assert_both_read(&d, &mut raw, "hot", 3, &written).await;
}

/// Earlier Tally versions kept a running total in `{advert:<id>}:stats`
/// and dropped old days from the views hash (which had a TTL) without
/// keeping their sum. Such data reads right as it is, and the next write
/// migrates it: the missing part goes to `before`.
async fn data_of_earlier_tally_versions_reads_right_and_migrates(kind: Kind) {
    let Seeded {
        f: _f,
        d,
        mut raw,
        t,
    } = Seeded::new(kind, 30).await;
    let expire = t.plus(31).start_secs(0);
    let (today, yesterday) = (t.yyyymmdd().to_string(), t.plus(-1).yyyymmdd().to_string());
    // 20 views in all, 13 of them on days an earlier version dropped.
    hset(
        &mut raw,
        &seed::key("old"),
        &[(&today, "5"), (&yesterday, "2")],
    )
    .await;
    let _: () = raw
        .query(redis::cmd("EXPIREAT").arg(seed::key("old")).arg(expire))
        .await;
    hset(
        &mut raw,
        "{advert:old}:stats",
        &[("total", "20"), ("first", &yesterday)],
    )
    .await;
    // An entity whose day data expired: only the running total is left.
    hset(&mut raw, "{advert:idle}:stats", &[("total", "7")]).await;
    assert_eq!(d.total("old").await.unwrap(), 20);
    assert_eq!(d.total("idle").await.unwrap(), 7);
    assert_eq!(d.day("old", t.plus(-1)).await.unwrap(), 2);

    let mut written = Written::default();
    written.add(t, 5);
    written.add(t.plus(-1), 2);
    written.add(t.plus(-100), 13);
    let counted = d.incr("old").await.unwrap();
    written.add(t, 1);
    assert_eq!((counted.day_count, counted.total), (6, 21));
    assert_both_read(&d, &mut raw, "old", seed::STATS_DAYS, &written).await;
    let before: i64 = raw
        .query(redis::cmd("HGET").arg(seed::key("old")).arg("before"))
        .await;
    assert_eq!(before, 13);
    let ttl: i64 = raw.query(redis::cmd("TTL").arg(seed::key("old"))).await;
    assert_eq!(ttl, -1, "the views hash holds the total now: no expiry");
    let stats: i64 = raw
        .query(redis::cmd("EXISTS").arg("{advert:old}:stats"))
        .await;
    assert_eq!(stats, 0);

    assert_eq!(d.incr("idle").await.unwrap().total, 8);
    assert_eq!(seed::total(&mut raw, "idle").await, 8);
    assert_eq!(d.total("idle").await.unwrap(), 8);
}

/// A value in the views hash that is not a count (written by something
/// else) is a fault naming the field, and Tally writes nothing over it.
async fn values_that_are_not_counts_are_reported(kind: Kind) {
    let Seeded {
        f: _f,
        d,
        mut raw,
        t,
    } = Seeded::new(kind, 30).await;
    hset(&mut raw, &seed::key("odd"), &[("note", "hello")]).await;
    let err = d.total("odd").await.unwrap_err();
    assert!(matches!(err, Error::Corrupt(_)), "{err}");
    assert!(err.to_string().contains("note"), "{err}");
    let err = d.incr("odd").await.unwrap_err();
    assert!(matches!(err, Error::Corrupt(_)), "{err}");
    assert_eq!(seed::day(&mut raw, "odd", t).await, 0);
}

/// Totals are exact 64-bit sums although Lua numbers are doubles (the
/// seed's own script rounds above 2^53; Tally's does not).
async fn sums_stay_exact_beyond_what_doubles_hold(kind: Kind) {
    let Seeded {
        f: _f,
        d,
        mut raw,
        t,
    } = Seeded::new(kind, 30).await;
    let big = (1i64 << 53) + 1;
    seed::incr(&mut raw, "big", t.plus(-40), big).await;
    seed::incr(&mut raw, "big", t, 1).await;
    assert_eq!(d.total("big").await.unwrap(), big + 1);
    // The fold of the old day carries all 54 bits into `before`, and a
    // negative value the seed's code may write folds as well.
    seed::incr(&mut raw, "big", t.plus(-41), -5).await;
    assert_eq!(d.incr("big").await.unwrap().total, big + 2 - 5);
    let before: i64 = raw
        .query(redis::cmd("HGET").arg(seed::key("big")).arg("before"))
        .await;
    assert_eq!(before, big - 5);
    assert_eq!(d.total("big").await.unwrap(), big + 2 - 5);

    // At the 64-bit limit: a Tally write that would pass it writes nothing.
    seed::incr(&mut raw, "max", t.plus(-1), i64::MAX - 10).await;
    seed::incr(&mut raw, "max", t, 10).await;
    assert_eq!(d.total("max").await.unwrap(), i64::MAX);
    let err = d.incr("max").await.unwrap_err();
    assert!(
        err.is_bad_input() && err.to_string().contains("overflow"),
        "{err}"
    );
    assert_eq!(seed::day(&mut raw, "max", t).await, 10);
    // The seed's code can pass it (its own total is a rounded double then):
    // Tally says so rather than answer a wrong total.
    seed::incr(&mut raw, "max", t, 1).await;
    let err = d.total("max").await.unwrap_err();
    assert!(matches!(err, Error::Corrupt(_)), "{err}");
    assert!(err.to_string().contains("beyond 64 bits"), "{err}");
}

/// The write sums in plain Lua numbers while every value and sum is below
/// 2^53 (doubles hold every integer below it) and in exact limbs past it:
/// values, days, `before` and totals just below, at and past 2^53, on both
/// sides of zero, in one batch with small entities, then keyed and repeated.
async fn sums_stay_exact_on_both_sides_of_2_to_the_53(kind: Kind) {
    let Seeded {
        f: _f,
        d,
        mut raw,
        t,
    } = Seeded::new(kind, 30).await;
    let m = 1i64 << 53;
    // A day of 2^53 - 1 that Tally's view takes to 2^53.
    seed::incr(&mut raw, "edge", t, m - 1).await;
    // Two days each below 2^53 whose sum is not.
    seed::incr(&mut raw, "pair", t.plus(-1), m / 2 + 1).await;
    seed::incr(&mut raw, "pair", t.plus(-2), m / 2 + 1).await;
    // A sum that passes 2^53 on the way and ends below it.
    seed::incr(&mut raw, "swing", t.plus(-1), m - 1).await;
    seed::incr(&mut raw, "swing", t.plus(-2), m - 1).await;
    seed::incr(&mut raw, "swing", t.plus(-3), -(m - 1)).await;
    // Down to -2^53.
    seed::incr(&mut raw, "low", t.plus(-1), -(m - 1)).await;
    seed::incr(&mut raw, "low", t.plus(-2), -1).await;
    // Old days folded into `before`: to 2^53 - 1, and to 2^53.
    seed::incr(&mut raw, "fold", t.plus(-40), m - 3).await;
    hset(&mut raw, &seed::key("fold"), &[("before", "2")]).await;
    seed::incr(&mut raw, "fold2", t.plus(-40), m - 1).await;
    hset(&mut raw, &seed::key("fold2"), &[("before", "1")]).await;
    // Just below 2^53 after the view, on either side of zero.
    seed::incr(&mut raw, "near", t, m - 2).await;
    seed::incr(&mut raw, "negnear", t.plus(-1), -(m - 2)).await;
    let big = [
        ("edge", m, m),
        ("pair", 1, m + 3),
        ("swing", 1, m),
        ("low", 1, 1 - m),
        ("fold", 1, m),
        ("fold2", 1, m + 1),
        ("near", m - 1, m - 1),
        ("negnear", 1, 3 - m),
    ];
    let small = ["s0", "s1", "s2"];
    // Small entities first, between and after the big ones.
    let mut expected: Vec<(&str, i64, i64)> = vec![(small[0], 1, 1)];
    expected.extend(&big[..4]);
    expected.push((small[1], 1, 1));
    expected.extend(&big[4..]);
    expected.push((small[2], 1, 1));
    let views: Vec<tally::View> = expected
        .iter()
        .map(|(entity, _, _)| tally::View {
            entity: (*entity).into(),
            count: 1,
            at: None,
        })
        .collect();
    let answers = |counted: &[tally::daily::Counted]| -> Vec<(i64, i64)> {
        counted.iter().map(|c| (c.day_count, c.total)).collect()
    };
    let want: Vec<(i64, i64)> = expected
        .iter()
        .map(|&(_, day, total)| (day, total))
        .collect();
    assert_eq!(answers(&d.incr_many(&views).await.unwrap()), want);
    for &(entity, day, total) in &expected {
        assert_eq!(seed::day(&mut raw, entity, t).await, day, "{entity}");
        assert_eq!(d.total(entity).await.unwrap(), total, "{entity}");
    }
    for (entity, before) in [("fold", m - 1), ("fold2", m)] {
        let held: i64 = raw
            .query(redis::cmd("HGET").arg(seed::key(entity)).arg("before"))
            .await;
        assert_eq!(held, before, "{entity}");
        assert_eq!(seed::day(&mut raw, entity, t.plus(-40)).await, 0);
    }

    // Keyed: written once, and its repeat answers the counts as they are.
    let want: Vec<(i64, i64)> = want
        .iter()
        .map(|&(day, total)| (day + 1, total + 1))
        .collect();
    for applied in [Applied::Written, Applied::Duplicate] {
        let (got, counted) = d.incr_many_once("k-53", &views).await.unwrap();
        assert_eq!(got, applied);
        assert_eq!(answers(&counted), want, "{applied:?}");
    }
    for (&(entity, _, _), &(day, total)) in expected.iter().zip(&want) {
        assert_eq!(seed::day(&mut raw, entity, t).await, day, "{entity}");
        assert_eq!(d.total(entity).await.unwrap(), total, "{entity}");
    }
}

/// A write looks up an earlier Tally's totals only when one of its
/// entities has one (one EXISTS of every `:stats` key of a call, 1,000 at
/// a time): in a batch of 1,100 entities, the one entity with an earlier
/// total, past the first 1,000, is still migrated, and the others are not
/// touched by it.
async fn a_big_batch_finds_the_one_earlier_total_in_it(kind: Kind) {
    let Seeded {
        f: _f,
        d,
        mut raw,
        t,
    } = Seeded::new(kind, 30).await;
    hset(&mut raw, "{advert:e1050}:stats", &[("total", "7")]).await;
    let views: Vec<tally::View> = (0..1100)
        .map(|i| tally::View {
            entity: format!("e{i}"),
            count: 1,
            at: None,
        })
        .collect();
    let counted = d.incr_many(&views).await.unwrap();
    for (i, c) in counted.iter().enumerate() {
        let total = if i == 1050 { 8 } else { 1 };
        assert_eq!((c.day_count, c.total), (1, total), "e{i}");
    }
    let stats: i64 = raw
        .query(redis::cmd("EXISTS").arg("{advert:e1050}:stats"))
        .await;
    assert_eq!(stats, 0);
    assert_eq!(seed::total(&mut raw, "e1050").await, 8);
    assert_eq!(d.total("e1050").await.unwrap(), 8);
    assert_eq!(seed::day(&mut raw, "e1050", t).await, 1);
    assert_eq!(seed::total(&mut raw, "e1049").await, 1);
}

/// A daily writer of `d` that flushes only when asked (or at shutdown).
fn daily_writer(d: &tally::DailyStats, chunk: usize) -> tally::daily::DailyWriter {
    tally::daily::DailyWriter::start(
        d.clone(),
        tally::WriterSettings {
            flush_interval: std::time::Duration::from_secs(3600),
            chunk_counters: chunk,
            lanes: 2,
            ..tally::WriterSettings::default()
        },
    )
    .unwrap()
}

async fn the_writer_merges_views_and_they_read_back_exactly(kind: Kind) {
    let f = Fixture::near_now(kind).await;
    let d = f.daily(settings(30)).await;
    // Chunks of 3 writes: a flush takes several chunks on both lanes.
    let w = daily_writer(&d, 3);
    let now = f.clock.now().as_secs_f64();
    let t = today(&f);
    let mut expected: std::collections::BTreeMap<(String, i64), i64> = Default::default();
    let mut adds = 0;
    for round in 0..4 {
        for e in 0..10 {
            for ago in [0, 1, 3] {
                let entity = format!("ad-{e}");
                let count = 1 + (e + ago + round) % 3;
                w.add(&entity, count, Some(now - ago as f64 * 86_400.0))
                    .await
                    .unwrap();
                *expected.entry((entity, ago)).or_default() += count;
                adds += 1;
            }
        }
        if round == 1 {
            w.flush().await.unwrap();
        }
    }
    // A view dated before the window counts toward the total only.
    w.add_many(&[tally::View {
        entity: "ad-0".into(),
        count: 5,
        at: Some(now - 40.0 * 86_400.0),
    }])
    .await
    .unwrap();
    adds += 1;
    w.flush().await.unwrap();
    for e in 0..10 {
        let entity = format!("ad-{e}");
        let days = d.days(&entity, &[t.plus(-3), t.plus(-1), t]).await.unwrap();
        let counts: Vec<i64> = days.iter().map(|c| c.count).collect();
        let want: Vec<i64> = [3i64, 1, 0]
            .iter()
            .map(|&ago| expected[&(entity.clone(), ago)])
            .collect();
        assert_eq!(counts, want, "{entity}");
        let old = if e == 0 { 5 } else { 0 };
        assert_eq!(
            d.total(&entity).await.unwrap(),
            want.iter().sum::<i64>() + old,
            "{entity}"
        );
    }
    let stats = w.stats();
    assert_eq!((stats.accepted, stats.written), (adds, adds), "{stats:?}");
    assert_eq!((stats.rejected, stats.pending_entries), (0, 0), "{stats:?}");
    assert_eq!(stats.flushes, 2, "{stats:?}");
    // Merged: one write per (entity, day) per flush, in chunks of 3.
    assert_eq!(stats.chunks, 10 + 11, "{stats:?}");
    w.shutdown().await;
}

fn write(entity: &str, day: Day, count: i64, floor: Day) -> tally::daily::DailyWrite {
    tally::daily::DailyWrite {
        entity: tally::daily::entity_id(entity).unwrap(),
        day,
        count,
        floor,
    }
}

/// The store's path of the writer, called twice with the same lane and
/// sequence number as a retry after a lost reply is: each write applies
/// once, and an entity that would overflow is refused alone, both times;
/// the lane's next number writes again.
async fn a_retried_chunk_applies_each_write_once_and_refuses_only_the_overflow(kind: Kind) {
    let f = Fixture::near_now(kind).await;
    let d = f.daily(settings(30)).await;
    let store = f
        .backend
        .daily_store("advert", f.kind.daily_total())
        .await
        .unwrap();
    let t = today(&f);
    let floor = t.plus(-29);
    let now = f.clock.now();
    d.incr_by("big", i64::MAX - 5, None).await.unwrap();
    let chunk = vec![
        write("a", t, 2, floor),
        write("a", t.plus(-1), 3, floor),
        write("big", t, 10, floor),
        write("b", t, 4, floor),
        write("a", t, 1, floor),
    ];
    let seq = |n| WriteSeq {
        writer: rand::random(),
        lane: 1,
        seq: n,
    };
    let first = seq(7);
    for attempt in 0..2 {
        let answers = store.incr_lane(&chunk, first, now).await.unwrap();
        assert_eq!(answers.len(), chunk.len());
        let want = if attempt == 0 {
            Applied::Written
        } else {
            Applied::Duplicate
        };
        for (i, answer) in answers.iter().enumerate() {
            if i == 2 && attempt == 0 {
                let err = answer.as_ref().unwrap_err();
                assert!(
                    err.is_bad_input() && err.to_string().contains("overflow"),
                    "{err}"
                );
            } else {
                assert_eq!(answer.as_ref().unwrap().applied, want, "write {i}");
            }
        }
        let totals: Vec<i64> = answers
            .iter()
            .filter_map(|a| a.as_ref().ok())
            .map(|a| a.total)
            .collect();
        if attempt == 0 {
            // As if applied one by one.
            assert_eq!(totals, [2, 5, 4, 6]);
        } else {
            // A repeat answers the stored counts, the refused entity's too
            // (the lane's record says the call was applied: nothing is
            // weighed again).
            assert_eq!(totals, [6, 6, i64::MAX - 5, 4, 6]);
        }
        assert_eq!(d.total("a").await.unwrap(), 6);
        assert_eq!(d.today_count("a").await.unwrap().count, 3);
        assert_eq!(d.day("a", t.plus(-1)).await.unwrap(), 3);
        assert_eq!(d.total("b").await.unwrap(), 4);
        assert_eq!(d.total("big").await.unwrap(), i64::MAX - 5);
    }
    // An earlier number of the lane is a repeat too; the next one writes.
    let earlier = WriteSeq { seq: 6, ..first };
    let answers = store.incr_lane(&chunk[3..4], earlier, now).await.unwrap();
    assert_eq!(answers[0].as_ref().unwrap().applied, Applied::Duplicate);
    let next = WriteSeq { seq: 8, ..first };
    let answers = store.incr_lane(&chunk[3..4], next, now).await.unwrap();
    let answer = answers[0].as_ref().unwrap();
    assert_eq!(
        (answer.applied, answer.total, answer.day_count),
        (Applied::Written, 8, 8)
    );
    // Another lane of the same writer keeps its own record.
    let other = WriteSeq { lane: 2, ..first };
    let answers = store.incr_lane(&chunk[3..4], other, now).await.unwrap();
    assert_eq!(answers[0].as_ref().unwrap().total, 12);
}

async fn the_writer_drops_an_overflowing_entity_alone(kind: Kind) {
    let f = Fixture::near_now(kind).await;
    let d = f.daily(settings(30)).await;
    d.incr_by("big", i64::MAX - 5, None).await.unwrap();
    let w = daily_writer(&d, 500);
    for entity in ["a", "big", "b", "big", "c"] {
        w.add(entity, 4, None).await.unwrap();
    }
    w.flush().await.unwrap();
    let stats = w.stats();
    assert_eq!(
        (stats.accepted, stats.written, stats.rejected),
        (5, 3, 2),
        "{stats:?}"
    );
    for entity in ["a", "b", "c"] {
        assert_eq!(d.total(entity).await.unwrap(), 4, "{entity}");
    }
    assert_eq!(d.total("big").await.unwrap(), i64::MAX - 5);
    w.shutdown().await;
}

/// Adds race the shutdown: each is either refused or written, never lost
/// (the sum of what was accepted is what is stored).
async fn adds_racing_the_writers_shutdown_are_written_or_refused(kind: Kind) {
    let f = Fixture::near_now(kind).await;
    let d = f.daily(settings(30)).await;
    let w = tally::daily::DailyWriter::start(
        d.clone(),
        tally::WriterSettings {
            flush_interval: std::time::Duration::from_millis(5),
            ..tally::WriterSettings::default()
        },
    )
    .unwrap();
    let tasks: Vec<_> = (0..4)
        .map(|task| {
            let w = w.clone();
            tokio::spawn(async move {
                let mut accepted = 0i64;
                for i in 0u64.. {
                    let entity = format!("e{}", (task * 7 + i) % 20);
                    match w.add(&entity, 1 + (i % 3) as i64, None).await {
                        Ok(()) => accepted += 1 + (i % 3) as i64,
                        Err(Error::Overloaded(_)) => break,
                        Err(e) => panic!("{e}"),
                    }
                    if i % 64 == 0 {
                        tokio::task::yield_now().await;
                    }
                }
                accepted
            })
        })
        .collect();
    // Shut down once the adds are under way (not after a fixed time, which a
    // loaded machine can spend before the tasks first run).
    let deadline = std::time::Instant::now() + tally_testkit::PATIENCE;
    while w.stats().accepted == 0 {
        assert!(std::time::Instant::now() < deadline, "no add accepted");
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    w.shutdown().await;
    let mut accepted = 0;
    for t in tasks {
        accepted += t.await.unwrap();
    }
    let mut stored = 0;
    for e in 0..20 {
        stored += d.total(&format!("e{e}")).await.unwrap();
    }
    assert!(accepted > 0);
    assert_eq!(stored, accepted);
    let stats = w.stats();
    assert_eq!(stats.accepted, stats.written, "{stats:?}");
    assert_eq!(stats.pending_entries, 0, "{stats:?}");
    assert!(w.try_add("e1", 1, None).is_err());
}

async fn the_writer_checks_views_as_incr_many_does(kind: Kind) {
    let f = Fixture::near_now(kind).await;
    let d = f.daily(settings(30)).await;
    let w = daily_writer(&d, 500);
    for (entity, count, at, message) in BAD_VIEWS {
        for err in [
            w.add(entity, count, at).await.unwrap_err(),
            w.try_add(entity, count, at).unwrap_err(),
        ] {
            assert_bad_view(&err, entity, message);
        }
    }
    // A batch with one bad view merges nothing at all, nor one that would
    // overflow what waits.
    let view = |entity: &str, count: i64| tally::View {
        entity: entity.into(),
        count,
        at: None,
    };
    let err = w
        .add_many(&[view("ok", 1), view("ok", 0)])
        .await
        .unwrap_err();
    assert!(err.to_string().contains("from 1 up"), "{err}");
    w.add("max", i64::MAX, None).await.unwrap();
    let err = w
        .add_many(&[view("ok", 1), view("max", 1)])
        .await
        .unwrap_err();
    assert!(
        err.is_bad_input() && err.to_string().contains("overflow"),
        "{err}"
    );
    let stats = w.stats();
    assert_eq!((stats.accepted, stats.pending_entries), (1, 1), "{stats:?}");
    w.flush().await.unwrap();
    assert_eq!(d.total("ok").await.unwrap(), 0);
    assert_eq!(d.total("max").await.unwrap(), i64::MAX);
    w.shutdown().await;
}

// ---------------------------------------------------------------------------
// The running daily total (`DailyTotal::Running`): the behaviour suite again
// (all but the seed's key test, whose promise this total gives up), and what
// it adds: its second key, switching either way, refusals that leave
// nothing, exact sums past 2^53.

daily_suite!(daily_running:
    the_running_total_sits_beside_the_articles_hash,
    the_oldest_day_held_spares_a_scan_until_it_leaves_the_window,
    switching_the_total_either_way_keeps_every_count,
    a_refused_running_write_leaves_nothing,
    running_sums_stay_exact_beyond_what_doubles_hold,
);

/// `HGET {advert:<entity>}:stats <field>`, if any (`total`, `first`).
async fn stats_field(raw: &mut RawConn, entity: &str, field: &str) -> Option<String> {
    raw.query(
        redis::cmd("HGET")
            .arg(format!("{{advert:{entity}}}:stats"))
            .arg(field),
    )
    .await
}

/// The views hash, sorted by field.
async fn views_hash(raw: &mut RawConn, entity: &str) -> Vec<(String, String)> {
    let mut fields: Vec<(String, String)> = raw
        .query(redis::cmd("HGETALL").arg(seed::key(entity)))
        .await;
    fields.sort();
    fields
}

async fn the_running_total_sits_beside_the_articles_hash(kind: Kind) {
    let mut s = Seeded::new(kind, 30).await;
    let (d, raw, t) = (&s.d, &mut s.raw, s.t);
    let counted = d.incr_by("314", 2, None).await.unwrap();
    assert_eq!((counted.day_count, counted.total), (2, 2));
    d.incr("314").await.unwrap();
    // The article's hash keeps the days, the stats key the total.
    let day = t.yyyymmdd().to_string();
    assert_eq!(views_hash(raw, "314").await, vec![(day, "3".into())]);
    assert_eq!(stats_field(raw, "314", "total").await.as_deref(), Some("3"));
    assert_eq!(seed::day(raw, "314", t).await, 3);
    assert_eq!(d.total("314").await.unwrap(), 3);
}

/// Either total reads the other's data right, and its next write of an
/// entity converts it: hash, running, hash, running again over retention
/// drops on both sides.
async fn switching_the_total_either_way_keeps_every_count(kind: Kind) {
    let mut s = Seeded::new(kind, 3).await;
    let (f, running, raw, t) = (&s.f, &s.d, &mut s.raw, s.t);
    let hash = f.daily_with(settings(3), tally::DailyTotal::Hash).await;
    let now = f.clock.now().as_secs_f64();
    let ago = |days: f64| Some(now - days * 86_400.0);
    hash.incr_by("e", 5, ago(2.0)).await.unwrap();
    hash.incr_by("e", 7, ago(1.0)).await.unwrap();
    hash.incr_by("e", 11, None).await.unwrap();
    seed::incr(raw, "e", t, 3).await;
    f.clock.advance(2.0 * 86_400.0);
    // The hash total folds the two days that left the window into `before`.
    assert_eq!(hash.incr("e").await.unwrap().total, 27);
    // The running total starts at the hash's sum.
    let counted = running.incr_by("e", 2, None).await.unwrap();
    assert_eq!((counted.day_count, counted.total), (3, 29));
    assert_eq!(stats_field(raw, "e", "total").await.as_deref(), Some("29"));
    assert_eq!(running.day("e", t).await.unwrap(), 14);
    assert_eq!(hash.total("e").await.unwrap(), 29);
    // A new day drops the day that left the window: its views stay in the
    // running total, which both read.
    f.clock.advance(86_400.0);
    let counted = running.incr_by("e", 4, None).await.unwrap();
    assert_eq!((counted.day_count, counted.total), (4, 33));
    let fields = views_hash(raw, "e").await;
    assert!(
        !fields.iter().any(|(k, _)| *k == t.yyyymmdd().to_string()),
        "{fields:?}"
    );
    assert_eq!(running.total("e").await.unwrap(), 33);
    assert_eq!(hash.total("e").await.unwrap(), 33);
    assert_eq!(hash.day("e", t.plus(2)).await.unwrap(), 3);
    // The hash total's write folds the running total back into the hash.
    assert_eq!(hash.incr("e").await.unwrap().total, 34);
    assert_eq!(stats_field(raw, "e", "total").await, None);
    assert_eq!(seed::total(raw, "e").await, 34);
    assert_eq!(running.incr("e").await.unwrap().total, 35);
    assert_eq!(stats_field(raw, "e", "total").await.as_deref(), Some("35"));
    assert_eq!(running.today_count("e").await.unwrap().count, 6);
    // The running total's first write of an entity, on a new day, drops
    // the days before the window from the hash it read to start the total.
    hash.incr_by("f", 5, None).await.unwrap();
    f.clock.advance(3.0 * 86_400.0);
    let counted = running.incr("f").await.unwrap();
    assert_eq!((counted.day_count, counted.total), (1, 6));
    assert_eq!(
        views_hash(raw, "f").await,
        vec![(t.plus(6).yyyymmdd().to_string(), "1".into())]
    );
    assert_eq!(stats_field(raw, "f", "total").await.as_deref(), Some("6"));
}

/// An overflow or a stored value that is not a count refuses the entity's
/// write and leaves every key of it as it was, whichever step failed.
async fn a_refused_running_write_leaves_nothing(kind: Kind) {
    let Seeded { f, d, mut raw, t } = Seeded::new(kind, 30).await;
    let raw = &mut raw;
    let (today, yesterday) = (t.yyyymmdd().to_string(), t.plus(-1).yyyymmdd().to_string());
    let max = i64::MAX.to_string();
    // The total overflows when it starts from a full hash: no stats key.
    hset(raw, &seed::key("full"), &[(&yesterday, &max)]).await;
    let err = d.incr("full").await.unwrap_err();
    assert!(err.to_string().contains("overflow"), "{err}");
    assert_eq!(stats_field(raw, "full", "total").await, None);
    assert_eq!(
        views_hash(raw, "full").await,
        vec![(yesterday.clone(), max.clone())]
    );
    // A value that is not a count, met while starting the total.
    hset(raw, &seed::key("odd"), &[(&yesterday, "hello")]).await;
    let err = d.incr("odd").await.unwrap_err();
    assert!(matches!(err, Error::Corrupt(_)), "{err}");
    assert_eq!(stats_field(raw, "odd", "total").await, None);
    assert_eq!(views_hash(raw, "odd").await.len(), 1);
    // A day that overflows after another day of the same write was added:
    // both days and the total go back.
    d.incr("two").await.unwrap();
    hset(raw, &seed::key("two"), &[(&yesterday, &max)]).await;
    let now = f.clock.now().as_secs_f64();
    let views = [
        tally::View {
            entity: "two".into(),
            count: 1,
            at: None,
        },
        tally::View {
            entity: "two".into(),
            count: 1,
            at: Some(now - 86_400.0),
        },
    ];
    let err = d.incr_many(&views).await.unwrap_err();
    assert!(err.to_string().contains("overflow"), "{err}");
    assert_eq!(stats_field(raw, "two", "total").await.as_deref(), Some("1"));
    assert_eq!(
        views_hash(raw, "two").await,
        vec![
            (yesterday.clone(), max.clone()),
            (today.clone(), "1".into())
        ]
    );
    // A day that is not a count, with the total already there.
    hset(raw, &seed::key("two"), &[(&today, "x")]).await;
    let err = d.incr("two").await.unwrap_err();
    assert!(matches!(err, Error::Corrupt(_)), "{err}");
    assert!(err.to_string().contains(&today), "{err}");
    assert_eq!(stats_field(raw, "two", "total").await.as_deref(), Some("1"));
    // A stats key that is not a hash is not a count either.
    let _: () = raw
        .query(redis::cmd("SET").arg("{advert:str}:stats").arg("x"))
        .await;
    let err = d.incr("str").await.unwrap_err();
    assert!(matches!(err, Error::Corrupt(_)), "{err}");
    assert!(views_hash(raw, "str").await.is_empty());
}

/// Counts and totals past 2^53 answer and read exactly.
async fn running_sums_stay_exact_beyond_what_doubles_hold(kind: Kind) {
    let mut s = Seeded::new(kind, 30).await;
    let (d, raw) = (&s.d, &mut s.raw);
    let big = (1i64 << 53) + 1;
    let counted = d.incr_by("big", big, None).await.unwrap();
    assert_eq!((counted.day_count, counted.total), (big, big));
    let counted = d.incr_by("big", 2, None).await.unwrap();
    assert_eq!((counted.day_count, counted.total), (big + 2, big + 2));
    assert_eq!(
        stats_field(raw, "big", "total").await,
        Some((big + 2).to_string())
    );
    assert_eq!(d.total("big").await.unwrap(), big + 2);
    assert_eq!(d.today_count("big").await.unwrap().count, big + 2);
}

/// The stats key's `first` is the oldest day the views hash may hold: a
/// new day field looks the hash over only once `first` left the window,
/// and a new day older than `first` lowers it.
async fn the_oldest_day_held_spares_a_scan_until_it_leaves_the_window(kind: Kind) {
    let Seeded { f, d, mut raw, t } = Seeded::new(kind, 3).await;
    let raw = &mut raw;
    let day = |n: i32| t.plus(n).yyyymmdd().to_string();
    let days_held = |fields: Vec<(String, String)>| -> Vec<String> {
        fields.into_iter().map(|(k, _)| k).collect()
    };
    let at = |f: &Fixture, days_ago: f64| Some(f.clock.now().as_secs_f64() - days_ago * 86_400.0);
    // A new entity: nothing to look over, no `first` yet.
    d.incr("e").await.unwrap();
    assert_eq!(stats_field(raw, "e", "first").await, None);
    // Its next new day looks the hash over and notes the oldest day.
    d.incr_by("e", 1, at(&f, 1.0)).await.unwrap();
    assert_eq!(stats_field(raw, "e", "first").await, Some(day(-1)));
    // A new day older than `first` lowers it.
    d.incr_by("e", 1, at(&f, 2.0)).await.unwrap();
    assert_eq!(stats_field(raw, "e", "first").await, Some(day(-2)));
    assert_eq!(
        days_held(views_hash(raw, "e").await),
        [day(-2), day(-1), day(0)]
    );
    // Two days on, `first` left the window: the next new day drops the
    // days before it and notes the oldest kept.
    f.clock.advance(2.0 * 86_400.0);
    let counted = d.incr("e").await.unwrap();
    assert_eq!((counted.day_count, counted.total), (1, 4));
    assert_eq!(days_held(views_hash(raw, "e").await), [day(0), day(2)]);
    assert_eq!(stats_field(raw, "e", "first").await, Some(day(0)));
    // A new day while `first` is in the window drops nothing.
    let counted = d.incr_by("e", 1, at(&f, 1.0)).await.unwrap();
    assert_eq!((counted.day_count, counted.total), (1, 5));
    assert_eq!(
        days_held(views_hash(raw, "e").await),
        [day(0), day(1), day(2)]
    );
    assert_eq!(stats_field(raw, "e", "first").await, Some(day(0)));
    assert_eq!(d.total("e").await.unwrap(), 5);
}
