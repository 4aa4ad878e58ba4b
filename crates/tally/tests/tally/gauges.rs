//! The gauges behaviour suite: every test runs on SQLite (memory and file),
//! on a real redis-server in both key layouts (gauges use the tagged keys
//! under the default prefix on a `ria` server) and on a real Redis Cluster.

use crate::common;

use common::{Fixture, Kind, T0};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tally::gauges::{GaugeOp, GaugeSlice, GaugesWriter};
use tally::{Clock, Error};

/// A minute's start, well inside T0's minute.
const MIN: f64 = 1_336_376_400.0;

fn slice(start: f64, last: f64, min: f64, max: f64) -> GaugeSlice {
    GaugeSlice {
        start: start as u64,
        last,
        min,
        max,
    }
}

per_backend!(layouts: fixture =>
    set_and_adjust_in_order,
    adjustments_continue_from_the_current_value,
    every_precision_in_one_write,
    a_bad_operation_writes_nothing,
    list_and_delete,
    the_cleaner_trims_gauges,
    aggregated_writes_keep_order,
    random_sequences_match_a_simulation,
);

/// statsd's semantics: `5|g` sets, `+3|g` and `-6|g` adjust; a negative
/// value is set with `0|g` then `-5|g`. min and max are over the values
/// held after each operation.
async fn set_and_adjust_in_order(f: Fixture) {
    let gauges = f.gauges(&[60, 3600], 10, false).await;
    // Each step is one write, read back as the gauge's minute slice and its
    // current value.
    let steps = [
        (
            "queue",
            vec![
                GaugeOp::set("queue", 5.0).at(MIN + 1.0),
                GaugeOp::adjust("queue", 3.0).at(MIN + 2.0),
                GaugeOp::adjust("queue", -6.0).at(MIN + 3.0),
            ],
            slice(MIN, 2.0, 2.0, 8.0),
        ),
        // Set a negative value the statsd way, in the same slice.
        (
            "queue",
            vec![
                GaugeOp::set("queue", 0.0).at(MIN + 4.0),
                GaugeOp::adjust("queue", -5.0).at(MIN + 5.0),
            ],
            slice(MIN, -5.0, -5.0, 8.0),
        ),
        // The same operations in the other order end elsewhere: order is kept.
        (
            "other",
            vec![
                GaugeOp::adjust("other", -6.0).at(MIN + 1.0),
                GaugeOp::adjust("other", 3.0).at(MIN + 2.0),
                GaugeOp::set("other", 5.0).at(MIN + 3.0),
            ],
            slice(MIN, 5.0, -6.0, 5.0),
        ),
    ];
    for (name, ops, want) in steps {
        gauges.apply_many(&ops).await.unwrap();
        assert_eq!(gauges.get(name, 60).await.unwrap(), vec![want], "{ops:?}");
        assert_eq!(gauges.current(name).await.unwrap(), Some(want.last));
    }
}

/// An adjustment in a new slice starts from the gauge's value (kept by the
/// store), also for another client (a restarted process).
async fn adjustments_continue_from_the_current_value(f: Fixture) {
    let gauges = f.gauges(&[60], 10, false).await;
    gauges
        .apply_many(&[GaugeOp::set("conns", 10.0).at(MIN)])
        .await
        .unwrap();
    gauges
        .apply_many(&[GaugeOp::adjust("conns", -4.0).at(MIN + 60.0)])
        .await
        .unwrap();
    let other = f.gauges(&[60], 10, true).await;
    other
        .apply_many(&[
            GaugeOp::adjust("conns", 1.0).at(MIN + 120.0),
            GaugeOp::adjust("conns", 2.0).at(MIN + 121.0),
        ])
        .await
        .unwrap();
    assert_eq!(
        other.get("conns", 60).await.unwrap(),
        vec![
            slice(MIN, 10.0, 10.0, 10.0),
            slice(MIN + 60.0, 6.0, 6.0, 6.0),
            slice(MIN + 120.0, 9.0, 7.0, 9.0),
        ]
    );
    assert_eq!(gauges.current("conns").await.unwrap(), Some(9.0));
    // A gauge never written starts from 0.
    gauges
        .apply_many(&[GaugeOp::adjust("fresh", -2.5).at(MIN)])
        .await
        .unwrap();
    assert_eq!(
        gauges.get("fresh", 60).await.unwrap(),
        vec![slice(MIN, -2.5, -2.5, -2.5)]
    );
}

