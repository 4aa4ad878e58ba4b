//! The counters behaviour suite: every test runs on SQLite (memory and file),
//! on a real redis-server in both cleaned key layouts and on a Redis
//! Cluster; the tests whose times suit it also in the expiring layout.

use crate::common;

use std::time::Duration;

use common::{Fixture, Kind, T0, apply_numbered, table_of_3};
use tally::counters::{Applied, CounterWriter, WhenFull, WriteSeq, WriterSettings};
use tally::{CleanerSettings, CounterSettings, Error, Increment, Sample};

fn s(start: u64, count: i64) -> Sample {
    Sample { start, count }
}

fn small(precisions: &[u64], samples: u64) -> CounterSettings {
    CounterSettings {
        precisions: precisions.to_vec(),
        samples,
    }
}

per_backend!(layouts:
    slice_boundaries,
    every_precision_in_one_write,
    read_all_precisions_and_many_counters,
    samples_come_oldest_first,
    negative_and_zero_counts,
    batch_merges_and_spans_counters,
    batch_is_all_or_nothing,
    an_overflow_takes_back_the_counters_it_made,
    overflow_writes_nothing,
    bad_input_writes_nothing,
    unknown_precision_lists_configured,
    pagination_walks_names_in_order,
    delete_removes_every_precision,
    cleaner_cutoff_keeps_exactly_samples,
    cleaner_first_pass_removing_many_slices_keeps_the_rest,
    cleaner_visits_coarse_precisions_on_cadence,
    cleaner_full_pass_catches_late_writes,
    cleaner_removes_emptied_counters,
    cleaner_racing_writers_loses_nothing,
    two_cleaners_at_once,
    concurrent_writers_are_exact,
    cleaner_runs_as_background_task,
    sequenced_writes_apply_once,
    aggregated_writes_are_exact,
    aggregator_applies_backpressure,
    aggregator_flushes_on_shutdown_and_drop,
    aggregator_drops_only_a_refused_counter,
    aggregator_rejects_bad_input,
);

// The tests above that hold in the expiring layout as they are: the others
// write at fixed times (0, 10, 1000 s...) far before the fixture clock's
// now, which the cleaned layouts keep until a cleaner pass and the expiring
// layout never keeps (a chunk whose slices all left the window is not
// written, and reads return only the window). tests/expiring.rs runs the
// same behaviours (merging, all or nothing, overflow, exactly once, the
// aggregating writer, cleaning, listing, deleting) near the clock's now.
per_backend!(expiring:
    slice_boundaries,
    every_precision_in_one_write,
    bad_input_writes_nothing,
    unknown_precision_lists_configured,
    pagination_walks_names_in_order,
    delete_removes_every_precision,
    cleaner_runs_as_background_task,
);

async fn slice_boundaries(kind: Kind) {
    let f = Fixture::with_settings(kind, small(&[1, 5, 60], 120)).await;
    let c = &f.counters;
    c.incr_at("hits", 3, 1336376415.5).await.unwrap();
    c.incr_at("hits", 1, 1336376419.999).await.unwrap(); // same 5 s slice
    c.incr_at("hits", 2, 1336376420.0).await.unwrap(); // next 5 s slice, same minute
    c.incr_at("hits", 7, 1336376400.0).await.unwrap(); // first second of the minute
    assert_eq!(
        c.get("hits", 1).await.unwrap(),
        vec![
            s(1336376400, 7),
            s(1336376415, 3),
            s(1336376419, 1),
            s(1336376420, 2)
        ]
    );
    assert_eq!(
        c.get("hits", 5).await.unwrap(),
        vec![s(1336376400, 7), s(1336376415, 4), s(1336376420, 2)]
    );
    assert_eq!(c.get("hits", 60).await.unwrap(), vec![s(1336376400, 13)]);
}

async fn every_precision_in_one_write(kind: Kind) {
    let f = Fixture::new(kind).await;
    f.counters.incr("hits", 4).await.unwrap(); // at the clock's T0
    let all = f.counters.get_all("hits").await.unwrap();
    let expected: Vec<(u64, Vec<Sample>)> = [1u64, 5, 60, 300, 3600, 18000, 86400]
        .iter()
        .map(|&p| (p, vec![s(T0 as u64 / p * p, 4)]))
        .collect();
    let got: Vec<(u64, Vec<Sample>)> = all.into_iter().map(|x| (x.precision, x.samples)).collect();
    assert_eq!(got, expected);
    assert_eq!(f.all_names().await, vec!["hits"]);
}

