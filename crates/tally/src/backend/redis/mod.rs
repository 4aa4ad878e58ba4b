//! The Redis backend: connections, scripts, the slice engine's store
//! ([`RedisSliceStore`], serving counters and every other space) and each
//! other feature's Redis store.
//!
//! [`Redis`] is a connection to a standalone server (a `ConnectionManager`,
//! which reconnects by itself with backoff after the server restarts) or to a
//! Redis Cluster (redis-rs's cluster connection, which follows MOVED and ASK).
//! Lua lives in `lua/*.lua`, loaded through `redis::Script` (EVALSHA, reloaded
//! after a restart). Every key a script touches comes in through `KEYS`, and
//! the keys of one call share a hash tag, so the same code runs on a cluster.
//!
//! Pipelines are only ever built for one slot on a cluster (redis-rs rejects
//! cross-slot pipelines there); [`Redis::run_pipelines`] sends per-slot
//! pipelines concurrently on a cluster and merged into one on a standalone
//! server, so either way a logical operation costs one round trip (per node).
//!
//! Replication is asynchronous in Redis: a write acknowledged by a master can
//! be lost if the master fails before its replica received it. With
//! [`Redis::with_replication_wait`], every write script is followed, in the
//! same pipeline on the same connection, by `WAIT replicas timeout`; a write
//! that fewer replicas confirmed in time fails with
//! [`Error::NotReplicated`] (it was applied on the master: retry it with the
//! same write id). That narrows, and with one replica per master closes, the
//! window in which a failover loses acknowledged writes; it is not a
//! consensus protocol (see Redis's own documentation of WAIT).
//!
//! Without the `redis` feature only the configuration stays: [`layout`] and
//! [`ReplicationWait`], which a [`super::BackendConfig`] names in any build.

/// Declares each item only with the `redis` feature (one `cfg` for the
/// list, as tokio's `cfg_*!` macros do).
macro_rules! with_redis {
    ($($item:item)*) => {
        $(#[cfg(feature = "redis")] $item)*
    };
}

/// The script made of the named files of `lua/`, in order, as one text
/// (a helper such as `once.lua` comes before the script that calls it):
/// `lua!("once", "int", "limit_fixed")` is `once.lua`, `int.lua` and
/// `limit_fixed.lua`.
#[cfg(feature = "redis")]
macro_rules! lua {
    ($($file:literal),+ $(,)?) => {
        ::redis::Script::new(concat!($(include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/src/backend/redis/lua/",
            $file,
            ".lua"
        ))),+))
    };
}

with_redis! {
    mod buffers;
    mod daily;
    mod dump;
    pub mod encoding;
    mod engine;
    mod exclusive;
    mod expiring;
    mod idempotency;
    mod limits;
    mod locks;
    mod once;
    mod scan;
    mod tsdb;
}
pub mod layout;

use std::time::Duration;

#[cfg(feature = "redis")]
use {
    futures::future::try_join_all,
    redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig},
    redis::cluster::ClusterClient,
    redis::cluster_async::ClusterConnection,
    redis::{Cmd, Pipeline, RedisFuture, Script, Value},
};

pub use layout::Layout;
#[cfg(feature = "redis")]
pub use {
    buffers::RedisBufferStore, daily::RedisDailyStore, encoding::ListpackCheck,
    engine::RedisSliceStore, idempotency::RedisIdempotencyStore, limits::RedisLimiterStore,
    locks::RedisLockStore, tsdb::RedisTsdbStore,
};

#[cfg(feature = "redis")]
use crate::error::{Error, Result};

/// Time allowed for one command's answer before the call fails.
#[cfg(feature = "redis")]
pub const RESPONSE_TIMEOUT: Duration = Duration::from_secs(10);
/// Time allowed to open a connection.
#[cfg(feature = "redis")]
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// A connection to Redis, standalone or cluster. Cheap to clone: clones
/// share the underlying multiplexed connection.
#[cfg(feature = "redis")]
#[derive(Clone)]
pub struct Redis {
    conn: Conn,
    wait: Option<ReplicationWait>,
    /// Connections of their own, for a `WATCH` ([`exclusive::Exclusive`]);
    /// none on a cluster.
    exclusive: Option<std::sync::Arc<exclusive::Exclusive>>,
}

/// Wait for replicas after each write (`WAIT replicas timeout`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplicationWait {
    /// Replicas that must confirm a write.
    pub replicas: u32,
    /// How long to wait for them.
    pub timeout: Duration,
}

#[cfg(feature = "redis")]
#[derive(Clone)]
enum Conn {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

#[cfg(feature = "redis")]
impl std::fmt::Debug for Redis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.conn {
            Conn::Single(_) => "standalone",
            Conn::Cluster(_) => "cluster",
        };
        f.debug_struct("Redis")
            .field("kind", &kind)
            .field("wait", &self.wait)
            .finish()
    }
}

