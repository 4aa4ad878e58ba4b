//! The engine's store in Redis: every space, in either key layout (see
//! [`super::layout`]), standalone or on a cluster.
//!
//! A write is one Lua call (`engine_apply.lua`) that merges every delta of
//! the batch and registers every series, all or nothing: sums with
//! HINCRBY, taken back by subtraction when one overflows; blob kinds with
//! their kind's Lua merge (`kind_*.lua`, dispatched by kind code through
//! `engine_kinds.lua`), taken back by restoring the values they held.
//! Statistics in the default and compact layouts go through a pending
//! slice per statistic (`stats_fold.lua`): an exact write of one
//! observation merges into it, and the write that opens a later finest
//! slice folds it into the finest precision and the accumulator of the
//! coarser ones, merged into them when they change (the cleaner, before it
//! trims, folds both into every precision: `engine_fold.lua`); reads add
//! both ([`read`]). Busy counters in the default
//! layout do the same with a count (opened by a slice's second write, so
//! that a counter written once a slice keeps its hashes only).
//! Distinct values are kept as Redis's own HyperLogLog strings, merged by
//! PFADD and PFMERGE in two scratch keys of the call's slot
//! (`kind_distinct.lua`) and read back into [`crate::engine::kinds::Hll`]
//! in Rust. On a
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
//! Reads are pipelines of one command per series and precision (one
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
//!
//! Files, one per operation: `apply.rs`, `revert.rs`, `read.rs`, `list.rs`,
//! `clean.rs`, `delete.rs`. What differs between layouts is answered by
//! the layout (`keys.rs`: the keys of a write, the registry members, what
//! to delete, how to read, list and clean); what differs between kinds is
//! one entry each in `kinds.rs` (Lua merge, extra keys, encoding, whether
//! it can be taken back); the `KEYS`/`ARGV` of the write calls are built
//! in `protocol.rs` and read by the protocol part of `engine_apply.lua`.

mod apply;
mod clean;
mod delete;
mod keys;
mod kinds;
mod list;
mod old_fields;
mod pending;
mod protocol;
mod read;
mod revert;
mod rewrite;

use async_trait::async_trait;
use redis::Script;

use super::Redis;
use super::layout::Layout;
use crate::clock::SharedClock;
use crate::engine::store::{Reads, collapse_by_pages};
use crate::engine::{
    Applied, Batch, CleanJob, CleanReport, Kind, SeriesList, SliceRead, SliceStore, Slices, Space,
};
use crate::error::{Error, Result};
use crate::name::Name;

/// Counters' pending slices as last seen: key to finest field, at most
/// [`PENDING_AT_MAX`] of them (emptied when full: a counter forgotten
/// only takes the full call once more).
type PendingAt = std::collections::HashMap<String, u64>;

/// The most pending slices a store remembers.
const PENDING_AT_MAX: usize = 100_000;

/// Every space's values in Redis.
#[derive(Clone, Debug)]
pub struct RedisSliceStore {
    redis: Redis,
    layout: Layout,
    /// `engine_apply.lua` of each kind of [`kinds::KINDS`], in its order,
    /// for calls through pending slices: with the kind's merge prepended
    /// (none for sums), its pending slices' functions and, for sums, the
    /// fast path ([`kinds::KindStore::apply_lua`]).
    apply: [Script; kinds::KINDS.len()],
    /// The same without the pending slices' functions, for calls not
    /// through them ([`protocol::Route`]).
    apply_plain: [Script; kinds::KINDS.len()],
    revert: Script,
    clean: Script,
    /// `hash_rewrite.lua`: a first pass's many removals from one listpack
    /// as one `RESTORE`.
    rewrite: Script,
    /// `engine_fold.lua` of each kind of [`kinds::KINDS`] written through
    /// pending slices: those slices folded before a clean.
    fold: [Option<Script>; kinds::KINDS.len()],
    delete: Script,
    /// `expiring_list.lua` (the expiring layout's listing).
    list: Script,
    /// `sum_short.lua`: a busy counter's increment into its pending slice.
    short: Script,
    /// `pending_read.lua`: many series' pending slices in one call.
    pending_read: Script,
    /// Where each counter's pending slice was last seen (its key: its
    /// finest field), from the answers of this store's calls: a write into
    /// that slice is sent as the short call ([`apply`]).
    pending_at: std::sync::Arc<std::sync::Mutex<PendingAt>>,
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
            apply: std::array::from_fn(|i| Script::new(&kinds::KINDS[i].apply_lua())),
            apply_plain: std::array::from_fn(|i| {
                Script::new(&kinds::KINDS[i].plain_apply_lua())
            }),
            revert: lua!("engine_undo", "engine_revert"),
            clean: lua!("engine_clean"),
            rewrite: lua!("hash_rewrite"),
            fold: std::array::from_fn(|i| kinds::KINDS[i].fold_lua().map(|l| Script::new(&l))),
            delete: lua!("engine_delete"),
            list: lua!("expiring_list"),
            short: Script::new(protocol::SHORT_LUA),
            pending_read: lua!("pending_read"),
            pending_at: Default::default(),
            clock,
        })
    }

    /// The key layout in use.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The apply script of `kind` for calls on `route`, and the kind's
    /// entry in the table of kinds.
    fn apply_script(
        &self,
        kind: Kind,
        route: protocol::Route,
    ) -> Result<(&Script, &'static kinds::KindStore)> {
        let i = kinds::index(kind)?;
        let scripts = if route.pending() {
            &self.apply
        } else {
            &self.apply_plain
        };
        Ok((&scripts[i], &kinds::KINDS[i]))
    }
}

#[async_trait]
impl SliceStore for RedisSliceStore {
    async fn apply(&self, batch: &Batch) -> Result<Applied> {
        self.apply_batch(batch).await
    }

    async fn read(&self, read: SliceRead<'_>) -> Result<Vec<Vec<Slices>>> {
        self.read_slices(read).await
    }

    async fn read_sums(&self, read: SliceRead<'_>) -> Result<Reads<i64>> {
        self.read_sum_slices(read).await
    }

    async fn list(&self, list: SeriesList<'_>) -> Result<Vec<String>> {
        match list.collapse {
            Some(_) => collapse_by_pages(self, list).await,
            None => self.list_space(list).await,
        }
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

#[cfg(test)]
mod sum_fast_tests;
#[cfg(test)]
pub(super) mod testing;