async fn read_all_precisions_and_many_counters(kind: Kind) {
    let f = Fixture::with_settings(kind, small(&[1, 60], 10)).await;
    let names: Vec<String> = (0..30).map(|i| format!("page:{i}")).collect();
    let batch: Vec<Increment> = names
        .iter()
        .enumerate()
        .map(|(i, n)| Increment::new(n, i as i64 + 1).at(1000.0))
        .collect();
    f.counters.incr_many(&batch).await.unwrap();
    let mut asked = names.clone();
    asked.push("missing".into());
    let got = f.counters.get_many(&asked, None).await.unwrap();
    assert_eq!(got.len(), 31);
    for (i, series) in got.iter().take(30).enumerate() {
        assert_eq!(series[0].precision, 1);
        assert_eq!(series[0].samples, vec![s(1000, i as i64 + 1)]);
        assert_eq!(series[1].samples, vec![s(960, i as i64 + 1)]);
    }
    assert!(got[30].iter().all(|x| x.samples.is_empty()));
    let one = f.counters.get_many(&asked[..2], Some(60)).await.unwrap();
    assert_eq!(one[1][0].samples, vec![s(960, 2)]);
}

async fn samples_come_oldest_first(kind: Kind) {
    let f = Fixture::with_settings(kind, small(&[1], 1000)).await;
    // Written newest first and out of order.
    for t in [500u64, 20, 999, 7, 100, 99] {
        f.counters.incr_at("x", 1, t as f64).await.unwrap();
    }
    let got: Vec<u64> = f
        .counters
        .get("x", 1)
        .await
        .unwrap()
        .iter()
        .map(|x| x.start)
        .collect();
    assert_eq!(got, vec![7, 20, 99, 100, 500, 999]);
}

async fn negative_and_zero_counts(kind: Kind) {
    let f = Fixture::with_settings(kind, small(&[10], 10)).await;
    f.counters.incr_at("g", 5, 100.0).await.unwrap();
    f.counters.incr_at("g", -8, 101.0).await.unwrap();
    f.counters.incr_at("g", 0, 120.0).await.unwrap();
    assert_eq!(
        f.counters.get("g", 10).await.unwrap(),
        vec![s(100, -3), s(120, 0)]
    );
}

async fn batch_merges_and_spans_counters(kind: Kind) {
    let f = Fixture::with_settings(kind, small(&[1, 60], 100)).await;
    let batch = vec![
        Increment::new("a", 1).at(10.0),
        Increment::new("b", 2).at(10.5),
        Increment::new("a", 3).at(10.9),
        Increment::new("a", 4).at(11.0),
        Increment::new("c", -1), // now
    ];
    f.counters.incr_many(&batch).await.unwrap();
    assert_eq!(
        f.counters.get("a", 1).await.unwrap(),
        vec![s(10, 4), s(11, 4)]
    );
    assert_eq!(f.counters.get("a", 60).await.unwrap(), vec![s(0, 8)]);
    assert_eq!(f.counters.get("b", 60).await.unwrap(), vec![s(0, 2)]);
    assert_eq!(
        f.counters.get("c", 1).await.unwrap(),
        vec![s(T0 as u64, -1)]
    );
    assert_eq!(f.all_names().await, vec!["a", "b", "c"]);
}

async fn batch_is_all_or_nothing(kind: Kind) {
    let f = Fixture::with_settings(kind, small(&[1, 60], 100)).await;
    f.counters.incr_at("keep", 1, 10.0).await.unwrap();
    // One bad increment anywhere in the batch: nothing at all is written.
    let bad = vec![
        Increment::new("fresh", 1).at(10.0),
        Increment::new("keep", 5).at(10.0),
        Increment::new("bad\u{0}name", 1),
    ];
    let err = f.counters.incr_many(&bad).await.unwrap_err();
    assert!(err.is_bad_input(), "{err}");
    assert_eq!(f.all_names().await, vec!["keep"]);
    assert_eq!(f.counters.get("keep", 1).await.unwrap(), vec![s(10, 1)]);
    // An overflow in the last counter of a batch undoes the earlier ones.
    f.counters.incr_at("zz", i64::MAX, 10.0).await.unwrap();
    let overflow = vec![
        Increment::new("aa", 1).at(10.0),
        Increment::new("keep", 5).at(10.0),
        Increment::new("zz", 1).at(10.0),
    ];
    let err = f.counters.incr_many(&overflow).await.unwrap_err();
    assert!(
        matches!(&err, Error::Overflow { name, .. } if name == "zz"),
        "{err}"
    );
    assert_eq!(f.all_names().await, vec!["keep", "zz"]);
    assert_eq!(f.counters.get("keep", 1).await.unwrap(), vec![s(10, 1)]);
    assert_eq!(f.counters.get("keep", 60).await.unwrap(), vec![s(0, 1)]);
    // Empty and oversized batches are refused.
    assert!(f.counters.incr_many(&[]).await.unwrap_err().is_bad_input());
    let huge: Vec<Increment> = (0..10_001)
        .map(|i| Increment::new(format!("n{i}"), 1))
        .collect();
    let err = f.counters.incr_many(&huge).await.unwrap_err();
    assert!(err.to_string().contains("at most 10000"), "{err}");
    assert_eq!(f.all_names().await, vec!["keep", "zz"]);
}

