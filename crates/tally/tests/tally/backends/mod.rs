//! Backends for the buffers, limits and locks suites: each on a real store
//! (SQLite in memory or in a file, a redis-server, a three-node Redis
//! Cluster), with the servers kept alive as long as the handle.

#![allow(dead_code)]

use std::path::Path;

use tally::{Backend, BackendConfig};
use tally_testkit::{RedisCluster, RedisServer};

/// Where a suite's state lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    SqliteMemory,
    SqliteFile,
    Redis,
    RedisCluster,
}

/// The servers behind a backend, stopped on drop.
#[derive(Default)]
pub struct Servers {
    pub redis: Option<RedisServer>,
    pub cluster: Option<RedisCluster>,
}

/// Starts what `kind` needs; SQLite files go under `dir`.
pub fn start(kind: Kind, dir: &Path) -> (BackendConfig, Servers) {
    let mut servers = Servers::default();
    let config = match kind {
        Kind::SqliteMemory => BackendConfig::SqliteMemory,
        Kind::SqliteFile => BackendConfig::SqliteDir(dir.to_owned()),
        Kind::Redis => BackendConfig::Redis {
            url: servers.redis.insert(RedisServer::start()).url(),
            layout: Default::default(),
        },
        Kind::RedisCluster => BackendConfig::RedisCluster {
            urls: servers.cluster.insert(RedisCluster::start()).urls(),
            layout: Default::default(),
        },
    };
    (config, servers)
}

/// Another client (own connections) on the store `config` names, or `None`
/// for SQLite in memory, which only the first client sees.
pub async fn other_client(config: &BackendConfig) -> Option<Backend> {
    if *config == BackendConfig::SqliteMemory {
        return None;
    }
    Some(Backend::open(config).await.unwrap())
}
