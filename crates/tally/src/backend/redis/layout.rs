//! Key layouts for counters in Redis: pure functions from names to keys.
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
