//! What every service over one space does the same way, whatever its kind:
//! a keyed write applied once, one series read at several resolutions,
//! names listed by prefix a page at a time, a series deleted. Gauges, sets
//! and statistics call these; each keeps only what its kind makes
//! different (validation, the reading of a slice).

use crate::counters::Page;
use crate::engine::store::{Applied, Batch, SliceSel, SliceStore, Slices, Space};
use crate::error::Result;
use crate::name::Name;

/// Writes `batch` with the write id of the idempotency `key`, so the same
/// key sent again is applied once ([`Applied::Duplicate`]), as
/// [`crate::Counters::incr_many_once`]; on a Redis Cluster each node's part
/// carries the id, so each part is applied once.
pub async fn apply_once(store: &dyn SliceStore, key: &str, mut batch: Batch) -> Result<Applied> {
    crate::idempotency::check_key(key)?;
    batch.seq = Some(crate::idempotency::write_seq(key));
    store.apply(&batch).await
}

/// Every slice of the series `name` at each of `resolutions`, in that
/// order, oldest first: one round trip.
pub async fn read_series(
    store: &dyn SliceStore,
    space: &Space,
    name: &str,
    resolutions: &[u64],
) -> Result<Vec<(u64, Slices)>> {
    let name = Name::new(name)?;
    let mut all = store
        .read(space, &[name], resolutions, SliceSel::All)
        .await?;
    let per = all.pop().unwrap_or_default();
    Ok(resolutions.iter().copied().zip(per).collect())
}

/// Up to `limit` (1 to `max`) names of `space` starting with `prefix`,
/// after the cursor `after`, in name order.
pub async fn search(
    store: &dyn SliceStore,
    space: &Space,
    prefix: &str,
    after: Option<&str>,
    limit: usize,
    max: usize,
) -> Result<Page> {
    crate::name::check_search(prefix, limit, max)?;
    let names = store.list(space, prefix, after, limit + 1).await?;
    Ok(Page::of(names, limit))
}

/// Deletes every resolution of the series `name`; true if it held anything.
pub async fn delete(store: &dyn SliceStore, space: &Space, name: &str) -> Result<bool> {
    let name = Name::new(name)?;
    store.delete(space, &name).await
}
