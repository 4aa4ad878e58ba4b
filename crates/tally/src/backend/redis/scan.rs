//! Listing keys by pattern, for the stores that keep no registry of their
//! own (daily statistics, time series) when `tally migrate` copies them.
//!
//! [`Redis::scan`] walks the keyspace with SCAN (never KEYS), a page of
//! [`SCAN_COUNT`] at a time: on a standalone server that server, on a
//! Redis Cluster every master in turn (found with CLUSTER NODES, each
//! reached by its address), so every key is seen once whatever slot it
//! lives in. SCAN's guarantee holds: a key present for the whole walk is
//! returned (perhaps twice: the result is deduplicated); one written or
//! deleted during the walk may or may not be.
//!
//! What it does not do: read the keys' contents (each store does, in its
//! own pipelines), or keep a cursor across calls.

use std::collections::BTreeSet;

use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};

use super::{Conn, Redis};
use crate::error::{Error, Result};

/// Keys asked for per SCAN call (a hint to the server).
pub const SCAN_COUNT: usize = 1000;

impl Redis {
    /// Every key matching the glob `pattern`, sorted (see the module docs).
    pub(crate) async fn scan(&self, pattern: &str) -> Result<Vec<String>> {
        let mut keys = BTreeSet::new();
        match &self.conn {
            Conn::Single(_) => {
                let mut handle = self.handle();
                let mut cursor = 0u64;
                loop {
                    let (next, page): (u64, Vec<String>) =
                        scan_cmd(cursor, pattern).query_async(&mut handle).await?;
                    keys.extend(page);
                    if next == 0 {
                        break;
                    }
                    cursor = next;
                }
            }
            Conn::Cluster(conn) => {
                let mut conn = conn.clone();
                let nodes = conn
                    .route_command(
                        redis::cmd("CLUSTER").arg("NODES").clone(),
                        RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random),
                    )
                    .await?;
                let nodes: String = redis::FromRedisValue::from_redis_value(nodes)?;
                for (host, port) in masters(&nodes)? {
                    let mut cursor = 0u64;
                    loop {
                        let answer = conn
                            .route_command(
                                scan_cmd(cursor, pattern),
                                RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress {
                                    host: host.clone(),
                                    port,
                                }),
                            )
                            .await?;
                        let (next, page): (u64, Vec<String>) =
                            redis::FromRedisValue::from_redis_value(answer)?;
                        keys.extend(page);
                        if next == 0 {
                            break;
                        }
                        cursor = next;
                    }
                }
            }
        }
        Ok(keys.into_iter().collect())
    }
}

fn scan_cmd(cursor: u64, pattern: &str) -> redis::Cmd {
    let mut cmd = redis::cmd("SCAN");
    cmd.arg(cursor)
        .arg("MATCH")
        .arg(pattern)
        .arg("COUNT")
        .arg(SCAN_COUNT);
    cmd
}

/// The (host, port) of every master that serves slots, from CLUSTER
/// NODES' text (`<id> <ip:port@cport[,hostname]> <flags> ... <slots>`).
fn masters(nodes: &str) -> Result<Vec<(String, u16)>> {
    let mut out = Vec::new();
    for line in nodes.lines().filter(|l| !l.trim().is_empty()) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let bad = || Error::Backend(format!("CLUSTER NODES answered {line:?}"));
        let (Some(address), Some(flags)) = (fields.get(1), fields.get(2)) else {
            return Err(bad());
        };
        let flags: Vec<&str> = flags.split(',').collect();
        // A master with no slots (fields 0..=7 only) holds no keys.
        if !flags.contains(&"master") || flags.contains(&"fail") || fields.len() < 9 {
            continue;
        }
        let address = address.split(['@', ',']).next().unwrap_or_default();
        let (host, port) = address.rsplit_once(':').ok_or_else(bad)?;
        out.push((host.to_owned(), port.parse().map_err(|_| bad())?));
    }
    if out.is_empty() {
        return Err(Error::Backend(
            "CLUSTER NODES named no master serving slots".into(),
        ));
    }
    Ok(out)
}

/// `text` with the glob characters of SCAN's MATCH escaped.
pub(crate) fn glob_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masters_serving_slots_are_found() {
        let nodes = "\
a1 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-5460
b2 127.0.0.1:7001@17001,host-b master - 0 1 2 connected 5461-10922
c3 127.0.0.1:7003@17003 slave a1 0 1 1 connected
d4 127.0.0.1:7004@17004 master - 0 1 4 connected
e5 127.0.0.1:7005@17005 master,fail - 0 1 5 connected 10923-16383
";
        assert_eq!(
            masters(nodes).unwrap(),
            vec![("127.0.0.1".into(), 7000), ("127.0.0.1".into(), 7001)]
        );
        assert!(masters("").is_err());
    }

    #[test]
    fn glob_characters_are_escaped() {
        assert_eq!(glob_escape("a*b?[c]\\"), "a\\*b\\?\\[c\\]\\\\");
    }
}