/// Counters a batch makes (in the compact layout, a hash of a field per
/// precision, made at once) are gone again when a later counter of the
/// batch overflows.
async fn an_overflow_takes_back_the_counters_it_made(kind: Kind) {
    let precisions = [1, 5, 60, 300];
    let f = Fixture::with_settings(kind, small(&precisions, 100)).await;
    f.counters.incr_at("zz", i64::MAX, 10.0).await.unwrap();
    let mut batch: Vec<Increment> = (0..10)
        .map(|i| Increment::new(format!("n{i}"), i + 1).at(10.0))
        .collect();
    batch.push(Increment::new("zz", 1).at(10.0));
    let err = f.counters.incr_many(&batch).await.unwrap_err();
    assert!(
        matches!(&err, Error::Overflow { name, .. } if name == "zz"),
        "{err}"
    );
    assert_eq!(f.all_names().await, vec!["zz"]);
    for i in 0..10 {
        for p in precisions {
            let got = f.counters.get(&format!("n{i}"), p).await.unwrap();
            assert!(got.is_empty(), "n{i} at {p} s: {got:?}");
        }
    }
    // The same counters written alone are made whole.
    f.counters.incr_many(&batch[..10]).await.unwrap();
    for p in precisions {
        assert_eq!(
            f.counters.get("n9", p).await.unwrap(),
            vec![s(10 / p * p, 10)]
        );
    }
}

async fn overflow_writes_nothing(kind: Kind) {
    let f = Fixture::with_settings(kind, small(&[1, 5, 60, 300], 100)).await;
    f.counters.incr_at("big", i64::MAX - 1, 0.0).await.unwrap();
    // At t = 100 the 1 s, 5 s and 60 s slices are new; only the 300 s slice
    // (starting at 0) would overflow. Nothing may be written anywhere.
    let err = f.counters.incr_at("big", 2, 100.0).await.unwrap_err();
    assert_eq!(
        err.overflow()
            .unwrap_or_else(|| panic!("expected an overflow, got {err}")),
        ("counter", "big", 300, 0, 2)
    );
    assert!(err.to_string().contains("would overflow"), "{err}");
    // The message names the kind, with its verb.
    assert!(
        err.to_string()
            .starts_with("incrementing counter \"big\" by 2 would overflow its 300 s slice"),
        "{err}"
    );
    for p in [1, 5, 60, 300] {
        assert_eq!(
            f.counters.get("big", p).await.unwrap(),
            vec![s(0, i64::MAX - 1)],
            "precision {p}"
        );
    }
    // The same on the negative side.
    f.counters.incr_at("low", i64::MIN + 1, 0.0).await.unwrap();
    let err = f.counters.incr_at("low", -2, 50.0).await.unwrap_err();
    assert!(matches!(err, Error::Overflow { .. }), "{err}");
    assert_eq!(
        f.counters.get("low", 1).await.unwrap(),
        vec![s(0, i64::MIN + 1)]
    );
    // Up to the limit is fine.
    f.counters.incr_at("big", 1, 0.0).await.unwrap();
    assert_eq!(
        f.counters.get("big", 300).await.unwrap(),
        vec![s(0, i64::MAX)]
    );
}

async fn bad_input_writes_nothing(kind: Kind) {
    let f = Fixture::new(kind).await;
    let c = &f.counters;
    let long = "n".repeat(257);
    let cases: Vec<(Increment, &str)> = vec![
        (Increment::new("", 1), "must not be empty"),
        (Increment::new(long.as_str(), 1), "at most 256 characters"),
        (Increment::new("line\nbreak", 1), "control characters"),
        (Increment::new("ok", 1).at(f64::NAN), "not a finite number"),
        (
            Increment::new("ok", 1).at(f64::INFINITY),
            "not a finite number",
        ),
        (Increment::new("ok", 1).at(-1.0), "before the Unix epoch"),
        (Increment::new("ok", 1).at(1e13), "after the year 9999"),
        (Increment::new("ok", i64::MIN), "out of range"),
    ];
    for (inc, message) in cases {
        let err = c.incr_many(std::slice::from_ref(&inc)).await.unwrap_err();
        assert!(err.is_bad_input(), "{inc:?}: {err}");
        assert!(err.to_string().contains(message), "{inc:?}: {err}");
    }
    assert!(f.all_names().await.is_empty());
    assert!(common::counter_empty(c, "ok").await);
    assert!(c.get("", 1).await.unwrap_err().is_bad_input());
    if let Some(server) = &f.server {
        let mut raw = redis::Client::open(server.url())
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        let size: u64 = redis::cmd("DBSIZE").query_async(&mut raw).await.unwrap();
        assert_eq!(size, 0, "bad input left keys in Redis");
    }
}

async fn unknown_precision_lists_configured(kind: Kind) {
    let f = Fixture::with_settings(kind, small(&[1, 5, 60], 10)).await;
    let err = f.counters.get("hits", 7).await.unwrap_err();
    assert!(matches!(err, Error::UnknownPrecision { precision: 7, .. }));
    assert!(err.to_string().contains("configured: 1, 5, 60"), "{err}");
}

