//! Key layouts in Redis: pure functions from spaces and names to keys.
//!
//! - [`Layout::Ria`]: exactly the book's keys. `known:` is a sorted set of
//!   `<p>:<name>` members at score 0; `count:<p>:<name>` is a hash from slice
//!   start (decimal integer text) to count. Data written by the book's Python
//!   or Java code is read and cleaned as is. One `known:` key is touched by
//!   every write, so this layout is for a standalone server.
//! - [`Layout::Default`] (the default): ready for Redis Cluster. A counter
//!   lives in one of [`SHARDS`] registry shards chosen by a stable hash of its
//!   name; every key of the counter and its shard's registry share the hash
//!   tag `{<prefix>:<shard>}`, so one counter's write is one single-slot Lua
//!   call. Keys: `{<prefix>:<shard>}:names` (sorted set of names, score 0) and
//!   `{<prefix>:<shard>}:<p>:<name>` (hash, as in the book). No key is touched
//!   by every write.
//!
//! - [`Layout::Expiring`]: the default layout's shards and hash tags, with
//!   retention by Redis's own expiry (the book's "ambitious" redesign), so no
//!   cleaner is needed. A precision's slices are cut into chunks of `keep`
//!   slices (a chunk starts at a multiple of `keep * p`); each chunk is a
//!   hash `{<prefix>:<shard>}:<p>@<chunk start>:<name>` that expires, set in
//!   the same Lua call that creates it, when its newest slice leaves the
//!   window (`chunk start + (2 keep - 1) p`, [`ChunkMath`]). A shard keeps
//!   `{<prefix>:<shard>}:names@e` (names, score 0, for listing in name order)
//!   and `{<prefix>:<shard>}:ends@e` (name -> when its last chunk expires,
//!   times [`ENDS_SCALE`], plus a mark of its newest chunk, see
//!   [`end_score`]), pruned by score so that a series whose data all expired
//!   is forgotten without scanning samples. A `@` never follows the
//!   precision in the other layouts' keys, so the layouts never meet.
//!
//! - [`Layout::Compact`]: the default layout's shards, hash tags and
//!   registries, with one hash per series instead of one per (series,
//!   precision): `{<prefix>:<shard>}:@:<name>`, holding every precision's
//!   slices as integer fields `(precision << 32) | slice index` (the slice
//!   index is the slice start divided by the precision; see
//!   [`compact_field`]). Redis keeps a field that reads as an integer as an
//!   integer in a listpack, so a counter counted once costs one key of seven
//!   small integers and its registry member. A `@` never stands alone after
//!   the tag in the other layouts' keys, so the layouts never meet.
//!
//! The first two layouts were made for counters, and counters keep them
//! exactly.
//! Every other space of the slice engine ([`crate::engine::Space`]) lives
//! in the default layout with its id after the tag
//! ([`SpaceKeys::Default`]): `{<prefix>:<shard>}:<space>:<p>:<name>` and
//! `{<prefix>:<shard>}:<space>:names`; on a server in the book's layout,
//! under the default prefix (as time series are). A counter's keys continue
//! with a digit after the tag, another space's with its id (a letter), so
//! the two never meet.

use std::fmt::Write as _;

use crate::engine::store::WriteSeq;
use crate::engine::{Kind, Precision, Space};
use crate::error::{Error, Result};
use crate::name::Name;

/// Registry shards of the default layout. Fixed: changing it would orphan data.
pub const SHARDS: u32 = 64;

/// The default key prefix of the default layout.
pub const DEFAULT_PREFIX: &str = "tally";

/// How counters map onto Redis keys.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Layout {
    /// The book's keys, for compatibility with its code.
    Ria,
    /// Cluster-ready keys under a prefix (the `default` layout).
    Default {
        /// Prepended to every key (inside the hash tag).
        prefix: String,
    },
    /// Cluster-ready keys under a prefix, each chunk of slices expiring by
    /// itself: no cleaner.
    Expiring {
        /// Prepended to every key (inside the hash tag).
        prefix: String,
    },
    /// Cluster-ready keys under a prefix, one hash per series holding every
    /// precision's slices (for many sparse series).
    Compact {
        /// Prepended to every key (inside the hash tag).
        prefix: String,
    },
}