/// One write composes into a slice per precision; each precision's
/// slices run from the same current value.
async fn every_precision_in_one_write(f: Fixture) {
    let gauges = f.gauges(&[1, 60, 3600], 100, false).await;
    gauges
        .apply_many(&[GaugeOp::set("t", 20.0).at(T0)])
        .await
        .unwrap();
    gauges
        .apply_many(&[
            GaugeOp::adjust("t", 1.0).at(T0 + 1.0),
            GaugeOp::adjust("t", -3.0).at(T0 + 2.0),
            GaugeOp::adjust("t", 0.5).at(T0 + 2.2),
        ])
        .await
        .unwrap();
    let all = gauges.get_all("t").await.unwrap();
    let s = T0.floor();
    assert_eq!(all[0].precision, 1);
    assert_eq!(
        all[0].slices,
        vec![
            slice(s, 20.0, 20.0, 20.0),
            slice(s + 1.0, 21.0, 21.0, 21.0),
            slice(s + 2.0, 18.5, 18.0, 18.5),
        ]
    );
    assert_eq!(all[1].slices, vec![slice(MIN, 18.5, 18.0, 21.0)]);
    assert_eq!(
        all[2].slices,
        vec![slice(1_336_374_000.0, 18.5, 18.0, 21.0)]
    );
}

async fn a_bad_operation_writes_nothing(f: Fixture) {
    let gauges = f.gauges(&[60], 10, false).await;
    let e = gauges
        .apply_many(&[GaugeOp::set("a", 1.0), GaugeOp::set("b", f64::NAN)])
        .await
        .unwrap_err();
    assert!(e.is_bad_input(), "{e}");
    assert!(e.to_string().contains("\"b\""), "{e}");
    let both = GaugeOp {
        delta: Some(1.0),
        ..GaugeOp::set("a", 1.0)
    };
    let e = gauges.apply_many(&[both]).await.unwrap_err();
    assert!(e.to_string().contains("exactly one"), "{e}");
    let e = gauges
        .apply_many(&[GaugeOp::set("{bad", 1.0), GaugeOp::set("", 1.0)])
        .await
        .unwrap_err();
    assert!(e.is_bad_input(), "{e}");
    assert!(gauges.apply_many(&[]).await.unwrap_err().is_bad_input());
    assert!(gauges.get("a", 7).await.is_err());
    // A value that would become infinite refuses the whole batch. (On a
    // cluster, only the part on the refusing gauge's shard: gauges, like
    // statistics, cannot be taken back on the others; see `tally::gauges`.)
    gauges.set_at("big", f64::MAX, MIN).await.unwrap();
    let mut overflow = vec![
        GaugeOp::adjust("big", -1.0).at(MIN + 1.0),
        GaugeOp::adjust("big", f64::MAX).at(MIN + 2.0),
    ];
    if !f.kind.is_cluster() {
        overflow.insert(0, GaugeOp::set("a", 1.0).at(MIN));
    }
    let e = gauges.apply_many(&overflow).await.unwrap_err();
    assert!(
        matches!(e, Error::InvalidInput(_) | Error::InvalidCount(_)),
        "{e:?}"
    );
    // The message names the kind it is about.
    let said = e.to_string();
    assert!(
        said.contains("gauge") && !said.contains("counter"),
        "{said}"
    );
    assert!(gauges.get("a", 60).await.unwrap().is_empty());
    assert_eq!(
        gauges.get("big", 60).await.unwrap(),
        vec![slice(MIN, f64::MAX, f64::MAX, f64::MAX)]
    );
    assert_eq!(
        gauges.search("", None, 10).await.unwrap().names,
        vec!["big"]
    );
}

async fn list_and_delete(f: Fixture) {
    let gauges = f.gauges(&[60, 3600], 10, false).await;
    gauges
        .apply_many(&common::LISTED.map(|n| GaugeOp::set(n, 1.0)))
        .await
        .unwrap();
    common::pages_then_deletes(&gauges).await;
    assert_eq!(gauges.current("q:b").await.unwrap(), None);
    // Its current value went too: an adjustment starts from 0 again.
    gauges.adjust("q:b", 2.0).await.unwrap();
    assert_eq!(gauges.current("q:b").await.unwrap(), Some(2.0));
    assert_eq!(
        gauges.search("", None, 10).await.unwrap().names,
        vec!["q:a", "q:b", "q:c", "r"]
    );
}