async fn pagination_walks_names_in_order(kind: Kind) {
    let f = Fixture::with_settings(kind, small(&[60], 10)).await;
    let mut names: Vec<String> = (0..57).map(|i| format!("c{i:03}")).collect();
    names.extend(["Zeta", "alpha", "a:b", "ä", "{tag}x", "z z"].map(String::from));
    let batch: Vec<Increment> = names.iter().map(|n| Increment::new(n, 1)).collect();
    f.counters.incr_many(&batch).await.unwrap();
    names.sort(); // byte order
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let page = f.counters.list(cursor.as_deref(), 10).await.unwrap();
        pages += 1;
        assert!(page.names.len() <= 10);
        seen.extend(page.names.clone());
        match page.next {
            Some(next) => {
                assert_eq!(Some(&next), page.names.last());
                cursor = Some(next);
            }
            None => break,
        }
    }
    assert_eq!(seen, names);
    assert_eq!(pages, 7);
    // A cursor that is not a name still works: names after it.
    let page = f.counters.list(Some("c05"), 3).await.unwrap();
    assert_eq!(page.names, vec!["c050", "c051", "c052"]);
    assert!(f.counters.list(None, 0).await.unwrap_err().is_bad_input());
    // Searching by prefix: exactly the names that start with it, paginated.
    let page = f.counters.search("c05", None, 4).await.unwrap();
    assert_eq!(page.names, vec!["c050", "c051", "c052", "c053"]);
    let rest = f
        .counters
        .search("c05", page.next.as_deref(), 100)
        .await
        .unwrap();
    assert_eq!(rest.names, vec!["c054", "c055", "c056"]);
    assert_eq!(rest.next, None);
    assert_eq!(
        f.counters.search("a", None, 100).await.unwrap().names,
        vec!["a:b", "alpha"]
    );
    assert_eq!(
        f.counters.search("ä", None, 100).await.unwrap().names,
        vec!["ä"]
    );
    assert!(
        f.counters
            .search("zzz", None, 100)
            .await
            .unwrap()
            .names
            .is_empty()
    );
    // A cursor before the prefix's range starts at the range.
    assert_eq!(
        f.counters
            .search("c05", Some("Zeta"), 2)
            .await
            .unwrap()
            .names,
        vec!["c050", "c051"]
    );
}

async fn delete_removes_every_precision(kind: Kind) {
    let f = Fixture::new(kind).await;
    f.counters.incr("gone", 2).await.unwrap();
    f.counters.incr("stays", 2).await.unwrap();
    assert!(f.counters.delete("gone").await.unwrap());
    assert!(common::counter_empty(&f.counters, "gone").await);
    assert_eq!(f.all_names().await, vec!["stays"]);
    assert!(!f.counters.delete("gone").await.unwrap());
    assert!(!f.counters.delete("never").await.unwrap());
    assert_eq!(f.counters.get("stays", 1).await.unwrap().len(), 1);
}

/// A first pass that removes 150 of a hash's 300 slices at once: on Redis
/// the hash is written back whole (`hash_rewrite.lua`) rather than losing
/// its fields one by one; what is kept reads the same, and the counter
/// takes writes after it.
async fn cleaner_first_pass_removing_many_slices_keeps_the_rest(kind: Kind) {
    let f = Fixture::with_settings(kind, small(&[1, 5], 150)).await;
    for t in 0..300u64 {
        f.counters.incr_at("x", 1, t as f64).await.unwrap();
    }
    let mut cleaner = f.counters.cleaner(CleanerSettings::default()).unwrap();
    // now = 299.5: the 1 s cutoff is 149 (0 to 149 go); 60 slices of 5 s stay.
    let report = cleaner.pass_at(ts(299.5)).await.unwrap();
    let ones: Vec<_> = (150..300).map(|t| s(t, 1)).collect();
    let fives: Vec<_> = (0..60).map(|k| s(5 * k, 5)).collect();
    assert_eq!(f.counters.get("x", 1).await.unwrap(), ones);
    assert_eq!(f.counters.get("x", 5).await.unwrap(), fives);
    let expected = if kind.trims_on_write() { 0 } else { 150 };
    assert_eq!(report.samples_removed, expected);
    assert_eq!(report.counters_removed, 0);
    f.counters.incr_at("x", 2, 300.0).await.unwrap();
    assert_eq!(
        f.counters.get("x", 1).await.unwrap().last(),
        Some(&s(300, 2))
    );
    assert_eq!(
        f.counters.get("x", 5).await.unwrap().last(),
        Some(&s(300, 2))
    );
}