#[cfg(feature = "redis")]
impl Redis {
    /// Connects to a standalone server: `redis://[user:password@]host:port[/db]`
    /// or `rediss://` for TLS (verified against the system's roots, or the
    /// file named by `SSL_CERT_FILE`).
    pub async fn connect(url: &str) -> Result<Self> {
        install_tls_provider();
        let shown = redact(url);
        let client = redis::Client::open(url)
            .map_err(|e| Error::Config(format!("invalid Redis URL {shown:?}: {e}")))?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_response_timeout(Some(RESPONSE_TIMEOUT))
            .set_number_of_retries(4)
            .set_max_delay(Duration::from_secs(1));
        // One plain attempt first, so refused credentials fail at once rather
        // than after the manager's retries (which are for a restarting server).
        let probe = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_response_timeout(Some(RESPONSE_TIMEOUT));
        if let Err(e) = client
            .get_multiplexed_async_connection_with_config(&probe)
            .await
            && let err @ Error::Config(_) = connect_error(&shown, &e)
        {
            return Err(err);
        }
        let manager = ConnectionManager::new_with_config(client.clone(), config)
            .await
            .map_err(|e| connect_error(&shown, &e))?;
        Ok(Redis {
            conn: Conn::Single(manager),
            wait: None,
            exclusive: Some(std::sync::Arc::new(exclusive::Exclusive::new(client))),
        })
    }

    /// Connects to a Redis Cluster through any of its nodes (seed URLs).
    pub async fn connect_cluster(urls: &[String]) -> Result<Self> {
        install_tls_provider();
        if urls.is_empty() {
            return Err(Error::Config(
                "a cluster needs at least one seed URL".into(),
            ));
        }
        let client = ClusterClient::builder(urls.iter().map(String::as_str))
            .connection_timeout(CONNECT_TIMEOUT)
            .response_timeout(RESPONSE_TIMEOUT)
            .retries(8)
            .build()
            .map_err(|e| {
                let shown: Vec<String> = urls.iter().map(|u| redact(u)).collect();
                Error::Config(format!("invalid cluster URLs {shown:?}: {e}"))
            })?;
        let conn = client.get_async_connection().await.map_err(|e| {
            let shown: Vec<String> = urls.iter().map(|u| redact(u)).collect();
            connect_error(&format!("the Redis Cluster at {}", shown.join(",")), &e)
        })?;
        Ok(Redis {
            conn: Conn::Cluster(conn),
            wait: None,
            exclusive: None,
        })
    }

    /// The same connection, with every write followed by a wait for
    /// `wait.replicas` replicas (see the module docs).
    pub fn with_replication_wait(mut self, wait: Option<ReplicationWait>) -> Self {
        self.wait = wait;
        self
    }

    /// The replication wait in force, if any.
    pub fn replication_wait(&self) -> Option<ReplicationWait> {
        self.wait
    }

    /// Runs a write script on the slot of its keys (EVALSHA, loading the
    /// script on NOSCRIPT), followed by WAIT in the same pipeline when a
    /// replication wait is set. Server errors come back as `Err` for the
    /// caller to map; too few replicas is [`Error::NotReplicated`].
    pub(crate) async fn eval_write<A: redis::ToRedisArgs + Sync>(
        &self,
        script: &Script,
        keys: &[String],
        args: &[A],
    ) -> std::result::Result<Value, WriteFailure> {
        let mut eval = evalsha(script, keys.len());
        eval.arg(keys).arg(args);
        self.eval_cmd(script, &eval).await
    }

