//! Key layouts in Redis: pure functions from spaces and names to keys.
//!
//! - [`Layout::Ria`]: exactly the book's keys. `known:` is a sorted set of
//!   `<p>:<name>` members at score 0; `count:<p>:<name>` is a hash from slice
//!   start (decimal integer text) to count. Data written by the book's Python
//!   or Java code is read and cleaned as is. One `known:` key is touched by
//!   every write, so this layout is for a standalone server.
//! - [`Layout::Tagged`] (the default): ready for Redis Cluster. A counter
//!   lives in one of [`SHARDS`] registry shards chosen by a stable hash of its
//!   name; every key of the counter and its shard's registry share the hash
//!   tag `{<prefix>:<shard>}`, so one counter's write is one single-slot Lua
//!   call. Keys: `{<prefix>:<shard>}:names` (sorted set of names, score 0) and
//!   `{<prefix>:<shard>}:<p>:<name>` (hash, as in the book). No key is touched
//!   by every write.
//!
//! Both layouts were made for counters, and counters keep them exactly.
//! Every other space of the slice engine ([`crate::engine::Space`]) lives
//! in the tagged layout with its id after the tag
//! ([`SpaceKeys::Tagged`]): `{<prefix>:<shard>}:<space>:<p>:<name>` and
//! `{<prefix>:<shard>}:<space>:names`; on a server in the book's layout,
//! under the default prefix (as time series are). A counter's keys continue
//! with a digit after the tag, another space's with its id (a letter), so
//! the two never meet.

use std::fmt::Write as _;

use crate::engine::Space;
use crate::engine::store::WriteSeq;
use crate::error::{Error, Result};
use crate::name::Name;

/// Registry shards of the tagged layout. Fixed: changing it would orphan data.
pub const SHARDS: u32 = 64;

/// The default key prefix of the tagged layout.
pub const DEFAULT_PREFIX: &str = "tally";

/// How counters map onto Redis keys.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Layout {
    /// The book's keys, for compatibility with its code.
    Ria,
    /// Cluster-ready keys under a prefix.
    Tagged {
        /// Prepended to every key (inside the hash tag).
        prefix: String,
    },
}

impl Default for Layout {
    fn default() -> Self {
        Layout::Tagged {
            prefix: DEFAULT_PREFIX.to_owned(),
        }
    }
}

impl Layout {
    /// The tagged layout under `prefix`, which must be 1 to 64 printable
    /// characters without braces.
    pub fn tagged(prefix: &str) -> Result<Self> {
        if prefix.is_empty()
            || prefix.len() > 64
            || prefix
                .chars()
                .any(|c| c.is_control() || c == '{' || c == '}')
        {
            return Err(Error::Config(format!(
                "key prefix {prefix:?} must be 1 to 64 printable characters without braces"
            )));
        }
        Ok(Layout::Tagged {
            prefix: prefix.to_owned(),
        })
    }

    /// The prefix of the keys features other than counters keep: the
    /// tagged layout's own, the default one under the book's layout.
    pub fn key_prefix(&self) -> &str {
        match self {
            Layout::Tagged { prefix } => prefix,
            Layout::Ria => DEFAULT_PREFIX,
        }
    }

    /// Parses `ria` or `default` (with the prefix for the latter).
    pub fn parse(name: &str, prefix: &str) -> Result<Self> {
        match name {
            "ria" => Ok(Layout::Ria),
            "default" | "tagged" => Layout::tagged(prefix),
            other => Err(Error::Config(format!(
                "unknown layout {other:?}: expected `ria` or `default`"
            ))),
        }
    }
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
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in name.as_bytes() {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    (hash % u64::from(SHARDS)) as u32
}

/// `{<prefix>:<shard>}`: the hash tag of a shard.
pub fn tag(prefix: &str, shard: u32) -> String {
    format!("{{{prefix}:{shard}}}")
}

/// The registry key of a shard in the tagged layout.
pub fn tagged_registry(prefix: &str, shard: u32) -> String {
    format!("{}:names", tag(prefix, shard))
}

/// The hash key of one precision of a counter in the tagged layout.
pub fn tagged_hash(prefix: &str, precision: u64, name: &Name) -> String {
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
    Tagged {
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
            Layout::Ria => SpaceKeys::Tagged {
                prefix: DEFAULT_PREFIX,
                space: own,
            },
            Layout::Tagged { prefix } => SpaceKeys::Tagged { prefix, space: own },
        }
    }
}