impl Default for Layout {
    fn default() -> Self {
        Layout::Default {
            prefix: DEFAULT_PREFIX.to_owned(),
        }
    }
}

impl Layout {
    /// The default layout under `prefix`, which must be 1 to 64 printable
    /// characters without braces.
    pub fn default_under(prefix: &str) -> Result<Self> {
        check_prefix("key prefix", prefix)?;
        Ok(Layout::Default {
            prefix: prefix.to_owned(),
        })
    }

    /// Parses `ria`, `default`, `expiring` or `compact` (with the prefix
    /// for the latter three).
    pub fn parse(name: &str, prefix: &str) -> Result<Self> {
        match name {
            "ria" => Ok(Layout::Ria),
            "default" | "tagged" => Layout::default_under(prefix),
            "expiring" => {
                check_prefix("key prefix", prefix)?;
                Ok(Layout::Expiring {
                    prefix: prefix.to_owned(),
                })
            }
            "compact" => {
                check_prefix("key prefix", prefix)?;
                Ok(Layout::Compact {
                    prefix: prefix.to_owned(),
                })
            }
            other => Err(Error::Config(format!(
                "unknown layout {other:?}: expected `ria`, `default`, `expiring` or `compact`"
            ))),
        }
    }

    /// The layout's name as `--layout` takes it.
    pub fn name(&self) -> &'static str {
        match self {
            Layout::Ria => "ria",
            Layout::Default { .. } => "default",
            Layout::Expiring { .. } => "expiring",
            Layout::Compact { .. } => "compact",
        }
    }

    /// The prefix of the layout's keys, and of the other features' keys on
    /// this server (the default prefix in the book's layout).
    pub fn prefix(&self) -> &str {
        match self {
            Layout::Ria => DEFAULT_PREFIX,
            Layout::Default { prefix }
            | Layout::Expiring { prefix }
            | Layout::Compact { prefix } => prefix,
        }
    }

    /// True for the expiring layout (retention by Redis's expiry).
    pub fn is_expiring(&self) -> bool {
        matches!(self, Layout::Expiring { .. })
    }

    /// True for the compact layout (one hash per series).
    pub fn is_compact(&self) -> bool {
        matches!(self, Layout::Compact { .. })
    }
}

/// The most a precision can be in the compact layout: its field keeps the
/// precision in the bits above the slice index's 32, and stays a positive
/// 64-bit integer (a listpack integer).
pub const COMPACT_MAX_PRECISION: u64 = (1 << 31) - 1;

/// The compact layout's field of the slice starting at `slice` at
/// `precision` seconds: `(precision << 32) | (slice / precision)`, or why
/// it cannot hold it (a precision of 2^31 s or more, a slice index of 2^32
/// or more: at 1 s, a slice after the year 2106).
pub fn compact_field(precision: u64, slice: u64) -> Result<u64> {
    if precision == 0 || precision > COMPACT_MAX_PRECISION {
        return Err(Error::Config(format!(
            "the compact layout holds precisions of 1 to {COMPACT_MAX_PRECISION} s, not {precision}"
        )));
    }
    let index = slice / precision;
    if index >> 32 != 0 {
        return Err(Error::InvalidTime(format!(
            "the compact layout holds slices of {precision} s up to index 2^32 - 1; the slice \
             starting at {slice} is past it"
        )));
    }
    Ok((precision << 32) | index)
}

/// The slice start of compact field `field` when it is one of `precision`'s
/// (else `None`).
pub fn compact_slice(precision: u64, field: u64) -> Option<u64> {
    (field >> 32 == precision).then(|| (field & 0xffff_ffff) * precision)
}

/// Checks that the compact layout can hold `precisions` (seconds), naming
/// `what` in the error.
pub fn check_compact(what: &str, precisions: impl IntoIterator<Item = u64>) -> Result<()> {
    for p in precisions {
        if p == 0 || p > COMPACT_MAX_PRECISION {
            return Err(Error::Config(format!(
                "the compact layout keeps a precision in the high bits of an integer field, \
                 so {what} precisions must be 1 to {COMPACT_MAX_PRECISION} s, not {p}"
            )));
        }
    }
    Ok(())
}