async fn cleaner_cutoff_keeps_exactly_samples(kind: Kind) {
    let f = Fixture::with_settings(kind, small(&[1, 5], 3)).await;
    // 1 s slices 990..=1000 and 5 s slices 950..=1000.
    for t in 950..=1000u64 {
        f.counters.incr_at("x", 1, t as f64).await.unwrap();
    }
    let mut cleaner = f.counters.cleaner(CleanerSettings::default()).unwrap();
    // now = 1000.5: 1 s cutoff 997 (997 goes), 5 s cutoff 985 (985 goes).
    let report = cleaner.pass_at(ts(1000.5)).await.unwrap();
    assert_eq!(
        f.counters.get("x", 1).await.unwrap(),
        vec![s(998, 1), s(999, 1), s(1000, 1)]
    );
    assert_eq!(
        f.counters.get("x", 5).await.unwrap(),
        vec![s(990, 5), s(995, 5), s(1000, 1)]
    );
    // SQLite's writes trimmed as they went: each new slice removed what
    // fell out of the 3 slices ending with it, leaving the cleaner nothing.
    let expected = if kind.trims_on_write() {
        0
    } else {
        (51 - 3) + (11 - 3)
    };
    assert_eq!(report.samples_removed, expected);
    assert_eq!(report.counters_removed, 0);
    // A second pass at the same time removes nothing more.
    let again = cleaner.pass_at(ts(1000.5)).await.unwrap();
    assert_eq!(again.samples_removed, 0);
}

async fn cleaner_visits_coarse_precisions_on_cadence(kind: Kind) {
    let f = Fixture::with_settings(kind, small(&[60, 300], 1)).await;
    let mut cleaner = f.counters.cleaner(CleanerSettings::default()).unwrap();
    // Pass 0 visits everything, reading every slice: the write at 0 goes.
    f.counters.incr_at("x", 1, 0.0).await.unwrap();
    f.counters.incr_at("y", 1, 10_000.0).await.unwrap();
    cleaner.pass_at(ts(10_000.0)).await.unwrap();
    assert!(common::counter_empty(&f.counters, "x").await);
    assert_eq!(f.counters.get("y", 60).await.unwrap(), vec![s(9960, 1)]);
    // A pass a minute later removes y's 60 s slice, which passed the cutoff
    // since pass 0 (by name: the pass knows its last visit).
    cleaner.pass_at(ts(10_060.0)).await.unwrap();
    assert!(f.counters.get("y", 60).await.unwrap().is_empty());
    // Passes 1-4 visit the 60 s precision only: y's 300 s slice (9900)
    // passes its cutoff at 10_200 but stays until pass 5 visits it.
    for pass in 2..=4u32 {
        cleaner
            .pass_at(ts(10_000.0 + 60.0 * f64::from(pass)))
            .await
            .unwrap();
        assert_eq!(
            f.counters.get("y", 300).await.unwrap(),
            vec![s(9900, 1)],
            "pass {pass}"
        );
    }
    cleaner.pass_at(ts(10_300.0)).await.unwrap();
    assert!(f.counters.get("y", 300).await.unwrap().is_empty());
    assert_eq!(cleaner.passes(), 6);
}

/// On Redis, a slice written late, dated before the cutoff of the
/// cleaner's last visit, is not among the slices a remembering pass removes
/// by name: the next full pass (one in every `FULL_PASS_EVERY`) reads and
/// removes it. SQLite's passes are range deletes on the primary key, which
/// cost what they remove anyway: its next pass removes it.
async fn cleaner_full_pass_catches_late_writes(kind: Kind) {
    let f = Fixture::with_settings(kind, small(&[60], 1)).await;
    let mut cleaner = f.counters.cleaner(CleanerSettings::default()).unwrap();
    cleaner.pass_at(ts(10_000.0)).await.unwrap();
    f.counters.incr_at("late", 1, 0.0).await.unwrap();
    let every = tally::engine::store::FULL_PASS_EVERY;
    let by_range = matches!(kind, Kind::SqliteMemory | Kind::SqliteFile);
    let mut removed_at = None;
    for pass in 1..=every {
        let report = cleaner
            .pass_at(ts(10_000.0 + 60.0 * pass as f64))
            .await
            .unwrap();
        if report.samples_removed > 0 {
            assert_eq!(report.samples_removed, 1, "pass {pass}");
            removed_at.get_or_insert(pass);
        }
    }
    assert_eq!(removed_at, Some(if by_range { 1 } else { every }));
    assert!(f.counters.get("late", 60).await.unwrap().is_empty());
}

async fn cleaner_removes_emptied_counters(kind: Kind) {
    let f = Fixture::with_settings(kind, small(&[1, 60], 5)).await;
    f.counters.incr_at("old", 1, 100.0).await.unwrap();
    f.counters.incr_at("fresh", 1, 1000.0).await.unwrap();
    f.counters.incr_at("mixed", 1, 100.0).await.unwrap();
    f.counters.incr_at("mixed", 1, 998.0).await.unwrap();
    let mut cleaner = f.counters.cleaner(CleanerSettings::default()).unwrap();
    let report = cleaner.pass_at(ts(1000.0)).await.unwrap();
    assert_eq!(f.all_names().await, vec!["fresh", "mixed"]);
    assert_eq!(f.counters.get("mixed", 1).await.unwrap(), vec![s(998, 1)]);
    assert_eq!(f.counters.get("mixed", 60).await.unwrap(), vec![s(960, 1)]);
    // In the book's layout a registry entry is per precision.
    let expected_removed = if kind == Kind::RedisRia { 2 } else { 1 };
    assert_eq!(report.counters_removed, expected_removed);
    // On SQLite, writing 998 trimmed mixed's old slices already.
    let expected = if kind.trims_on_write() { 2 } else { 2 + 2 };
    assert_eq!(report.samples_removed, expected);
}