    /// Runs `eval`, an EVALSHA of `script` built with [`evalsha`], as
    /// [`Redis::eval_write`] does: loads the script once on NOSCRIPT, and
    /// follows it with WAIT in the same pipeline when a replication wait is
    /// set. Building the command directly spares a copy of every argument.
    pub(crate) async fn eval_cmd(
        &self,
        script: &Script,
        eval: &Cmd,
    ) -> std::result::Result<Value, WriteFailure> {
        let mut loaded = false;
        loop {
            let result = match self.wait {
                None => eval.query_async::<Value>(&mut self.handle()).await,
                Some(wait) => {
                    let mut pipe = redis::pipe();
                    pipe.add_command(eval.clone())
                        .cmd("WAIT")
                        .arg(wait.replicas)
                        .arg(wait.timeout.as_millis() as u64);
                    match pipe.query_async::<(Value, i64)>(&mut self.handle()).await {
                        Ok((_, confirmed)) if confirmed < i64::from(wait.replicas) => {
                            return Err(WriteFailure::Tally(Error::NotReplicated {
                                confirmed: confirmed.max(0) as u32,
                                wanted: wait.replicas,
                            }));
                        }
                        Ok((value, _)) => Ok(value),
                        Err(e) => Err(e),
                    }
                }
            };
            match result {
                Err(e)
                    if !loaded
                        && e.kind()
                            == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) =>
                {
                    script
                        .prepare_invoke()
                        .load_async(&mut self.handle())
                        .await
                        .map_err(WriteFailure::Redis)?;
                    loaded = true;
                }
                other => return other.map_err(WriteFailure::Redis),
            }
        }
    }

    /// True when connected to a Redis Cluster.
    pub fn is_cluster(&self) -> bool {
        matches!(self.conn, Conn::Cluster(_))
    }

    /// A handle to send commands on (cheap clone of the shared connection).
    pub fn handle(&self) -> RedisHandle {
        RedisHandle {
            conn: self.conn.clone(),
        }
    }

    /// Runs one pipeline (its commands in one slot on a cluster): its
    /// replies, in its commands' order.
    pub(crate) async fn run_pipeline(&self, pipe: Pipeline) -> Result<Vec<Value>> {
        Ok(self
            .run_pipelines(vec![pipe])
            .await?
            .pop()
            .unwrap_or_default())
    }

    /// Runs one pipeline per slot group: merged into one pipeline on a
    /// standalone server, sent concurrently on a cluster. Results come back in
    /// the order of the groups, each group's in its commands' order.
    pub async fn run_pipelines(&self, groups: Vec<Pipeline>) -> Result<Vec<Vec<Value>>> {
        match &self.conn {
            Conn::Single(_) => {
                let sizes: Vec<usize> = groups.iter().map(|p| p.cmd_iter().count()).collect();
                let mut merged = redis::pipe();
                for group in &groups {
                    for cmd in group.cmd_iter() {
                        merged.add_command(cmd.clone());
                    }
                }
                if merged.cmd_iter().next().is_none() {
                    return Ok(sizes.iter().map(|_| Vec::new()).collect());
                }
                let mut values: Vec<Value> = merged.query_async(&mut self.handle()).await?;
                let mut out = Vec::with_capacity(groups.len());
                let mut rest = values.drain(..);
                for size in sizes {
                    out.push(rest.by_ref().take(size).collect());
                }
                Ok(out)
            }
            Conn::Cluster(_) => {
                try_join_all(groups.into_iter().map(|p| {
                    let mut handle = self.handle();
                    async move {
                        if p.cmd_iter().next().is_none() {
                            return Ok(Vec::new());
                        }
                        let v: Vec<Value> = p.query_async(&mut handle).await?;
                        Ok::<_, Error>(v)
                    }
                }))
                .await
            }
        }
    }

    /// Sends PING.
    pub async fn ping(&self) -> Result<()> {
        let _: String = redis::cmd("PING").query_async(&mut self.handle()).await?;
        Ok(())
    }
}

/// `EVALSHA <sha of script> <keys>`, for the caller to add the keys and then
/// the arguments.
#[cfg(feature = "redis")]
pub(crate) fn evalsha(script: &Script, keys: usize) -> Cmd {
    let mut cmd = redis::cmd("EVALSHA");
    cmd.arg(script.get_hash()).arg(keys);
    cmd
}

/// Why a write script failed: the server's error (for the store to map, e.g.
/// an overflow), or a Tally error already.
#[cfg(feature = "redis")]
#[derive(Debug)]
pub(crate) enum WriteFailure {
    Redis(redis::RedisError),
    Tally(Error),
}

#[cfg(feature = "redis")]
impl From<WriteFailure> for Error {
    fn from(f: WriteFailure) -> Self {
        match f {
            WriteFailure::Redis(e) => Error::from(e),
            WriteFailure::Tally(e) => e,
        }
    }
}

/// `url` with its password (and user) replaced by `***`, for messages.
#[cfg(feature = "redis")]
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            format!("{}***{}", &url[..scheme + 3], &url[at..])
        }
        _ => url.to_owned(),
    }
}

/// A failed connection: refused credentials are a configuration error (do
/// not retry); anything else means Redis is unavailable for now.
#[cfg(feature = "redis")]
fn connect_error(what: &str, e: &redis::RedisError) -> Error {
    if e.kind() == redis::ErrorKind::AuthenticationFailed
        || e.code().is_some_and(|c| c == "WRONGPASS" || c == "NOAUTH")
    {
        Error::Config(format!("Redis at {what} refused the credentials: {e}"))
    } else {
        Error::Unavailable(format!("cannot connect to Redis at {what}: {e}"))
    }
}

#[cfg(feature = "redis")]
#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn urls_lose_their_credentials_in_messages() {
        assert_eq!(
            redact("redis://:s3cret@host:6379/2"),
            "redis://***@host:6379/2"
        );
        assert_eq!(redact("rediss://user:pw@h/"), "rediss://***@h/");
        assert_eq!(redact("redis://127.0.0.1:6379/"), "redis://127.0.0.1:6379/");
    }
}

/// Makes ring rustls's process-wide crypto provider (redis-rs leaves the
/// choice to the application; without one, a `rediss://` URL panics). Keeps
/// one the application installed already.
#[cfg(feature = "redis")]
fn install_tls_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// A sendable handle on a [`Redis`] connection.
#[cfg(feature = "redis")]
#[derive(Clone)]
pub struct RedisHandle {
    conn: Conn,
}

#[cfg(feature = "redis")]
impl ConnectionLike for RedisHandle {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match &mut self.conn {
            Conn::Single(c) => c.req_packed_command(cmd),
            Conn::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match &mut self.conn {
            Conn::Single(c) => c.req_packed_commands(pipeline, offset, count),
            Conn::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match &self.conn {
            Conn::Single(c) => c.get_db(),
            Conn::Cluster(c) => c.get_db(),
        }
    }
}
