//! The engine's store in Redis: every space, in either key layout (see
//! [`super::layout`]), standalone or on a cluster.
//!
//! A write is one Lua call (`engine_apply.lua`) that merges every delta of
//! the batch and registers every series, all or nothing: sums with
//! HINCRBY, taken back by subtraction when one overflows; blob kinds with
//! their kind's Lua merge (`kind_*.lua`, dispatched by kind code through
//! `engine_kinds.lua`), taken back by restoring the values they held.
//! Distinct values are kept as Redis's own HyperLogLog strings, merged by
//! PFADD and PFMERGE in two scratch keys of the call's slot
//! (`kind_distinct.lua`) and read back into [`Hll`] in Rust. On a
//! cluster, a batch is split into one call per registry shard (one slot
//! each), sent concurrently; each call is atomic and carries the batch's
//! sequence number, recorded per writer lane in a key of the same slot, so
//! a retried call is applied once. When one shard refuses its part (an
//! overflow: it wrote nothing), the shards that succeeded are taken back
//! (`engine_revert.lua`, by subtraction: sums only for now) before the
//! error is returned, so the batch as a whole writes nothing; between the
//! two steps a reader may briefly see the reverted part. When a shard's
//! outcome is unknown (unreachable, not confirmed by replicas), the others
//! are kept and the error returned: retrying with the same sequence number
//! completes the batch exactly once.
//!
//! In the expiring layout a write also sets each new chunk's expiry and
//! keeps `ends@e` (see `expiring.rs` and `engine_apply.lua`); reads look at
//! the window's chunks only; listing forgets expired series first
//! (`expiring_list.lua`); cleaning does nothing.
//!
//! Reads are pipelines of one command per series and resolution (one
//! pipeline per slot): DUMP for hashes of sums (a listpack, parsed in
//! `dump.rs`; HGETALL again for a hash in another encoding), HGETALL for
//! other kinds; listing is ZRANGEBYLEX per registry, merged a page at a
//! time (`ListPage`);
//! cleaning walks each registry in batches, one ZRANGEBYLEX and one
//! `engine_clean.lua` call per batch, which removes fields by name and
//! drops emptied entries atomically. A pass that knows no earlier visit
//! first reads the batch's fields (one pipeline of DUMP, parsed in
//! `dump.rs`), picks the old ones in Rust, and removes those of entries
//! that keep a field with one pipeline of HDEL, the rest through the
//! script. Deleting is one `engine_delete.lua` call.

mod apply;
mod clean;
mod delete;
mod list;
mod read;
mod revert;

use async_trait::async_trait;
use redis::Script;

use super::Redis;
use super::layout::Layout;
use crate::clock::SharedClock;
use crate::engine::store::Reads;
use crate::engine::{
    Applied, Batch, CleanJob, CleanReport, Kind, SliceSel, SliceStore, Slices, Space,
};
use crate::error::{Error, Result};
use crate::name::Name;

/// Every space's values in Redis.
#[derive(Clone, Debug)]
pub struct RedisSliceStore {
    redis: Redis,
    layout: Layout,
    /// `engine_apply.lua` for sums: no kind's merge prepended, so an exact
    /// increment runs no more Lua than counters always did.
    apply: Script,
    /// `engine_apply.lua` with the statistics' merge (`kind_stats.lua`).
    apply_stats: Script,
    /// `engine_apply.lua` with the gauges' merge (`kind_gauge.lua`).
    apply_gauge: Script,
    /// `engine_apply.lua` with the sets' merge (`kind_distinct.lua`).
    apply_distinct: Script,
    revert: Script,
    clean: Script,
    delete: Script,
    /// `expiring_list.lua` (the expiring layout's listing).
    list: Script,
    /// What the expiring layout measures expiry and windows from.
    clock: SharedClock,
}

