//! The Redis store's table of kinds: for each kind a space can keep here,
//! its Lua merge, the extra keys its writes carry, how a delta is sent and
//! a stored value read back, and whether a shard's applied part can be
//! taken back. Adding a kind to this store is one entry in [`KINDS`].

use redis::Value as Reply;

use super::pending::PendingQueue;
use super::super::dump;
use super::read::{reply_bytes, sum_of, sum_of_entry};
use crate::engine::kinds::{DistinctValue, Hll, StatsValue};
use crate::engine::store::check_stored;
use crate::engine::{Kind, Value};
use crate::error::{Error, Result};

/// How one kind is kept in Redis.
pub(super) struct KindStore {
    /// The kind.
    pub kind: Kind,
    /// Its Lua merge (`kind_*.lua`) and the function the file defines,
    /// prepended to `engine_apply.lua` and registered in `KIND_MERGE` under
    /// the kind's code. `None` for sums, which `engine_apply.lua` adds with
    /// HINCRBY (an exact increment runs no more Lua than it must).
    pub merge: Option<(&'static str, &'static str)>,
    /// True when each series of the call has a current-value key (gauges:
    /// after the registries, each hash's ARGV naming it), deleted with the
    /// series.
    pub current: bool,
    /// Scratch keys the merge works in, the call's last KEYS (sets: two).
    pub scratch: usize,
    /// For a kind whose hashes are read with DUMP (a listpack of
    /// integers), a stored value from its listpack entry; `None`: its
    /// hashes are read with HGETALL.
    pub dumped: Option<fn(dump::Entry<'_>) -> std::result::Result<Value, String>>,
    /// True when a shard's applied part can be taken back on a cluster
    /// (`engine_revert.lua`, by subtraction).
    pub revert: bool,
    /// True when its series can be written through a pending slice of the
    /// finest precision (`stats_fold.lua`), in the layouts that keep one
    /// ([`super::super::layout::SpaceKeys::folds`]).
    pub fold: bool,
    /// Appends a delta's bytes as the apply call sends them (sums go as
    /// integers and never come here).
    pub encode: fn(&Value, &mut Vec<u8>),
    /// A stored value from a hash field's reply.
    pub parse: fn(&Reply) -> std::result::Result<Value, String>,
    /// A pending slice's value (`stats_fold.lua`) from the reply of its
    /// field `b` and its queue, for a kind that has them.
    pub parse_pending: fn(&Reply, &PendingQueue<'_>) -> std::result::Result<Value, String>,
}

/// Every kind this store keeps.
pub(super) const KINDS: [KindStore; 4] = [
    KindStore {
        kind: Kind::Sum,
        merge: None,
        current: false,
        scratch: 0,
        dumped: Some(|e| sum_of_entry(e).map(Value::Sum)),
        revert: true,
        fold: true,
        encode: Value::encode,
        parse: |v| sum_of(v).map(Value::Sum),
        parse_pending: |b, q| {
            no_queue(q)?;
            sum_of(b).map(Value::Sum)
        },
    },
    KindStore {
        kind: Kind::Stats,
        merge: Some((include_str!("../lua/kind_stats.lua"), "merge_stats")),
        current: false,
        scratch: 0,
        dumped: None,
        revert: false,
        fold: true,
        encode: Value::encode,
        parse: |v| parse_blob(Kind::Stats, v),
        parse_pending: |b, q| {
            StatsValue::decode_pending(reply_bytes(b, "a value")?, q.string, &q.deltas)
                .map(|v| Value::Stats(Box::new(v)))
                .map_err(|e| e.to_string())
        },
    },
    KindStore {
        kind: Kind::Gauge,
        merge: Some((include_str!("../lua/kind_gauge.lua"), "merge_gauge")),
        current: true,
        scratch: 0,
        dumped: None,
        revert: false,
        fold: false,
        encode: Value::encode,
        parse: |v| parse_blob(Kind::Gauge, v),
        parse_pending: no_pending,
    },
    // Registers go as Redis's own HyperLogLog, for PFMERGE, and are kept
    // as Redis's own HyperLogLog strings.
    KindStore {
        kind: Kind::Distinct,
        merge: Some((include_str!("../lua/kind_distinct.lua"), "merge_distinct")),
        current: false,
        scratch: 2,
        dumped: None,
        revert: false,
        fold: false,
        encode: |value, out| match value {
            Value::Distinct(d) => d.encode_for_redis(out),
            other => other.encode(out),
        },
        parse: |v| {
            Hll::from_redis(reply_bytes(v, "a value")?)
                .map(|h| Value::Distinct(Box::new(DistinctValue::Registers(Box::new(h)))))
                .map_err(|e| e.to_string())
        },
        parse_pending: no_pending,
    },
];

/// The `parse_pending` of a kind without pending slices.
fn no_pending(_: &Reply, _: &PendingQueue<'_>) -> std::result::Result<Value, String> {
    Err("this kind keeps no pending slice".into())
}

/// Fails unless a pending slice has no queue (only statistics queue).
pub(super) fn no_queue(q: &PendingQueue<'_>) -> std::result::Result<(), String> {
    if q.is_none() {
        Ok(())
    } else {
        Err(format!("it holds a queue {q:?}, which only a statistic has"))
    }
}

/// A kept blob of `kind`, decoded by its codec.
fn parse_blob(kind: Kind, v: &Reply) -> std::result::Result<Value, String> {
    kind.decode(reply_bytes(v, "a value")?)
        .map_err(|e| e.to_string())
}

/// The position of `kind` in [`KINDS`], or the error of a kind this store
/// does not keep.
pub(super) fn index(kind: Kind) -> Result<usize> {
    check_stored(kind)?;
    KINDS.iter().position(|k| k.kind == kind).ok_or_else(|| {
        Error::Backend(format!(
            "internal error: the Redis store has no entry for {kind} values"
        ))
    })
}

/// The entry of `kind` ([`index`]).
pub(super) fn of(kind: Kind) -> Result<&'static KindStore> {
    index(kind).map(|i| &KINDS[i])
}

impl KindStore {
    /// The apply script's text for this kind: `engine_apply.lua` after the
    /// sums' fast path, the undo prelude, the kind's merge, its pending
    /// slices' functions (when it has them) and its line in `KIND_MERGE`.
    pub fn apply_lua(&self) -> String {
        [self.fast_lua(), &self.full_apply_lua()].concat()
    }

