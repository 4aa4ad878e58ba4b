//! Copying the time series: every (model, key) the source holds, each kind
//! (counts, distinct values, most frequent items) at each rollup both sides
//! keep, every bucket that has not expired.
//!
//! The source's store is listed whole ([`TsdbStore::list`]); its (model,
//! key) pairs, sorted, are copied a page of
//! [`MigrateSettings::names_per_batch`] at a time: the page's buckets are
//! read per (model, rollup, kind), and each pair's are merged into the
//! target as one keyed write of its store ([`TsdbStore::add`], all the
//! page's sent at once), its mark made from the migration's id and the
//! pair, so a rerun answers "duplicate" for the pairs already copied and
//! counts nothing twice, even when pairs whose data all expired in between
//! are gone from the listing. Counts add; distinct values travel as
//! their HyperLogLog's registers (merging registers is exact, so the
//! target's union is the source's); item counts as the stored summary,
//! folded into the target's. Each bucket keeps the source's expiry (its
//! bucket start plus the source rollup's retention): the target keeps the
//! source's retention, and what has expired in the source is not copied.
//!
//! What it does not do: copy a rollup the target does not keep (or one the
//! source's settings do not name: its retention is unknown); those are
//! reported.
//!
//! [`TsdbStore::list`]: crate::tsdb::TsdbStore::list
//! [`TsdbStore::add`]: crate::tsdb::TsdbStore::add

use std::collections::BTreeMap;

use futures::future::try_join_all;

use super::{LANE_TSDB, Progress, Run, SpaceReport};
use crate::engine::Kind;
use crate::error::Result;
use crate::name::Name;
use crate::tsdb::precision::{self, Precision};
use crate::tsdb::{Cell, CellAdd, Held, Window};

/// Copies the run's `from`'s time series into its `to` (see the module docs).
pub(super) async fn copy(run: &mut Run<'_, impl FnMut(&Progress<'_>)>) -> Result<SpaceReport> {
    let (from, to, settings) = (run.from, run.to, run.settings);
    let (source, target) = (from.tsdb(), to.tsdb());
    let now = from.clock().now().whole_secs();
    let target_now = to.clock().now().whole_secs();
    let held = source.store().list(now).await?;
    // The source's precisions the target keeps too, by bucket length.
    let copied: BTreeMap<u64, Precision> = source
        .settings()
        .precisions
        .iter()
        .filter(|r| {
            target
                .settings()
                .precisions
                .iter()
                .any(|t| t.seconds == r.seconds)
        })
        .map(|r| (r.seconds, *r))
        .collect();
    let mut not_copied: Vec<u64> = source
        .settings()
        .precisions
        .iter()
        .map(|r| r.seconds)
        .chain(held.iter().map(|h| h.rollup))
        .filter(|s| !copied.contains_key(s))
        .collect();
    not_copied.sort_unstable();
    not_copied.dedup();
    // What each (model, key) holds, in order.
    let mut series: Vec<((Name, Name), Vec<Held>)> = Vec::new();
    for h in held {
        match series.last_mut() {
            Some((id, list)) if id.0 == h.model && id.1 == h.key => list.push(h),
            _ => series.push(((h.model.clone(), h.key.clone()), vec![h])),
        }
    }
    let mut report = SpaceReport {
        space: "time_series".into(),
        series: series.len() as u64,
        resolutions_not_copied: not_copied,
        ..SpaceReport::default()
    };
    for (page, chunk) in series.chunks(settings.names_per_batch).enumerate() {
        // One read per (model, rollup, kind) of the page.
        let mut reads: BTreeMap<(Name, u64, u8), (Kind, Vec<Name>)> = BTreeMap::new();
        for h in chunk.iter().flat_map(|(_, list)| list) {
            if copied.contains_key(&h.rollup) {
                reads
                    .entry((h.model.clone(), h.rollup, h.kind.code()))
                    .or_insert_with(|| (h.kind, Vec::new()))
                    .1
                    .push(h.key.clone());
            }
        }
        let store = source.store();
        let values = try_join_all(reads.iter().map(|((model, seconds, _), (kind, keys))| {
            let window = Window {
                model: model.clone(),
                keys: keys.clone(),
                rollup: *seconds,
                buckets: precision::live_buckets(copied[seconds], now),
                now,
            };
            async move {
                let values = store.read(*kind, &window).await?;
                Ok::<_, crate::Error>((window, values))
            }
        }))
        .await?;
        // Each (model, key)'s cells, with the mark of its copy.
        let mut adds: BTreeMap<(Name, Name), Vec<CellAdd>> = BTreeMap::new();
        for (window, values) in values {
            let p = copied[&window.rollup];
            for (key, per) in window.keys.iter().zip(values) {
                for (&bucket, delta) in window.buckets.iter().zip(per) {
                    let expires = precision::expires(p, bucket);
                    if delta.is_identity() || expires <= target_now {
                        continue;
                    }
                    let id = (window.model.clone(), key.clone());
                    adds.entry(id).or_default().push(CellAdd {
                        cell: Cell {
                            model: window.model.clone(),
                            key: key.clone(),
                            rollup: p.seconds,
                            bucket,
                            expires,
                        },
                        delta,
                    });
                }
            }
        }
        report.slices += adds.values().map(Vec::len).sum::<usize>() as u64;
        let (into, capacity) = (target.store(), target.settings().top_capacity);
        let applied = try_join_all(adds.iter().map(|((model, key), cells)| {
            let mark = settings.mark(LANE_TSDB, &format!("{model}\0{key}"), target_now);
            async move { into.add(cells, capacity, Some(&mark)).await }
        }))
        .await?;
        run.page_done(&mut report, applied.into_iter(), page, chunk.len());
    }
    Ok(report)
}