impl SpaceKeys<'_> {
    /// True for the book's keys.
    pub fn is_book(&self) -> bool {
        matches!(self, SpaceKeys::Book)
    }

    /// The registry shard of a series (0 in the book's single registry).
    pub fn shard(&self, name: &str) -> u32 {
        match self {
            SpaceKeys::Book => 0,
            SpaceKeys::Tagged { .. } => shard_of(name),
        }
    }

    /// Writes the hash key of `name` at resolution `res` (in `shard`) into
    /// `buf`, replacing what it held.
    pub fn write_hash(&self, buf: &mut String, res: u64, name: &str, shard: u32) {
        buf.clear();
        let _ = match self {
            SpaceKeys::Book => write!(buf, "count:{res}:{name}"),
            SpaceKeys::Tagged {
                prefix,
                space: None,
            } => write!(buf, "{{{prefix}:{shard}}}:{res}:{name}"),
            SpaceKeys::Tagged {
                prefix,
                space: Some(space),
            } => write!(buf, "{{{prefix}:{shard}}}:{space}:{res}:{name}"),
        };
    }

    /// The hash key of `name` at resolution `res`.
    pub fn hash(&self, res: u64, name: &str) -> String {
        let mut buf = String::new();
        self.write_hash(&mut buf, res, name, self.shard(name));
        buf
    }

    /// The registry key of `shard`.
    pub fn registry(&self, shard: u32) -> String {
        match self {
            SpaceKeys::Book => RIA_KNOWN.to_owned(),
            SpaceKeys::Tagged {
                prefix,
                space: None,
            } => tagged_registry(prefix, shard),
            SpaceKeys::Tagged {
                prefix,
                space: Some(space),
            } => format!("{}:{space}:names", tag(prefix, shard)),
        }
    }

    /// Every registry key (one, or one per shard).
    pub fn registries(&self) -> Vec<String> {
        match self {
            SpaceKeys::Book => vec![RIA_KNOWN.to_owned()],
            SpaceKeys::Tagged { .. } => (0..SHARDS).map(|s| self.registry(s)).collect(),
        }
    }

    /// The key of a writer lane's record, in `shard`'s slot.
    pub fn writer(&self, seq: &WriteSeq, shard: u32) -> String {
        match self {
            SpaceKeys::Book => format!("tally-writer:{}", seq.lane_id()),
            SpaceKeys::Tagged { prefix, .. } => {
                format!("{}:writer:{}", tag(prefix, shard), seq.lane_id())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ria_keys_are_the_books() {
        assert_eq!(ria_member(5, "hits"), "5:hits");
        assert_eq!(ria_hash(5, "hits"), "count:5:hits");
        assert_eq!(ria_parse_member("5:hits"), Some((5, "hits")));
        assert_eq!(ria_parse_member("60:a:b"), Some((60, "a:b")));
        assert_eq!(ria_parse_member("x:hits"), None);
        assert_eq!(ria_parse_member("0:hits"), None);
    }

    #[test]
    fn tagged_keys_share_a_tag_per_counter() {
        let name = Name::new("hits").unwrap();
        let shard = shard_of("hits");
        assert!(shard < SHARDS);
        let reg = tagged_registry("tally", shard);
        let h = tagged_hash("tally", 60, &name);
        assert_eq!(h, format!("{{tally:{shard}}}:60:hits"));
        assert!(reg.starts_with(&format!("{{tally:{shard}}}")));
    }

    #[test]
    fn counters_keep_their_keys_and_other_spaces_get_their_own() {
        use crate::engine::{Kind, Resolution, Retention};
        let counters = Space::counters(&[60], 10);
        let stats = Space::new(
            "stats",
            Kind::Sum,
            vec![Resolution::new(60, 10)],
            Retention::Cleaner,
        )
        .unwrap();
        let shard = shard_of("hits");
        let seq = WriteSeq {
            writer: 0xab,
            lane: 2,
            seq: 9,
        };
        let book = Layout::Ria.space_keys(&counters);
        assert_eq!(book.hash(60, "hits"), "count:60:hits");
        assert_eq!(book.registry(0), "known:");
        assert_eq!(book.writer(&seq, 0), "tally-writer:00000000000000ab:2");
        let tagged = Layout::default();
        let keys = tagged.space_keys(&counters);
        assert_eq!(
            keys.hash(60, "hits"),
            tagged_hash("tally", 60, &Name::new("hits").unwrap())
        );
        assert_eq!(keys.registry(shard), tagged_registry("tally", shard));
        assert_eq!(
            keys.writer(&seq, shard),
            format!("{{tally:{shard}}}:writer:00000000000000ab:2")
        );
        let own = tagged.space_keys(&stats);
        assert_eq!(
            own.hash(60, "hits"),
            format!("{{tally:{shard}}}:stats:60:hits")
        );
        assert_eq!(
            own.registry(shard),
            format!("{{tally:{shard}}}:stats:names")
        );
        assert_eq!(own.registries().len(), SHARDS as usize);
        // A book-layout server keeps new spaces under the default prefix.
        assert_eq!(Layout::Ria.space_keys(&stats), own);
    }

    #[test]
    fn shards_are_stable_and_spread() {
        // Stable: these values are part of the on-disk format.
        assert_eq!(shard_of(""), (0xcbf2_9ce4_8422_2325u64 % 64) as u32);
        let mut seen = [0u32; SHARDS as usize];
        for i in 0..6400 {
            seen[shard_of(&format!("counter-{i}")) as usize] += 1;
        }
        assert!(seen.iter().all(|&n| n > 50 && n < 150), "{seen:?}");
    }

    #[test]
    fn prefixes_are_checked() {
        assert!(Layout::tagged("ok:prefix").is_ok());
        assert!(Layout::tagged("").is_err());
        assert!(Layout::tagged("a{b").is_err());
        assert!(Layout::parse("nope", "tally").is_err());
        assert_eq!(Layout::parse("ria", "x").unwrap(), Layout::Ria);
    }
}
