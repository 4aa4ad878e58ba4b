//! Copying daily statistics: every entity the source holds, its kept days
//! and its all-time total.
//!
//! The source's entities are listed whole ([`DailyStore::list`]) and copied
//! a page of [`MigrateSettings::names_per_batch`] entities at a time: each
//! entity's days inside the source's retention window (read with their
//! counts) and the rest of its total (the views of days that left the
//! window) as views dated before the target's window, which count toward
//! the total only. Each entity of a page is one keyed write of the
//! target's store (all sent at once), its mark made from the migration's
//! id and the entity, so a rerun answers "duplicate" for the entities
//! already copied and counts nothing twice.
//!
//! What it does not do: copy days the source keeps past its own window (they
//! read as 0 there and count in the total, and so they do in the copy), or
//! days older than the target's window as days (their views go to the
//! total).

use futures::future::try_join_all;

use super::{LANE_DAILY, Progress, Run, SpaceReport};
use crate::daily::{DailyWrite, Day};
use crate::error::{Error, Result};

/// Copies the run's `from`'s daily statistics into its `to` (see the module docs).
pub(super) async fn copy(run: &mut Run<'_, impl FnMut(&Progress<'_>)>) -> Result<SpaceReport> {
    let (from, to, settings) = (run.from, run.to, run.settings);
    let (source, target) = (from.daily(), to.daily());
    let (store, into) = (source.store(), target.store());
    let held = store.list().await?;
    let (floor, target_floor) = (source.floor_now(), target.floor_now());
    let now = to.clock().now().whole_secs();
    let mut report = SpaceReport {
        space: "daily".into(),
        series: held.len() as u64,
        ..SpaceReport::default()
    };
    for (page, chunk) in held.chunks(settings.names_per_batch).enumerate() {
        let read = try_join_all(chunk.iter().map(|h| async move {
            let days: Vec<Day> = h.days.iter().copied().filter(|d| *d >= floor).collect();
            let counts = if days.is_empty() {
                Vec::new()
            } else {
                store.days(&h.entity, &days).await?
            };
            let total = store.total(&h.entity).await?;
            Ok::<_, Error>((days, counts, total))
        }))
        .await?;
        let mut per_entity = Vec::new();
        for (h, (days, counts, total)) in chunk.iter().zip(read) {
            let mut writes = Vec::new();
            let mut copied = 0i128;
            for (day, count) in days.into_iter().zip(counts).filter(|(_, c)| *c > 0) {
                writes.push(DailyWrite {
                    entity: h.entity.clone(),
                    day,
                    count,
                    floor: target_floor,
                });
                copied += i128::from(count);
                report.slices += 1;
            }
            // The views of the days that left the window: the total's rest.
            let before = i128::from(total) - copied;
            if before < 0 {
                return Err(Error::Corrupt(format!(
                    "entity {:?} keeps days adding up to {copied}, more than its total {total}",
                    h.entity.as_str()
                )));
            }
            if before > 0 {
                writes.push(DailyWrite {
                    entity: h.entity.clone(),
                    day: target_floor.plus(-1),
                    count: before as i64,
                    floor: target_floor,
                });
            }
            if !writes.is_empty() {
                per_entity.push((settings.mark(LANE_DAILY, h.entity.as_str(), now), writes));
            }
        }
        let written = try_join_all(
            per_entity
                .iter()
                .map(|(mark, writes)| into.incr(writes, Some(mark))),
        )
        .await?;
        let applied = written.iter().flatten().map(|w| w.applied);
        run.page_done(&mut report, applied, page, chunk.len());
    }
    Ok(report)
}