    /// The sums' fast path (`sum_pending.lua`, `sum_fast.lua`), first in
    /// their apply script: a busy counter's increment into its pending
    /// slice, before the full path's functions are made. Nothing for other
    /// kinds.
    fn fast_lua(&self) -> &'static str {
        match (self.fold, self.merge) {
            (true, None) => concat!(
                include_str!("../lua/sum_pending.lua"),
                include_str!("../lua/sum_fast.lua")
            ),
            _ => "",
        }
    }

    /// The apply script without [`KindStore::fast_lua`].
    pub(super) fn full_apply_lua(&self) -> String {
        self.apply_lua_with(&self.fold_prelude())
    }

    /// The apply script of calls not through pending slices (layouts that
    /// keep none, and sums of a space of few precisions): without the sums'
    /// fast path and the pending slices' functions, which such a call
    /// would make and never use.
    pub fn plain_apply_lua(&self) -> String {
        self.apply_lua_with("")
    }

    /// `engine_apply.lua` after the undo prelude, the kind's merge,
    /// `prelude` and its line in `KIND_MERGE`.
    fn apply_lua_with(&self, prelude: &str) -> String {
        let (merge, line) = match self.merge {
            Some((file, function)) => (
                file,
                format!("KIND_MERGE[{}] = {function}\n", self.kind.code()),
            ),
            None => ("", String::new()),
        };
        [
            include_str!("../lua/engine_undo.lua"),
            merge,
            prelude,
            include_str!("../lua/engine_kinds.lua"),
            &line,
            &apply_body(),
        ]
        .concat()
    }

    /// The cleaner's fold of this kind's pending slices (`engine_fold.lua`
    /// after the undo prelude, the kind's merge and the pending slices'
    /// functions), for a kind that has them.
    pub fn fold_lua(&self) -> Option<String> {
        self.fold.then(|| {
            [
                include_str!("../lua/engine_undo.lua"),
                self.merge.map_or("", |(file, _)| file),
                &self.fold_prelude(),
                include_str!("../lua/engine_fold.lua"),
            ]
            .concat()
        })
    }

    /// `stats_fold.lua` after its FOLD_SUMS line, for a kind written
    /// through pending slices; else nothing.
    fn fold_prelude(&self) -> String {
        if !self.fold {
            return String::new();
        }
        format!(
            "local FOLD_SUMS = {}\n{}",
            self.merge.is_none(),
            include_str!("../lua/stats_fold.lua")
        )
    }
}

/// Where `engine_apply.lua` takes the sums' HINCRBY loop: a line of its own.
const SUM_INCR_AT: &str = "-- @sum_incr.lua\n";

/// `engine_apply.lua` with the sums' HINCRBY loop (`sum_incr.lua`) spliced
/// in at each [`SUM_INCR_AT`]: one text for the loop of the hashes written
/// directly and that of calls not through pending slices, inline in both,
/// as a Lua function call per hash would cost Redis 3 to 4 % more.
fn apply_body() -> String {
    super::protocol::APPLY_LUA.replace(SUM_INCR_AT, include_str!("../lua/sum_incr.lua"))
}

#[cfg(test)]
mod tests {
    use super::super::protocol::APPLY_LUA;
    use super::*;

    #[test]
    fn the_hincrby_loop_is_spliced_into_both_sum_paths() {
        let at = APPLY_LUA.matches(SUM_INCR_AT).count();
        assert_eq!(at, 2, "engine_apply.lua names the loop where both sum paths take it");
        let body = apply_body();
        assert!(!body.contains(SUM_INCR_AT));
        let hincrby = |text: &str| text.matches("redis.pcall('HINCRBY', key").count();
        assert_eq!(hincrby(&body), hincrby(APPLY_LUA) + 2);
        for k in KINDS {
            assert!(!k.apply_lua().contains(SUM_INCR_AT));
            assert!(!k.plain_apply_lua().contains(SUM_INCR_AT));
        }
    }

    #[test]
    fn every_kind_kept_is_in_the_table_once() {
        for kind in [Kind::Sum, Kind::Stats, Kind::Gauge, Kind::Distinct] {
            assert_eq!(of(kind).unwrap().kind, kind);
            assert_eq!(KINDS.iter().filter(|k| k.kind == kind).count(), 1);
        }
        assert!(of(Kind::Top).is_err());
        // Only what subtraction undoes is taken back.
        assert!(KINDS.iter().all(|k| !k.revert || k.kind.has_undo()));
    }
}
