//! The daily-statistics behaviour suite: every test runs on SQLite (memory
//! and file), a real redis-server and a real Redis Cluster.

mod common;

use common::{Fixture, Kind};
use tally::daily::{DailySettings, Day, DayCount};
use tally::{Clock, Error};

feature_suite!(
    counts_views_per_day_and_keeps_a_running_total,
    last_days_come_in_order_with_missing_days_as_zero,
    retention_drops_old_days_without_a_cleaner,
    views_dated_before_the_window_only_count_toward_the_total,
    utc_offset_moves_the_day_boundary,
    bad_input_changes_nothing,
    overflow_changes_nothing,
    concurrent_views_are_exact,
    batches_span_many_entities,
    redis_keys_follow_the_seed,
);

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
    let store = f.backend.daily_store("advert").await.unwrap();
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

async fn bad_input_changes_nothing(kind: Kind) {
    let f = Fixture::near_now(kind).await;
    let d = f.daily(settings(30)).await;
    for (entity, count, at, message) in [
        ("{advert:1}", 1, None, "must not contain `{`"),
        ("", 1, None, "must not be empty"),
        ("a\nb", 1, None, "control characters"),
        ("ok", 0, None, "from 1 up"),
        ("ok", -3, None, "from 1 up"),
        ("ok", 1, Some(f64::NAN), "not a finite"),
        ("ok", 1, Some(-1.0), "before the Unix epoch"),
    ] {
        let err = d.incr_by(entity, count, at).await.unwrap_err();
        assert!(err.is_bad_input(), "{entity:?}: {err}");
        assert!(err.to_string().contains(message), "{entity:?}: {err}");
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
    let store = f.backend.daily_store("advert").await.unwrap();
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
    let total: i64 = raw
        .query(redis::cmd("HGET").arg("{advert:314}:stats").arg("total"))
        .await;
    assert_eq!(total, 2);
    // The day data expires by itself; the all-time total does not.
    let ttl: i64 = raw.query(redis::cmd("TTL").arg("{advert:314}:views")).await;
    assert!(ttl > 29 * 86_400 && ttl <= 31 * 86_400, "{ttl}");
    let ttl: i64 = raw.query(redis::cmd("TTL").arg("{advert:314}:stats")).await;
    assert_eq!(ttl, -1);
}