async fn cleaner_racing_writers_loses_nothing(kind: Kind) {
    let f = Fixture::with_settings(kind, small(&[1, 60], 2)).await;
    let writer = f.second_client().await;
    for round in 0..30u64 {
        let name = format!("race{round}");
        // Only stale data: the cleaner would remove the counter...
        f.counters.incr_at(&name, 1, 10.0).await.unwrap();
        let mut cleaner = f.counters.cleaner(CleanerSettings::default()).unwrap();
        let now = 100_000.0;
        // ...while a writer adds a fresh sample at the same moment.
        let (cleaned, written) =
            tokio::join!(cleaner.pass_at(ts(now)), writer.incr_at(&name, 1, now));
        cleaned.unwrap();
        written.unwrap();
        assert_eq!(
            f.counters.get(&name, 1).await.unwrap(),
            vec![s(100_000, 1)],
            "round {round}"
        );
        assert!(
            f.all_names().await.contains(&name),
            "round {round}: fresh counter lost its registry entry"
        );
        // Whichever came first, the next pass leaves it too.
        cleaner.pass_at(ts(now)).await.unwrap();
        assert!(f.all_names().await.contains(&name));
    }
}

async fn two_cleaners_at_once(kind: Kind) {
    let f = Fixture::with_settings(kind, small(&[1, 5], 4)).await;
    let other = f.second_client().await;
    let batch: Vec<Increment> = (0..300)
        .flat_map(|i| {
            (0..12).map(move |t| Increment::new(format!("k{i}"), 1).at(1000.0 + t as f64))
        })
        .collect();
    for chunk in batch.chunks(1000) {
        f.counters.incr_many(chunk).await.unwrap();
    }
    let settings = CleanerSettings {
        batch: 7,
        ..CleanerSettings::default()
    };
    let mut a = f.counters.cleaner(settings.clone()).unwrap();
    let mut b = other.cleaner(settings).unwrap();
    let now = ts(1011.0);
    let (ra, rb) = tokio::join!(a.pass_at(now), b.pass_at(now));
    let (ra, rb) = (ra.unwrap(), rb.unwrap());
    // Each sample is removed exactly once, by one of them.
    // 1 s: 12 slices, 4 kept; 5 s: 1000, 1005, 1010 are all within 4 slices.
    // (SQLite's writes trimmed the 1 s slices already.)
    let expected = if kind.trims_on_write() {
        0
    } else {
        300 * (12 - 4)
    };
    assert_eq!(ra.samples_removed + rb.samples_removed, expected);
    for i in [0, 150, 299] {
        let name = format!("k{i}");
        assert_eq!(
            f.counters.get(&name, 1).await.unwrap(),
            vec![s(1008, 1), s(1009, 1), s(1010, 1), s(1011, 1)]
        );
        assert_eq!(
            f.counters.get(&name, 5).await.unwrap(),
            vec![s(1000, 5), s(1005, 5), s(1010, 2)]
        );
    }
    assert_eq!(f.all_names().await.len(), 300);
}

