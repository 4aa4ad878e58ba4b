//! A real Redis Cluster for one test: three `redis-server` masters on free
//! ports, joined by `redis-cli --cluster create`, all slots assigned.
//!
//! Invariant: while a [`RedisCluster`] is alive, every node reports
//! `cluster_state:ok` with all 16384 slots assigned; dropping it kills every
//! node (each is a [`RedisServer`]).

use std::process::Command;
use std::time::Duration;

use crate::redis::{RedisOptions, RedisServer};
use crate::{require_binary, wait_until};

const NODES: usize = 3;

/// A running three-master Redis Cluster, killed on drop.
#[derive(Debug)]
pub struct RedisCluster {
    nodes: Vec<RedisServer>,
}

impl RedisCluster {
    /// Starts three cluster-enabled servers and joins them.
    pub fn start() -> Self {
        let cli = require_binary(
            "redis-cli",
            &[],
            "Install it with `sudo apt-get install redis-tools`",
        );
        let options = RedisOptions {
            durable: false,
            args: vec![
                ("cluster-enabled".into(), "yes".into()),
                ("cluster-config-file".into(), "nodes.conf".into()),
                ("cluster-node-timeout".into(), "5000".into()),
            ],
        };
        let nodes: Vec<RedisServer> = (0..NODES)
            .map(|_| RedisServer::start_with(options.clone()))
            .collect();
        let addrs: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port()))
            .collect();
        let out = Command::new(cli)
            .arg("--cluster")
            .arg("create")
            .args(&addrs)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .output()
            .expect("run redis-cli --cluster create");
        assert!(
            out.status.success(),
            "redis-cli --cluster create failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let ready = wait_until(Duration::from_secs(20), || {
            nodes.iter().all(|n| {
                n.command("CLUSTER INFO").is_ok_and(|info| {
                    info.contains("cluster_state:ok")
                        && info.contains("cluster_slots_assigned:16384")
                        && info.contains(&format!("cluster_known_nodes:{NODES}"))
                })
            })
        });
        assert!(ready, "the Redis Cluster did not become ready on {addrs:?}");
        RedisCluster { nodes }
    }

    /// Seed URLs, one per node.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }
}
