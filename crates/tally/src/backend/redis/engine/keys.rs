//! What a key layout answers for the store's operations: the keys of a
//! write, the registry members, what to delete, how to read, list and
//! clean. Each operation asks its [`SpaceKeys`] here instead of testing
//! which layout it is in; the keys themselves are `layout.rs`'s.
//!
//! - the book's (`ria`): one `known:` registry of `<p>:<name>` members, so
//!   a batch is one call, listed one precision's range at a time, cleaned
//!   by the book's rule; nothing to take back.
//! - the default: a hash per (series, precision), registry
//!   shards of names, cleaned shard by shard.
//! - the expiring: a hash per (series, precision, chunk) that expires by
//!   itself, each shard's registry with its `ends@e`; listing prunes what
//!   expired, and nothing is cleaned.
//! - the compact: the default's registry shards, listing and cleaning, with
//!   one hash per series whose fields carry their precision
//!   ([`SpaceKeys::field`]): a write sends each cell's field, a read asks
//!   for a series' hash once and splits it by precision, a clean names each
//!   precision's old fields in the one hash.

use super::super::expiring::{self, Groups};
use super::super::layout::{self, SpaceKeys};
use super::clean::Trim;
use crate::clock::Timestamp;
use crate::engine::{Kind, SeriesWrite, SliceSel, Space};
use crate::error::Result;

/// How a layout lists a space's series.
pub(super) enum Listing {
    /// One ZRANGEBYLEX range per precision present in the book's `known:`.
    BookPrecisions,
    /// One range per registry shard, merged a page at a time.
    Shards,
    /// One `expiring_list.lua` call per shard, which prunes first.
    Pruning,
}

/// How a layout cleans a space.
pub(super) enum Cleaning {
    /// The book's `known:`, each member's precision from the member.
    Book,
    /// Each registry shard, with the space's precisions.
    Shards,
    /// Nothing: Redis's expiry does it.
    Nothing,
}

/// What deleting a series removes: registry keys (and the members to take
/// out of each), then hashes.
pub(super) struct Deletion {
    pub registries: Vec<String>,
    pub members: Vec<String>,
    pub hashes: Vec<String>,
}