/// Checks a key prefix (`what` names it in the error): 1 to 64 printable
/// characters without braces, which would change the keys' hash tag.
pub fn check_prefix(what: &str, prefix: &str) -> Result<()> {
    if prefix.is_empty()
        || prefix.len() > 64
        || prefix
            .chars()
            .any(|c| c.is_control() || c == '{' || c == '}')
    {
        return Err(Error::Config(format!(
            "{what} {prefix:?} must be 1 to 64 printable characters without braces"
        )));
    }
    Ok(())
}

/// The book's registry key.
pub const RIA_KNOWN: &str = "known:";

/// `<p>:<name>`: the book's registry member (and hash key suffix).
pub fn ria_member(precision: u64, name: &str) -> String {
    format!("{precision}:{name}")
}

/// `count:<p>:<name>`: the book's hash key.
pub fn ria_hash(precision: u64, name: &str) -> String {
    format!("count:{precision}:{name}")
}

/// Splits a book registry member `<p>:<name>` into its parts.
pub fn ria_parse_member(member: &str) -> Option<(u64, &str)> {
    let (p, name) = member.split_once(':')?;
    let p: u64 = p.parse().ok()?;
    (p > 0).then_some((p, name))
}

/// The registry shard of a counter: FNV-1a of its name, modulo [`SHARDS`].
pub fn shard_of(name: &str) -> u32 {
    (crate::name::fnv1a(name) % u64::from(SHARDS)) as u32
}

/// `{<prefix>:<shard>}`: the hash tag of a shard.
pub fn tag(prefix: &str, shard: u32) -> String {
    format!("{{{prefix}:{shard}}}")
}

/// The registry key of a shard in the default layout.
pub fn default_registry(prefix: &str, shard: u32) -> String {
    format!("{}:names", tag(prefix, shard))
}

/// The hash key of one precision of a counter in the default layout.
pub fn default_hash(prefix: &str, precision: u64, name: &Name) -> String {
    format!(
        "{}:{precision}:{name}",
        tag(prefix, shard_of(name.as_str()))
    )
}

/// Where one space's series live in one layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpaceKeys<'a> {
    /// The book's keys (counters in the `ria` layout): `count:<p>:<name>`,
    /// registered in `known:` as `<p>:<name>`.
    Book,
    /// Registry shards by name under a prefix; `space` is `None` for
    /// counters (their historic keys), else the space's id.
    Default {
        /// The key prefix (inside the hash tag).
        prefix: &'a str,
        /// The space's id, for every space but counters.
        space: Option<&'a str>,
    },
    /// The expiring layout: as `Default`, with a hash per chunk of slices and
    /// the `@e` registries.
    Expiring {
        /// The key prefix (inside the hash tag).
        prefix: &'a str,
        /// The space's id, for every space but counters.
        space: Option<&'a str>,
    },
    /// The compact layout: as `Default`, with one hash per series holding
    /// every precision's slices ([`compact_field`]).
    Compact {
        /// The key prefix (inside the hash tag).
        prefix: &'a str,
        /// The space's id, for every space but counters.
        space: Option<&'a str>,
    },
}

impl Layout {
    /// Where `space`'s series live in this layout.
    pub fn space_keys<'a>(&'a self, space: &'a Space) -> SpaceKeys<'a> {
        let own = (!space.is_counters()).then_some(space.id);
        match self {
            Layout::Ria if own.is_none() => SpaceKeys::Book,
            Layout::Ria => SpaceKeys::Default {
                prefix: DEFAULT_PREFIX,
                space: own,
            },
            Layout::Default { prefix } => SpaceKeys::Default { prefix, space: own },
            Layout::Expiring { prefix } => SpaceKeys::Expiring { prefix, space: own },
            Layout::Compact { prefix } => SpaceKeys::Compact { prefix, space: own },
        }
    }
}