async fn concurrent_writers_are_exact(kind: Kind) {
    let f = Fixture::with_settings(kind, small(&[1, 60], 100)).await;
    let mut tasks = Vec::new();
    for w in 0..8 {
        let c = if w % 2 == 0 {
            f.counters.clone()
        } else {
            f.second_client().await
        };
        tasks.push(tokio::spawn(async move {
            for i in 0..50u64 {
                c.incr_at("shared", 1, 600.0 + (i % 3) as f64)
                    .await
                    .unwrap();
                c.incr_many(&[
                    Increment::new("shared", 2).at(601.0),
                    Increment::new(format!("own{w}"), 1).at(600.0),
                ])
                .await
                .unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let per_minute = f.counters.get("shared", 60).await.unwrap();
    assert_eq!(per_minute, vec![s(600, 8 * 50 * 3)]);
    assert_eq!(common::held(&f.counters, "shared", 1).await, 8 * 50 * 3);
    assert_eq!(f.all_names().await.len(), 9);
}

async fn cleaner_runs_as_background_task(kind: Kind) {
    let f = Fixture::with_settings(kind, small(&[1], 2)).await;
    f.counters.incr_at("bg", 1, 10.0).await.unwrap();
    f.counters.incr_at("bg", 1, T0).await.unwrap();
    let cleaner = f
        .counters
        .cleaner(CleanerSettings {
            interval: Duration::from_secs(1),
            batch: 10,
            ..CleanerSettings::default()
        })
        .unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = cleaner.spawn(async {
        let _ = stopped.await;
    });
    let cleaned = tally_testkit::wait_until(tally_testkit::PATIENCE, || {
        futures_lite_block(f.counters.get("bg", 1))
            .map(|v| v == vec![s(T0 as u64, 1)])
            .unwrap_or(false)
    });
    assert!(
        cleaned,
        "the background cleaner did not trim the stale sample"
    );
    stop.send(()).unwrap();
    tokio::time::timeout(tally_testkit::PATIENCE, task)
        .await
        .expect("cleaner stops on shutdown")
        .unwrap();
}

fn futures_lite_block<F: std::future::Future>(fut: F) -> F::Output {
    tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(fut))
}

fn ts(secs: f64) -> tally::Timestamp {
    tally::Timestamp::from_secs_f64(secs).unwrap()
}

async fn sequenced_writes_apply_once(kind: Kind) {
    let f = Fixture::with_settings(kind, small(&[1, 60], 100)).await;
    let store = f.counters.store().clone();
    let mut batch = f
        .counters
        .prepare(&[
            Increment::new("s", 5).at(100.0),
            Increment::new("t", 1).at(100.0),
        ])
        .unwrap();
    // The write, then a retry of it and a stale one: they change nothing.
    let (written, duplicate) = (Applied::Written, Applied::Duplicate);
    let steps = [(0, 1, written), (0, 1, duplicate), (0, 1, duplicate)];
    apply_numbered(store.as_ref(), &mut batch, 0xfeed, &steps).await;
    assert_eq!(f.counters.get("s", 60).await.unwrap(), vec![s(60, 5)]);
    // The next number, and another lane, apply.
    let steps = [(0, 2, written), (1, 1, written), (0, 2, duplicate)];
    apply_numbered(store.as_ref(), &mut batch, 0xfeed, &steps).await;
    assert_eq!(f.counters.get("s", 60).await.unwrap(), vec![s(60, 15)]);
    assert_eq!(f.counters.get("t", 1).await.unwrap(), vec![s(100, 3)]);
    // A refused write does not consume its number.
    f.counters.incr_at("o", i64::MAX, 100.0).await.unwrap();
    let mut over = f
        .counters
        .prepare(&[Increment::new("o", 1).at(100.0)])
        .unwrap();
    over.seq = Some(WriteSeq {
        writer: 0xfeed,
        lane: 2,
        seq: 1,
    });
    assert!(matches!(
        store.apply(&over).await,
        Err(Error::Overflow { .. })
    ));
    let mut ok = f
        .counters
        .prepare(&[Increment::new("s", 1).at(100.0)])
        .unwrap();
    apply_numbered(store.as_ref(), &mut ok, 0xfeed, &[(2, 1, written)]).await;
}

fn agg_settings() -> WriterSettings {
    WriterSettings {
        flush_interval: Duration::from_millis(20),
        chunk_counters: 7,
        lanes: 3,
        ..WriterSettings::default()
    }
}

async fn aggregated_writes_are_exact(kind: Kind) {
    let f = Fixture::with_settings(kind, small(&[1, 5, 60], 1000)).await;
    let agg = CounterWriter::start(f.counters.clone(), agg_settings()).unwrap();
    let mut tasks = Vec::new();
    for w in 0..6u64 {
        let agg = agg.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..400u64 {
                let name = format!("agg{}", (w * 7 + i) % 25);
                agg.add(&name, 1, Some(1000.0 + (i % 11) as f64))
                    .await
                    .unwrap();
                if i.is_multiple_of(50) {
                    tokio::task::yield_now().await;
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    agg.flush().await.unwrap();
    let stats = agg.stats();
    assert_eq!(stats.accepted, 2400);
    assert_eq!(stats.written, 2400);
    assert_eq!(stats.rejected, 0);
    assert_eq!(stats.pending_entries, 0);
    let names = f.all_names().await;
    assert_eq!(names.len(), 25);
    let all = f.counters.get_many(&names, None).await.unwrap();
    for p in 0..3 {
        let total: i64 = all
            .iter()
            .flat_map(|c| c[p].samples.iter().map(|x| x.count))
            .sum();
        assert_eq!(total, 2400, "precision index {p}");
    }
    // Each 1 s slice got exactly what was added to it.
    let per_second: i64 = all
        .iter()
        .map(|c| {
            c[0].samples
                .iter()
                .filter(|x| x.start == 1000)
                .map(|x| x.count)
                .sum::<i64>()
        })
        .sum();
    assert_eq!(per_second, 6 * 37);
}

async fn aggregator_applies_backpressure(kind: Kind) {
    let f = Fixture::with_settings(kind, small(&[1], 100)).await;
    // A table of 3 entries: adding 12 new ones must wait for flushes to make
    // room, and every one is written.
    let settings = table_of_3(agg_settings(), Duration::from_millis(30), WhenFull::Wait);
    let waiting = CounterWriter::start(f.counters.clone(), settings).unwrap();
    for i in 0..12 {
        tokio::time::timeout(
            tally_testkit::PATIENCE,
            waiting.add(&format!("w{i}"), 1, Some(60.0)),
        )
        .await
        .expect("add waits for room, then succeeds")
        .unwrap();
        assert!(waiting.stats().pending_entries <= 3);
    }
    waiting.flush().await.unwrap();
    assert_eq!(waiting.stats().written, 12);
    assert_eq!(f.all_names().await.len(), 12);
}

async fn aggregator_flushes_on_shutdown_and_drop(kind: Kind) {
    let f = Fixture::with_settings(kind, small(&[1], 100)).await;
    let long = WriterSettings {
        flush_interval: Duration::from_secs(3600),
        ..agg_settings()
    };
    let agg = CounterWriter::start(f.counters.clone(), long.clone()).unwrap();
    agg.add("down", 3, Some(70.0)).await.unwrap();
    agg.shutdown().await;
    assert_eq!(f.counters.get("down", 1).await.unwrap(), vec![s(70, 3)]);
    assert!(
        agg.add("down", 1, None).await.is_err(),
        "a shut down aggregator takes nothing"
    );
    // Dropping the last handle flushes too.
    let dropped = CounterWriter::start(f.counters.clone(), long).unwrap();
    dropped.add("dropped", 2, Some(70.0)).await.unwrap();
    drop(dropped);
    let flushed = tally_testkit::wait_until(tally_testkit::PATIENCE, || {
        futures_lite_block(f.counters.get("dropped", 1))
            .map(|v| v == vec![s(70, 2)])
            .unwrap_or(false)
    });
    assert!(
        flushed,
        "dropping the aggregator lost its pending increments"
    );
}

async fn aggregator_drops_only_a_refused_counter(kind: Kind) {
    let f = Fixture::with_settings(kind, small(&[1, 60], 100)).await;
    f.counters.incr_at("full", i64::MAX, 10.0).await.unwrap();
    let agg = CounterWriter::start(
        f.counters.clone(),
        WriterSettings {
            chunk_counters: 100,
            ..agg_settings()
        },
    )
    .unwrap();
    for name in ["a", "full", "z"] {
        agg.add(name, 1, Some(10.0)).await.unwrap();
        agg.add(name, 1, Some(11.0)).await.unwrap();
    }
    agg.flush().await.unwrap();
    let stats = agg.stats();
    assert_eq!((stats.accepted, stats.written, stats.rejected), (6, 4, 2));
    assert_eq!(f.counters.get("a", 60).await.unwrap(), vec![s(0, 2)]);
    assert_eq!(
        f.counters.get("z", 1).await.unwrap(),
        vec![s(10, 1), s(11, 1)]
    );
    assert_eq!(
        f.counters.get("full", 1).await.unwrap(),
        vec![s(10, i64::MAX)]
    );
    // The lane goes on working after the split.
    agg.add("a", 1, Some(12.0)).await.unwrap();
    agg.flush().await.unwrap();
    assert_eq!(f.counters.get("a", 60).await.unwrap(), vec![s(0, 3)]);
}

async fn aggregator_rejects_bad_input(kind: Kind) {
    let f = Fixture::new(kind).await;
    // No timed flush: the overflow checks below are against totals still
    // waiting in the table, which a flush between two adds would empty.
    let agg = CounterWriter::start(
        f.counters.clone(),
        WriterSettings {
            flush_interval: Duration::from_secs(3600),
            ..agg_settings()
        },
    )
    .unwrap();
    assert!(agg.add("", 1, None).await.unwrap_err().is_bad_input());
    assert!(
        agg.add("x", i64::MIN, None)
            .await
            .unwrap_err()
            .is_bad_input()
    );
    assert!(
        agg.add("x", 1, Some(f64::NAN))
            .await
            .unwrap_err()
            .is_bad_input()
    );
    agg.add("x", i64::MAX, Some(5.0)).await.unwrap();
    let err = agg.add("x", 1, Some(5.0)).await.unwrap_err();
    assert!(matches!(err, Error::Overflow { .. }), "{err}");
    // A batch with one bad increment adds none of them.
    let err = agg
        .add_many(&[Increment::new("y", 1), Increment::new("bad\u{7}", 1)])
        .await
        .unwrap_err();
    assert!(err.is_bad_input());
    // A batch whose last increment overflows a waiting total adds nothing.
    let err = agg
        .add_many(&[
            Increment::new("y", 2).at(5.0),
            Increment::new("x", 1).at(5.0),
        ])
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Overflow { .. }), "{err}");
    agg.flush().await.unwrap();
    assert_eq!(agg.stats().accepted, 1);
    assert_eq!(agg.stats().written, 1);
    assert_eq!(f.all_names().await, vec!["x"]);
    // A batch that does not fit in an Error-mode table adds nothing either.
    let small = CounterWriter::start(
        f.counters.clone(),
        table_of_3(agg_settings(), Duration::from_secs(3600), WhenFull::Error),
    )
    .unwrap();
    small.add("p", 1, Some(9.0)).await.unwrap();
    let batch: Vec<Increment> = (0..3)
        .map(|i| Increment::new(format!("q{i}"), 1).at(9.0))
        .collect();
    assert!(matches!(
        small.add_many(&batch).await,
        Err(Error::Overloaded(_))
    ));
    small.add_many(&batch[..2]).await.unwrap();
    small.flush().await.unwrap();
    assert_eq!(small.stats().written, 3);
    assert_eq!(f.all_names().await, vec!["p", "q0", "q1", "x"]);
}