impl SpaceKeys<'_> {
    /// True when a batch is one call whatever its shards: on a standalone
    /// server, or in the book's single registry.
    pub(super) fn one_call(&self, cluster: bool) -> bool {
        !cluster || self.is_book()
    }

    /// The hashes a write touches, in KEYS order: one per (series,
    /// precision), or per (series, precision, chunk) where chunks expire.
    pub(super) fn groups<'a>(
        &self,
        space: &Space,
        writes: &[&'a SeriesWrite],
        now: Timestamp,
    ) -> Result<Groups<'a>> {
        if self.is_expiring() {
            expiring::groups(space, writes, now)
        } else if self.is_compact() && space.kind != Kind::Gauge {
            // One hash per series. Gauges keep a group per precision: their
            // merge runs each precision's cells from the current value.
            Ok(Groups::by_series(writes))
        } else {
            Ok(Groups::by_precision(writes))
        }
    }

    /// Writes the key of a written hash (precision `res`, chunk `chunk`
    /// as [`SpaceKeys::groups`] gave it) into `buf`.
    pub(super) fn write_group(
        &self,
        buf: &mut String,
        res: u64,
        chunk: u64,
        name: &str,
        shard: u32,
    ) {
        if self.is_expiring() {
            self.write_chunk(buf, res, chunk, name, shard);
        } else {
            self.write_hash(buf, res, name, shard);
        }
    }

    /// The key of the hash holding `name`'s slice `slice` at `res`.
    pub(super) fn cell_hash(
        &self,
        space: &Space,
        res: u64,
        slice: u64,
        name: &str,
    ) -> Result<String> {
        Ok(if self.is_expiring() {
            self.chunk(res, expiring::math(space, res)?.chunk_of(slice), name)
        } else {
            self.hash(res, name)
        })
    }

    /// The registry and (expiring layout) its `ends@e` of `shard`, in the
    /// order calls carry them.
    pub(super) fn registry_keys(&self, shard: u32) -> (String, Option<String>) {
        (
            self.registry(shard),
            self.is_expiring().then(|| self.ends(shard)),
        )
    }

    /// True when a call registers a series with its `ends@e` score (the
    /// expiring layout) rather than by its members ([`SpaceKeys::write_member`]).
    pub(super) fn keeps_ends(&self) -> bool {
        self.is_expiring()
    }

    /// The number of registry members of a series written in `hashes`
    /// hashes: one per precision in the book's `known:`, else one.
    pub(super) fn members_of(&self, hashes: usize) -> usize {
        if self.is_book() { hashes } else { 1 }
    }

    /// Writes `name`'s registry member for its hash at `res` into `buf`.
    pub(super) fn write_member(&self, buf: &mut String, res: u64, name: &str) {
        use std::fmt::Write;
        buf.clear();
        if self.is_book() {
            let _ = write!(buf, "{res}:{name}");
        } else {
            buf.push_str(name);
        }
    }

    /// True when a shard's applied part of a failed batch must be taken
    /// back (not in the book's layout, whose batch is one call).
    pub(super) fn takes_back(&self) -> bool {
        !self.is_book()
    }

    /// The scale of `ends@e` scores that a revert resets marks with (0
    /// where no `ends@e` is kept).
    pub(super) fn ends_scale(&self) -> u64 {
        if self.is_expiring() {
            layout::ENDS_SCALE
        } else {
            0
        }
    }

    /// Per precision: the hashes a read looks at (chunk starts; one
    /// stand-in where a precision is one hash) and the slices it keeps
    /// (the window's only, where chunks expire).
    pub(super) fn read_plan(
        &self,
        space: &Space,
        precisions: &[u64],
        sel: SliceSel,
        now: impl FnOnce() -> Timestamp,
    ) -> Result<Vec<(Vec<u64>, SliceSel)>> {
        if !self.is_expiring() {
            return Ok(precisions.iter().map(|_| (vec![0], sel)).collect());
        }
        let now = now();
        let (from, to) = match sel {
            SliceSel::All => (0, u64::MAX),
            SliceSel::Range { from, to } => (from, to),
        };
        precisions
            .iter()
            .map(|&r| {
                let m = expiring::math(space, r)?;
                let from = from.max(m.precision.oldest_kept(now));
                Ok((m.chunks(now, from, to), SliceSel::Range { from, to }))
            })
            .collect()
    }

    /// The key a read asks for: `name`'s hash at `res`, chunk `chunk` of
    /// [`SpaceKeys::read_plan`].
    pub(super) fn read_key(&self, res: u64, chunk: u64, name: &str) -> String {
        if self.is_expiring() {
            self.chunk(res, chunk, name)
        } else {
            self.hash(res, name)
        }
    }

    /// True when every precision of a series is in one hash, which a read
    /// asks for once.
    pub(super) fn one_hash(&self) -> bool {
        self.is_compact()
    }

    /// How the layout lists.
    pub(super) fn listing(&self) -> Listing {
        match self {
            SpaceKeys::Book => Listing::BookPrecisions,
            SpaceKeys::Default { .. } | SpaceKeys::Compact { .. } => Listing::Shards,
            SpaceKeys::Expiring { .. } => Listing::Pruning,
        }
    }

    /// True when whether a series exists is asked of its registry by name
    /// (ZSCORE); the book's registry holds a member per precision, and the
    /// expiring one is pruned by its listing, so those list instead.
    pub(super) fn scores_names(&self) -> bool {
        matches!(self, SpaceKeys::Default { .. } | SpaceKeys::Compact { .. })
    }

    /// How the layout cleans.
    pub(super) fn cleaning(&self) -> Cleaning {
        match self {
            SpaceKeys::Book => Cleaning::Book,
            SpaceKeys::Default { .. } | SpaceKeys::Compact { .. } => Cleaning::Shards,
            SpaceKeys::Expiring { .. } => Cleaning::Nothing,
        }
    }

    /// What a clean removes from the hash a series keeps at `res`, named
    /// as that hash's fields: the slices themselves, or in the compact
    /// layout's one hash their precision's fields.
    pub(super) fn trim_at(&self, res: u64, trim: Option<Trim>) -> Option<Trim> {
        if self.is_compact() {
            trim.and_then(|t| t.compact(res))
        } else {
            trim
        }
    }

    /// What deleting `name` removes: every hash that can still exist (in
    /// the expiring layout, the chunks not yet expired at `now`).
    pub(super) fn deletion(
        &self,
        space: &Space,
        name: &str,
        now: impl FnOnce() -> Timestamp,
    ) -> Result<Deletion> {
        let shard = self.shard(name);
        let (registry, ends) = self.registry_keys(shard);
        let mut registries = vec![registry];
        registries.extend(ends);
        let mut hashes = Vec::new();
        let members = if self.is_expiring() {
            let now = now();
            for r in &space.precisions {
                let m = expiring::math(space, r.seconds)?;
                for chunk in m.chunks(now, 0, u64::MAX) {
                    hashes.push(self.chunk(r.seconds, chunk, name));
                }
            }
            vec![name.to_owned()]
        } else if self.is_compact() {
            hashes.push(self.hash(0, name));
            vec![name.to_owned()]
        } else {
            for r in &space.precisions {
                hashes.push(self.hash(r.seconds, name));
            }
            if self.is_book() {
                space
                    .precisions
                    .iter()
                    .map(|r| layout::ria_member(r.seconds, name))
                    .collect()
            } else {
                vec![name.to_owned()]
            }
        };
        Ok(Deletion {
            registries,
            members,
            hashes,
        })
    }
}
