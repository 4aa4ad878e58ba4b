//! Whether counter hashes stay in Redis's compact listpack encoding.
//!
//! A hash is stored as a listpack (about 10 bytes per sample) while it has at
//! most `hash-max-listpack-entries` fields (default 512) of at most
//! `hash-max-listpack-value` bytes (default 64); one field more and Redis
//! converts it to a hashtable (about 64 bytes per field), and never back. A
//! counter's hash peaks just before the cleaner trims it
//! ([`crate::CounterSettings::peak_samples`]); fields are slice starts and
//! values counts, at most 20 bytes each. [`check`] reads both limits from
//! every master (`CONFIG GET`) and says whether the configured counters fit.
//! It only reads: it never changes the server's configuration.
//!
//! The check is for spaces of sums (counters). Spaces whose slices hold
//! blobs (a statistic's moments and sketch) store values longer than
//! `hash-max-listpack-value`, so their hashes are hashtables by design and
//! are not checked: no warning is due for them.

use redis::Value;
use redis::cluster_routing::{MultipleNodeRoutingInfo, RoutingInfo};

use super::{Conn, Redis};
use crate::error::{Error, Result};

/// The longest field or value a counter hash stores: a count such as
/// `-9223372036854775807` (slice starts are shorter).
pub const MAX_VALUE_BYTES: u64 = 20;

/// One server's listpack limits for hashes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeLimits {
    /// The node (`host:port`, or `server` on a standalone connection).
    pub node: String,
    /// `hash-max-listpack-entries` (or `hash-max-ziplist-entries` before 7.0).
    pub max_entries: u64,
    /// `hash-max-listpack-value` (or `hash-max-ziplist-value`).
    pub max_value: u64,
}

/// What [`check`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListpackCheck {
    /// Fields a counter hash may hold at its peak.
    pub needed_entries: u64,
    /// Each node's limits.
    pub nodes: Vec<NodeLimits>,
}

impl ListpackCheck {
    /// One message per node whose limits are too small; empty when all fit.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        for n in &self.nodes {
            if n.max_entries < self.needed_entries {
                out.push(format!(
                    "{}: hash-max-listpack-entries is {}, but a counter's hash holds up to {} \
                     samples (samples kept plus one cleaner interval of growth); its hashes will \
                     leave the compact listpack encoding and take several times the memory. \
                     Raise it (CONFIG SET hash-max-listpack-entries {}) or keep fewer samples",
                    n.node, n.max_entries, self.needed_entries, self.needed_entries
                ));
            }
            if n.max_value < MAX_VALUE_BYTES {
                out.push(format!(
                    "{}: hash-max-listpack-value is {}, below the {MAX_VALUE_BYTES} bytes a \
                     large count takes; such hashes will leave the listpack encoding",
                    n.node, n.max_value
                ));
            }
        }
        out
    }

    /// True when every node keeps counter hashes as listpacks.
    pub fn fits(&self) -> bool {
        self.problems().is_empty()
    }
}

/// Reads the listpack limits of every master and compares them with
/// `needed_entries` fields per hash.
pub async fn check(redis: &Redis, needed_entries: u64) -> Result<ListpackCheck> {
    let mut cmd = redis::cmd("CONFIG");
    cmd.arg("GET").arg("hash-max-*");
    let replies: Vec<(String, Value)> = match &redis.conn {
        Conn::Single(c) => {
            let mut c = c.clone();
            let v: Value = cmd.query_async(&mut c).await?;
            vec![("server".to_owned(), v)]
        }
        Conn::Cluster(c) => {
            let mut c = c.clone();
            let v = c
                .route_command(
                    cmd,
                    RoutingInfo::MultiNode((MultipleNodeRoutingInfo::AllMasters, None)),
                )
                .await?;
            match v {
                Value::Map(pairs) => pairs
                    .into_iter()
                    .map(|(node, v)| Ok((redis::from_redis_value::<String>(node)?, v)))
                    .collect::<Result<Vec<_>>>()?,
                other => vec![("cluster".to_owned(), other)],
            }
        }
    };
    let mut nodes = Vec::with_capacity(replies.len());
    for (node, value) in replies {
        if let Value::ServerError(e) = &value {
            return Err(Error::Backend(format!(
                "{node}: CONFIG GET hash-max-* failed: {e:?}"
            )));
        }
        let pairs: Vec<(String, String)> = redis::from_redis_value(value)
            .map_err(|e| Error::Backend(format!("{node}: unexpected CONFIG GET answer: {e}")))?;
        nodes.push(parse_limits(node, &pairs)?);
    }
    Ok(ListpackCheck {
        needed_entries,
        nodes,
    })
}

/// The limits from `CONFIG GET hash-max-*` pairs, preferring the listpack
/// names (Redis 7) over the ziplist ones (Redis 6 and older).
fn parse_limits(node: String, pairs: &[(String, String)]) -> Result<NodeLimits> {
    let find = |names: [&str; 2]| -> Result<u64> {
        for name in names {
            if let Some((_, v)) = pairs.iter().find(|(k, _)| k == name) {
                return v
                    .parse()
                    .map_err(|_| Error::Backend(format!("{node}: {name} is {v:?}, not a number")));
            }
        }
        Err(Error::Backend(format!(
            "{node}: CONFIG GET returned neither {} nor {}",
            names[0], names[1]
        )))
    };
    Ok(NodeLimits {
        max_entries: find(["hash-max-listpack-entries", "hash-max-ziplist-entries"])?,
        max_value: find(["hash-max-listpack-value", "hash-max-ziplist-value"])?,
        node,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn reads_either_generation_of_names() {
        let seven = pairs(&[
            ("hash-max-listpack-entries", "512"),
            ("hash-max-listpack-value", "64"),
            ("hash-max-ziplist-entries", "512"),
            ("hash-max-ziplist-value", "64"),
        ]);
        let l = parse_limits("a".into(), &seven).unwrap();
        assert_eq!((l.max_entries, l.max_value), (512, 64));
        let six = pairs(&[
            ("hash-max-ziplist-entries", "128"),
            ("hash-max-ziplist-value", "32"),
        ]);
        let l = parse_limits("b".into(), &six).unwrap();
        assert_eq!((l.max_entries, l.max_value), (128, 32));
        assert!(parse_limits("c".into(), &pairs(&[])).is_err());
    }

    #[test]
    fn names_the_node_and_the_setting_that_is_too_small() {
        let check = ListpackCheck {
            needed_entries: 181,
            nodes: vec![
                NodeLimits {
                    node: "n1".into(),
                    max_entries: 512,
                    max_value: 64,
                },
                NodeLimits {
                    node: "n2".into(),
                    max_entries: 128,
                    max_value: 16,
                },
            ],
        };
        assert!(!check.fits());
        let p = check.problems();
        assert_eq!(p.len(), 2, "{p:?}");
        assert!(
            p[0].starts_with("n2: hash-max-listpack-entries is 128"),
            "{p:?}"
        );
        assert!(p[0].contains("181"), "{p:?}");
        assert!(p[1].contains("hash-max-listpack-value is 16"), "{p:?}");
    }
}