impl SpaceKeys<'_> {
    /// True for the book's keys.
    pub fn is_book(&self) -> bool {
        matches!(self, SpaceKeys::Book)
    }

    /// True for the expiring layout's keys.
    pub fn is_expiring(&self) -> bool {
        matches!(self, SpaceKeys::Expiring { .. })
    }

    /// True for the compact layout's keys (one hash per series).
    pub fn is_compact(&self) -> bool {
        matches!(self, SpaceKeys::Compact { .. })
    }

    /// The hash field of the slice starting at `slice` at precision `res`:
    /// the slice start, or the compact layout's [`compact_field`].
    pub fn field(&self, res: u64, slice: u64) -> Result<u64> {
        if self.is_compact() {
            compact_field(res, slice)
        } else {
            Ok(slice)
        }
    }

    /// The slice start a hash field of `res`'s hash names (`None`: a field
    /// of another precision, in the compact layout's one hash per series).
    pub fn slice_of_field(&self, res: u64, field: u64) -> Option<u64> {
        if self.is_compact() {
            compact_slice(res, field)
        } else {
            Some(field)
        }
    }

    /// The registry shard of a series (0 in the book's single registry).
    pub fn shard(&self, name: &str) -> u32 {
        match self {
            SpaceKeys::Book => 0,
            SpaceKeys::Default { .. } | SpaceKeys::Expiring { .. } | SpaceKeys::Compact { .. } => {
                shard_of(name)
            }
        }
    }

    /// `{<prefix>:<shard>}` or `{<prefix>:<shard>}:<space>`: what every
    /// key of a shard starts with (not for the book's keys).
    fn write_base(&self, buf: &mut String, shard: u32) {
        let (SpaceKeys::Default { prefix, space }
        | SpaceKeys::Expiring { prefix, space }
        | SpaceKeys::Compact { prefix, space }) = self
        else {
            return;
        };
        let _ = write!(buf, "{{{prefix}:{shard}}}");
        if let Some(space) = space {
            let _ = write!(buf, ":{space}");
        }
    }

    /// Writes the key of the chunk starting at `chunk` of `name` at
    /// precision `res` (expiring layout) into `buf`, replacing what it
    /// held: `{<prefix>:<shard>}[:<space>]:<res>@<chunk>:<name>`.
    pub fn write_chunk(&self, buf: &mut String, res: u64, chunk: u64, name: &str, shard: u32) {
        buf.clear();
        self.write_base(buf, shard);
        let _ = write!(buf, ":{res}@{chunk}:{name}");
    }

    /// The key of a chunk of `name` (expiring layout).
    pub fn chunk(&self, res: u64, chunk: u64, name: &str) -> String {
        let mut buf = String::new();
        self.write_chunk(&mut buf, res, chunk, name, self.shard(name));
        buf
    }

    /// Writes `{<prefix>:<shard>}[:<space>]:<what>:<name>`, a key of series
    /// `name`'s own in its slot, into `buf`, replacing what it held.
    fn write_own(&self, buf: &mut String, what: &str, name: &str, shard: u32) {
        buf.clear();
        self.write_base(buf, shard);
        let _ = write!(buf, ":{what}:{name}");
    }

    /// [`SpaceKeys::write_own`] into a new string.
    fn own(&self, what: &str, name: &str) -> String {
        let mut buf = String::new();
        self.write_own(&mut buf, what, name, self.shard(name));
        buf
    }

    /// Writes the key of gauge `name`'s current value (the value after its
    /// latest operation) into `buf`, replacing what it held:
    /// `{<prefix>:<shard>}[:<space>]:cur:<name>`, in its series' slot.
    pub fn write_current(&self, buf: &mut String, name: &str, shard: u32) {
        self.write_own(buf, "cur", name, shard);
    }

    /// The key of gauge `name`'s current value.
    pub fn current(&self, name: &str) -> String {
        self.own("cur", name)
    }

    /// Writes the key of statistic `name`'s pending slice (`stats_fold.lua`)
    /// into `buf`, replacing what it held:
    /// `{<prefix>:<shard>}[:<space>]:pend:<name>`, in its series' slot.
    pub fn write_pending(&self, buf: &mut String, name: &str, shard: u32) {
        self.write_own(buf, "pend", name, shard);
    }

    /// The key of statistic `name`'s pending slice.
    pub fn pending(&self, name: &str) -> String {
        self.own("pend", name)
    }

    /// True when series of `kind` are written through a pending slice of
    /// the finest precision (`stats_fold.lua`): statistics in the default
    /// and compact layouts, sums (counters) in the default layout. The
    /// expiring layout writes every precision (its finest chunks expire
    /// before a fold could come); the book's keys are the book's, which
    /// its own code reads; a compact counter keeps one key (a pending
    /// slice would be a second).
    pub fn folds(&self, kind: Kind) -> bool {
        match kind {
            Kind::Stats => matches!(self, SpaceKeys::Default { .. } | SpaceKeys::Compact { .. }),
            Kind::Sum => matches!(self, SpaceKeys::Default { .. }),
            _ => false,
        }
    }

    /// Scratch key `n` of a write in `shard`'s slot (the distinct kind's
    /// merge works in two, empty before and after each call):
    /// `{<prefix>:<shard>}[:<space>]:scratch:<n>`.
    pub fn scratch(&self, shard: u32, n: usize) -> String {
        let mut buf = String::new();
        self.write_base(&mut buf, shard);
        let _ = write!(buf, ":scratch:{n}");
        buf
    }

    /// The expiring layout's sorted set of `shard`'s series to when their
    /// data ends ([`end_score`]).
    pub fn ends(&self, shard: u32) -> String {
        let mut buf = String::new();
        self.write_base(&mut buf, shard);
        buf.push_str(":ends@e");
        buf
    }

    /// Writes the hash key of `name` at precision `res` (in `shard`) into
    /// `buf`, replacing what it held.
    pub fn write_hash(&self, buf: &mut String, res: u64, name: &str, shard: u32) {
        buf.clear();
        let _ = match self {
            SpaceKeys::Book => write!(buf, "count:{res}:{name}"),
            SpaceKeys::Default {
                prefix,
                space: None,
            } => write!(buf, "{{{prefix}:{shard}}}:{res}:{name}"),
            SpaceKeys::Default {
                prefix,
                space: Some(space),
            } => write!(buf, "{{{prefix}:{shard}}}:{space}:{res}:{name}"),
            // Not one hash per precision: see `write_chunk`. The window's
            // first chunk stands for it where a key is only named.
            SpaceKeys::Expiring { .. } => {
                self.write_base(buf, shard);
                write!(buf, ":{res}@*:{name}")
            }
            // One hash per series, every precision in it.
            SpaceKeys::Compact { .. } => {
                self.write_base(buf, shard);
                write!(buf, ":@:{name}")
            }
        };
    }

    /// The hash key of `name` at precision `res`.
    pub fn hash(&self, res: u64, name: &str) -> String {
        let mut buf = String::new();
        self.write_hash(&mut buf, res, name, self.shard(name));
        buf
    }

    /// The registry key of `shard` (the compact layout's are the default
    /// layout's).
    pub fn registry(&self, shard: u32) -> String {
        match self {
            SpaceKeys::Book => RIA_KNOWN.to_owned(),
            SpaceKeys::Default {
                prefix,
                space: None,
            }
            | SpaceKeys::Compact {
                prefix,
                space: None,
            } => default_registry(prefix, shard),
            SpaceKeys::Default {
                prefix,
                space: Some(space),
            }
            | SpaceKeys::Compact {
                prefix,
                space: Some(space),
            } => format!("{}:{space}:names", tag(prefix, shard)),
            SpaceKeys::Expiring { .. } => {
                let mut buf = String::new();
                self.write_base(&mut buf, shard);
                buf.push_str(":names@e");
                buf
            }
        }
    }

    /// Every registry key (one, or one per shard).
    pub fn registries(&self) -> Vec<String> {
        match self {
            SpaceKeys::Book => vec![RIA_KNOWN.to_owned()],
            SpaceKeys::Default { .. } | SpaceKeys::Expiring { .. } | SpaceKeys::Compact { .. } => {
                (0..SHARDS).map(|s| self.registry(s)).collect()
            }
        }
    }

    /// The key of a writer lane's record, in `shard`'s slot.
    pub fn writer(&self, seq: &WriteSeq, shard: u32) -> String {
        match self {
            SpaceKeys::Book => format!("tally-writer:{}", seq.lane_id()),
            SpaceKeys::Default { prefix, .. }
            | SpaceKeys::Expiring { prefix, .. }
            | SpaceKeys::Compact { prefix, .. } => {
                format!("{}:writer:{}", tag(prefix, shard), seq.lane_id())
            }
        }
    }
}