impl RedisSliceStore {
    /// A store on `redis` in `layout`. The book's layout needs a standalone
    /// server (its `known:` key is shared by every counter). The expiring
    /// layout measures each chunk's time to live and the window reads
    /// return from `clock`'s now, so `clock` must follow the server's (as
    /// the system clock does): Redis expires keys by its own clock.
    pub fn new(redis: Redis, layout: Layout, clock: SharedClock) -> Result<Self> {
        if layout == Layout::Ria && redis.is_cluster() {
            return Err(Error::Config(
                "the `ria` layout keeps every counter in one `known:` key, so it needs a \
                 standalone server; use the default layout on a cluster"
                    .into(),
            ));
        }
        Ok(RedisSliceStore {
            redis,
            layout,
            apply: Script::new(concat!(
                include_str!("../lua/engine_undo.lua"),
                include_str!("../lua/engine_kinds.lua"),
                include_str!("../lua/engine_apply.lua")
            )),
            apply_stats: Script::new(concat!(
                include_str!("../lua/engine_undo.lua"),
                include_str!("../lua/kind_stats.lua"),
                include_str!("../lua/engine_kinds.lua"),
                "KIND_MERGE[4] = merge_stats\n",
                include_str!("../lua/engine_apply.lua")
            )),
            apply_gauge: Script::new(concat!(
                include_str!("../lua/engine_undo.lua"),
                include_str!("../lua/kind_gauge.lua"),
                include_str!("../lua/engine_kinds.lua"),
                "KIND_MERGE[5] = merge_gauge\n",
                include_str!("../lua/engine_apply.lua")
            )),
            apply_distinct: Script::new(concat!(
                include_str!("../lua/engine_undo.lua"),
                include_str!("../lua/kind_distinct.lua"),
                include_str!("../lua/engine_kinds.lua"),
                "KIND_MERGE[2] = merge_distinct\n",
                include_str!("../lua/engine_apply.lua")
            )),
            revert: Script::new(concat!(
                include_str!("../lua/engine_undo.lua"),
                include_str!("../lua/engine_revert.lua")
            )),
            clean: Script::new(include_str!("../lua/engine_clean.lua")),
            delete: Script::new(include_str!("../lua/engine_delete.lua")),
            list: Script::new(include_str!("../lua/expiring_list.lua")),
            clock,
        })
    }

    /// The key layout in use.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The apply script of `kind`: `engine_apply.lua` with the kind's merge
    /// prepended (none for sums).
    fn apply_script(&self, kind: Kind) -> &Script {
        match kind {
            Kind::Stats => &self.apply_stats,
            Kind::Gauge => &self.apply_gauge,
            Kind::Distinct => &self.apply_distinct,
            _ => &self.apply,
        }
    }
}

#[async_trait]
impl SliceStore for RedisSliceStore {
    async fn apply(&self, batch: &Batch) -> Result<Applied> {
        self.apply_batch(batch).await
    }

    async fn read(
        &self,
        space: &Space,
        names: &[Name],
        resolutions: &[u64],
        slices: SliceSel,
    ) -> Result<Vec<Vec<Slices>>> {
        self.read_slices(space, names, resolutions, slices).await
    }

    async fn read_sums(
        &self,
        space: &Space,
        names: &[Name],
        resolutions: &[u64],
        slices: SliceSel,
    ) -> Result<Reads<i64>> {
        self.read_sum_slices(space, names, resolutions, slices)
            .await
    }

    async fn list(
        &self,
        space: &Space,
        search: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<String>> {
        self.list_space(space, search, after, limit).await
    }

    async fn contains(&self, space: &Space, names: &[Name]) -> Result<Vec<bool>> {
        self.contains_names(space, names).await
    }

    async fn delete(&self, space: &Space, name: &Name) -> Result<bool> {
        self.delete_series(space, name).await
    }

    async fn clean(&self, space: &Space, job: &CleanJob) -> Result<CleanReport> {
        self.clean_space(space, job).await
    }

    async fn ping(&self) -> Result<()> {
        self.redis.ping().await
    }
}

/// What the store's tests share.
#[cfg(test)]
mod testing {
    use super::*;

    /// A connection to `url` and a store on it in the default layout.
    pub(super) async fn default_store(url: &str) -> (Redis, RedisSliceStore) {
        let redis = Redis::connect(url).await.unwrap();
        let clock: SharedClock = std::sync::Arc::new(crate::clock::ManualClock::at(0.0));
        let store = RedisSliceStore::new(redis.clone(), Layout::default(), clock).unwrap();
        (redis, store)
    }

    /// Texts that take every listpack entry encoding (integers of each
    /// width and their edges, numbers a listpack keeps as strings, short,
    /// 12-bit and 32-bit string lengths): the DUMP parser's cases.
    pub(super) fn listpack_edge_texts() -> Vec<String> {
        [
            "0",
            "7",
            "127",
            "128",
            "-1",
            "-4096",
            "4095",
            "4096",
            "-32768",
            "32767",
            "40000",
            "-8388608",
            "8388607",
            "9000000",
            "2147483647",
            "-2147483648",
            "2147483648",
            "1700000000",
            "9223372036854775807",
            "-9223372036854775808",
            "18446744073709551616",
            "007",
            "",
            "abc",
            "12x",
            "1e3",
        ]
        .iter()
        .map(|t| t.to_string())
        .chain(["x".repeat(100), "y".repeat(5000)])
        .collect()
    }

    /// Up to 512 entries of up to 10,000 bytes stay in a hash's listpack.
    pub(super) async fn keep_long_values_in_listpacks(conn: &mut impl redis::aio::ConnectionLike) {
        for (setting, value) in [
            ("hash-max-listpack-entries", "512"),
            ("hash-max-listpack-value", "10000"),
        ] {
            let _: () = redis::cmd("CONFIG")
                .arg("SET")
                .arg(setting)
                .arg(value)
                .query_async(conn)
                .await
                .unwrap();
        }
    }
}