/// The cleaner trims gauge slices like statistics'; the current value
/// outlives them (a gauge keeps its value until set again).
async fn the_cleaner_trims_gauges(f: Fixture) {
    let gauges = f.gauges(&[1, 60], 10, false).await;
    gauges.set("g", 7.0).await.unwrap();
    let mut cleaner = f.cleaner_of(&gauges);
    f.clock.advance(700.0);
    let report = cleaner.pass().await.unwrap();
    assert_eq!(report.samples_removed, 2, "{report:?}");
    assert!(common::series_empty(&gauges, "g").await);
    gauges.adjust("g", 1.0).await.unwrap();
    assert_eq!(gauges.current("g").await.unwrap(), Some(8.0));
}

/// The aggregating writer composes operations in the order taken and
/// writes them once.
async fn aggregated_writes_keep_order(f: Fixture) {
    let gauges = f.gauges(&[60], 10, false).await;
    let writer = GaugesWriter::start(gauges.clone(), common::hourly_flush()).unwrap();
    for op in [
        GaugeOp::adjust("w", 4.0),
        GaugeOp::set("w", 1.0),
        GaugeOp::adjust("w", 5.0),
        GaugeOp::adjust("w", -10.0),
    ] {
        writer.try_apply(&op).unwrap();
    }
    writer.flush().await.unwrap();
    writer.try_apply(&GaugeOp::adjust("w", 1.0)).unwrap();
    writer.flush().await.unwrap();
    assert_eq!(
        gauges.get("w", 60).await.unwrap(),
        vec![slice(MIN, -3.0, -4.0, 6.0)]
    );
    assert_eq!(writer.stats().written, 5);
    writer.shutdown().await;
}

/// Random operations over several gauges and minutes, written in random
/// batches, read back exactly as a step-by-step simulation says.
async fn random_sequences_match_a_simulation(f: Fixture) {
    let gauges = f.gauges(&[60, 3600], 100, false).await;
    let mut rng = StdRng::seed_from_u64(9);
    let names = ["a", "b", "c"];
    // Per gauge: its value, and per minute (last, min, max).
    let mut value = [0.0f64; 3];
    let mut minutes: Vec<Vec<(f64, GaugeSlice)>> = vec![Vec::new(); 3];
    let mut t = MIN;
    for _ in 0..12 {
        let n = rng.random_range(1..20);
        let mut ops = Vec::new();
        for _ in 0..n {
            t += rng.random_range(0.0..10.0);
            let g = rng.random_range(0..3);
            let x = f64::from(rng.random_range(-50i32..50));
            let op = if rng.random_bool(0.3) {
                value[g] = x;
                GaugeOp::set(names[g], x)
            } else {
                value[g] += x;
                GaugeOp::adjust(names[g], x)
            };
            ops.push(op.at(t));
            let start = (t / 60.0).floor() * 60.0;
            let v = value[g];
            match minutes[g].last_mut() {
                Some((s, m)) if *s == start => {
                    m.last = v;
                    m.min = m.min.min(v);
                    m.max = m.max.max(v);
                }
                _ => minutes[g].push((start, slice(start, v, v, v))),
            }
        }
        gauges.apply_many(&ops).await.unwrap();
    }
    for (g, name) in names.iter().enumerate() {
        let want: Vec<GaugeSlice> = minutes[g].iter().map(|(_, m)| *m).collect();
        assert_eq!(gauges.get(name, 60).await.unwrap(), want, "{name}");
        let cur = gauges.current(name).await.unwrap();
        assert_eq!(cur, (!want.is_empty()).then_some(value[g]), "{name}");
    }
}

per_backend!(expiring: the_expiring_layout_keeps_gauges);

/// The expiring layout: slices in chunks with an expiry, the current value
/// continued across minutes, deleted with the gauge.
async fn the_expiring_layout_keeps_gauges(kind: Kind) {
    let f = Fixture::near_now(kind).await;
    let gauges = f.gauges(&[1, 60], 120, false).await;
    let now = f.clock.now().as_secs_f64();
    gauges
        .apply_many(&[
            GaugeOp::set("e", 3.0).at(now),
            GaugeOp::adjust("e", 2.0).at(now + 1.0),
        ])
        .await
        .unwrap();
    f.clock.advance(60.0);
    gauges.adjust("e", -10.0).await.unwrap();
    assert_eq!(
        gauges.get("e", 60).await.unwrap(),
        vec![
            slice(now, 5.0, 3.0, 5.0),
            slice(now + 60.0, -5.0, -5.0, -5.0)
        ]
    );
    assert_eq!(gauges.get("e", 1).await.unwrap().len(), 3);
    assert_eq!(gauges.current("e").await.unwrap(), Some(-5.0));
    assert!(gauges.delete("e").await.unwrap());
    gauges.adjust("e", 1.0).await.unwrap();
    assert_eq!(gauges.current("e").await.unwrap(), Some(1.0));
}