/// The scale of the expiring layout's `ends@e` scores: a score is
/// `end * ENDS_SCALE + mark` (see [`end_score`]).
pub const ENDS_SCALE: u64 = 1 << 19;

/// The mark of a write that proves nothing about which chunks exist: the
/// next write of the series sets its chunks' expiry again.
pub const NO_MARK: u64 = ENDS_SCALE - 1;

/// Chunk math of the expiring layout for one precision: a chunk holds
/// `keep` consecutive slices and starts at a multiple of `keep * seconds`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkMath {
    /// The precision.
    pub precision: Precision,
}

impl ChunkMath {
    /// The chunk math of `precision`.
    pub fn new(precision: Precision) -> Self {
        ChunkMath { precision }
    }

    /// Seconds a chunk covers: `keep` slices.
    pub fn span(&self) -> u64 {
        self.precision.seconds.saturating_mul(self.precision.keep)
    }

    /// The start of the chunk holding the slice that starts at `slice`.
    pub fn chunk_of(&self, slice: u64) -> u64 {
        slice / self.span() * self.span()
    }

    /// When the chunk starting at `chunk` expires: when the last slice that
    /// starts in it leaves the window of `keep` slices (a slice starting at
    /// `s` is kept while `now < s + keep * seconds`).
    pub fn expiry(&self, chunk: u64) -> u64 {
        let last = self
            .precision
            .slice_of_second(chunk.saturating_add(self.span() - 1));
        last.saturating_add(self.span())
    }

    /// The chunks a read at `now` looks at, oldest first, for slices
    /// starting in `[from, to]`: those of the kept window (the current
    /// slice and the `keep - 1` before it) and of the chunk after the
    /// current one (writes a little ahead of this clock), within the range.
    /// Empty when the range misses them all.
    pub fn chunks(&self, now: crate::clock::Timestamp, from: u64, to: u64) -> Vec<u64> {
        let lo = from.max(self.precision.oldest_kept(now));
        let current = self.chunk_of(self.precision.slice_start(now));
        let hi = to.min(current.saturating_add(2 * self.span()).saturating_sub(1));
        if lo > hi {
            return Vec::new();
        }
        let (first, last) = (self.chunk_of(lo), self.chunk_of(hi));
        (0..)
            .map(|i: u64| first + i * self.span())
            .take_while(|&c| c <= last)
            .collect()
    }
}

/// The `ends@e` score of one write of a series: when its newest chunk
/// written expires (`end`, seconds), and a mark that lets the next write
/// of the same chunks skip setting their expiry again.
///
/// The mark is the finest precision's chunk number (modulo [`NO_MARK`])
/// when the write covers every precision of the space and its finest
/// cells are all in one chunk, and the space's chunks nest (every span is a
/// multiple of the finest one, at most [`NO_MARK`] times it): then a later
/// write with the very same score writes only into chunks this write
/// created and gave an expiry. Otherwise the mark is [`NO_MARK`], which no
/// such write has, and the write sets its chunks' expiry itself.
pub fn end_score(end: u64, finest: Option<(ChunkMath, u64)>, spans_nest: bool) -> (u64, bool) {
    let mark = match finest {
        Some((math, chunk)) if spans_nest => (chunk / math.span()) % NO_MARK,
        _ => NO_MARK,
    };
    // Scores are doubles in Redis and Lua: exact below 2^53, so `end` is
    // held below 2^34 (the year 2514).
    let end = end.min((1 << 34) - 1);
    (end * ENDS_SCALE + mark, mark == NO_MARK)
}

/// True when every span of `precisions` is a multiple of the finest's, at
/// most [`NO_MARK`] times it (so a chunk of the finest lies in one chunk of
/// each other precision, and a run of equal `end`s covers fewer finest
/// chunks than marks exist).
pub fn spans_nest(precisions: &[Precision]) -> bool {
    let Some(finest) = precisions.iter().map(|r| ChunkMath::new(*r).span()).min() else {
        return false;
    };
    precisions.iter().all(|r| {
        let span = ChunkMath::new(*r).span();
        finest > 0 && span.is_multiple_of(finest) && span / finest < NO_MARK
    })
}

#[cfg(test)]
mod tests;
