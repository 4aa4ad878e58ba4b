//! A first pass's hashes written back with only the fields they keep
//! ([`super::old_fields`] decides which), each only if it is still what
//! the pass read. Two ways of knowing that:
//!
//! - watched: on a standalone server, a hash that holds every precision
//!   of its series (the compact layout) is read by a `DUMP` after a
//!   `WATCH` on a connection of the cleaner's own, [`WATCH_GROUP`] hashes
//!   a connection, and its group's `RESTORE`s run in one `MULTI`/`EXEC`,
//!   which Redis refuses if any of them changed since its `WATCH`;
//! - scripted: otherwise (a cluster, a group whose `EXEC` did not run),
//!   the kept fields are `RESTORE`d under a temporary key and
//!   `hash_rewrite.lua` moves it onto the hash if a `DUMP` of the hash is
//!   still byte for byte the payload read.
//!
//! A hash that changed since it was read loses its fields by name instead
//! ([`RedisSliceStore::remove_fields`]), as does one whose payload the
//! server will not restore.

use redis::Value as Reply;
use redis::aio::MultiplexedConnection;

use super::RedisSliceStore;
use crate::error::{Error, Result};

/// Hashes watched on one connection: a write to any of them between its
/// read and the `EXEC` sends the group's rewrites the other way.
pub(super) const WATCH_GROUP: usize = 32;

/// A hash losing at least this many fields is written back the scripted
/// way when its payload is a listpack: removing a field by name scans the
/// listpack from its head and moves its tail, so `HDEL` of n fields from
/// a listpack of m costs about n·m (the compact layout's busy counter at
/// the peak: 427 of 1,267 fields, about 1.1 ms of Redis CPU), where the
/// scripted rewrite costs about 3·m (two `DUMP`s and a `RESTORE`). A
/// hash of the default layout at the peak (181 fields, 61 to go) costs
/// about 6 µs by `HDEL` against 20 that way (docs/bench-log/retention.md).
pub(super) const REWRITE_MIN: usize = 128;

/// A hash read under a `WATCH` losing at least this many fields is
/// written back: its `RESTORE` costs about as much as `HDEL` of 24 of its
/// fields (the default layout's hash at the peak: 1.0 µs against 5.8 for
/// its 61, docs/bench-log/retention.md).
pub(super) const WATCHED_REWRITE_MIN: usize = 32;

/// Rewrites in flight at once the scripted way: each carries two payloads
/// (about 10 and 9 KB for the compact layout's busy counter).
const REWRITE_INFLIGHT: usize = 32;

/// How long a scripted rewrite's temporary key lives if the cleaner stops
/// before moving it onto its hash.
const REWRITE_TTL_MS: u64 = 60_000;

/// A hash to write back with only the fields it keeps.
pub(super) struct Rewrite {
    pub(super) key: String,
    /// Its DUMP payload as read: the script writes only if it still is.
    pub(super) read: Vec<u8>,
    /// The payload to RESTORE.
    pub(super) payload: Vec<u8>,
    /// How many fields that removes.
    pub(super) removes: usize,
    /// The fields it loses, to remove by name if the hash changed.
    pub(super) gone: Vec<Vec<u8>>,
    /// Read under a `WATCH`: its group in [`Watch`]es, and when it expires
    /// (Unix milliseconds, as `PEXPIRETIME` answered; -1 for never).
    pub(super) watched: Option<(usize, i64)>,
}

/// A connection of the cleaner's own holding a `WATCH` on a group of
/// hashes it has read, and when each expires.
pub(super) struct Watch {
    conn: MultiplexedConnection,
    pub(super) expires: Vec<i64>,
}

impl RedisSliceStore {
    /// The `DUMP` of each of `keys`, each group of [`WATCH_GROUP`] read
    /// after a `WATCH` on a connection of its own (with `PEXPIRETIME`s);
    /// `None` where that cannot be done (a cluster, a server without
    /// `PEXPIRETIME` or refusing `DUMP`): the caller reads without.
    pub(super) async fn watched_dumps(&self, keys: &[&str]) -> Option<(Vec<Reply>, Vec<Watch>)> {
        let groups = keys.chunks(WATCH_GROUP).map(|group| async move {
            let Some(mut conn) = self.redis.exclusive().await? else {
                return Ok(None);
            };
            let mut pipe = redis::pipe();
            pipe.cmd("WATCH").arg(group).ignore();
            for key in group {
                pipe.cmd("DUMP").arg(*key);
            }
            for key in group {
                pipe.cmd("PEXPIRETIME").arg(*key);
            }
            let mut dumps: Vec<Reply> = pipe.query_async(&mut conn).await?;
            let expires = dumps
                .split_off(group.len())
                .into_iter()
                .map(redis::FromRedisValue::from_redis_value)
                .collect::<std::result::Result<Vec<i64>, _>>()?;
            Ok::<_, Error>(Some((dumps, Watch { conn, expires })))
        });
        let groups = match futures::future::try_join_all(groups).await {
            Ok(groups) => groups.into_iter().collect::<Option<Vec<_>>>()?,
            Err(e) => {
                tracing::debug!(error = %e, "a watched read failed; reading without WATCH");
                return None;
            }
        };
        let mut dumps = Vec::with_capacity(keys.len());
        let mut watches = Vec::with_capacity(groups.len());
        for (group, watch) in groups {
            dumps.extend(group);
            watches.push(watch);
        }
        Some((dumps, watches))
    }

    /// Writes each hash back with only the fields it keeps: those read
    /// under a `WATCH` in one `MULTI`/`EXEC` a group, the rest the
    /// scripted way; of a group whose `EXEC` did not run, those losing
    /// [`REWRITE_MIN`] fields or more the scripted way, the others by
    /// name. Every watch is ended. Returns the fields removed.
    pub(super) async fn rewrite_hashes(
        &self,
        rewrites: Vec<Rewrite>,
        watches: Vec<Watch>,
    ) -> Result<u64> {
        let mut groups: Vec<Vec<Rewrite>> = watches.iter().map(|_| Vec::new()).collect();
        let mut scripted = Vec::new();
        for r in rewrites {
            match r.watched {
                Some((group, _)) => groups[group].push(r),
                None => scripted.push(r),
            }
        }
        let done = futures::future::join_all(
            watches
                .into_iter()
                .zip(groups)
                .map(|(watch, group)| self.exec_rewrites(watch, group)),
        )
        .await;
        let mut removed = 0;
        let mut by_name = Vec::new();
        for (n, left) in done {
            removed += n;
            // What a group left: many fields the scripted way, few by name.
            for r in left {
                match r.removes >= REWRITE_MIN {
                    true => scripted.push(r),
                    false => by_name.push((r.key, r.gone)),
                }
            }
        }
        if !scripted.is_empty() {
            removed += self.rewrite_scripted(scripted).await?;
        }
        if !by_name.is_empty() {
            removed += self.remove_fields(&by_name).await?;
        }
        Ok(removed)
    }

    /// One watched group's rewrites in one `MULTI`/`EXEC` (an `UNWATCH`
    /// when it has none), the connection given back after. Returns the
    /// fields removed and the rewrites left to the scripted way: all of
    /// them when the `EXEC` did not run (a hash of the group changed since
    /// its read, or the server refused a `RESTORE`).
    async fn exec_rewrites(&self, watch: Watch, rewrites: Vec<Rewrite>) -> (u64, Vec<Rewrite>) {
        let mut conn = watch.conn;
        if rewrites.is_empty() {
            let unwatched: redis::RedisResult<()> =
                redis::cmd("UNWATCH").query_async(&mut conn).await;
            if unwatched.is_ok() {
                self.redis.give_back(conn);
            }
            return (0, rewrites);
        }
        let mut pipe = redis::pipe();
        pipe.atomic();
        for r in &rewrites {
            let expires = r.watched.map_or(-1, |(_, at)| at);
            let restore = pipe
                .cmd("RESTORE")
                .arg(r.key.as_str())
                .arg(expires.max(0))
                .arg(r.payload.as_slice())
                .arg("REPLACE");
            if expires > 0 {
                restore.arg("ABSTTL");
            }
        }
        match pipe.query_async::<Option<Vec<Reply>>>(&mut conn).await {
            Ok(Some(_)) => {
                self.redis.give_back(conn);
                (rewrites.iter().map(|r| r.removes as u64).sum(), Vec::new())
            }
            Ok(None) => {
                // The EXEC ended the watch.
                self.redis.give_back(conn);
                (0, rewrites)
            }
            Err(e) => {
                tracing::debug!(error = %e, "a watched rewrite failed; trying the script");
                (0, rewrites)
            }
        }
    }

    /// Writes each hash back [`REWRITE_INFLIGHT`] at a time: the kept
    /// fields are `RESTORE`d under a temporary key of the hash's slot
    /// ([`rewrite_key`], living [`REWRITE_TTL_MS`]), then
    /// `hash_rewrite.lua` moves it onto the hash if the hash is still what
    /// was read. Returns the fields removed.
    async fn rewrite_scripted(&self, rewrites: Vec<Rewrite>) -> Result<u64> {
        use futures::stream::{StreamExt, TryStreamExt};
        let answers: Vec<(Rewrite, i64)> = futures::stream::iter(rewrites)
            .map(|r| async move {
                let temporary = rewrite_key(&r.key);
                let restored: redis::RedisResult<()> = redis::cmd("RESTORE")
                    .arg(temporary.as_str())
                    .arg(REWRITE_TTL_MS)
                    .arg(r.payload.as_slice())
                    .arg("REPLACE")
                    .query_async(&mut self.redis.handle())
                    .await;
                if let Err(e) = restored {
                    // Out of memory, say: the fields go by name.
                    tracing::debug!(key = %r.key, error = %e, "RESTORE refused; removing by HDEL");
                    return Ok((r, -1));
                }
                let mut cmd = super::super::evalsha(&self.rewrite, 2);
                cmd.arg(r.key.as_str())
                    .arg(temporary.as_str())
                    .arg(r.read.as_slice())
                    .arg(r.removes);
                let value = self
                    .redis
                    .eval_cmd(&self.rewrite, &cmd)
                    .await
                    .map_err(Error::from)?;
                let n: i64 = redis::FromRedisValue::from_redis_value(value)?;
                Ok::<_, Error>((r, n))
            })
            .buffer_unordered(REWRITE_INFLIGHT)
            .try_collect()
            .await?;
        let mut removed = 0;
        let mut again = Vec::new();
        for (r, n) in answers {
            match u64::try_from(n) {
                Ok(n) => removed += n,
                Err(_) => again.push((r.key, r.gone)),
            }
        }
        if !again.is_empty() {
            removed += self.remove_fields(&again).await?;
        }
        Ok(removed)
    }
}

/// A temporary key for a rewrite of `key`: in its cluster slot (it starts
/// with `key`, hash tag included), and no series' key, as a name holds no
/// control character; a random part keeps two cleaners' apart.
fn rewrite_key(key: &str) -> String {
    format!("{key}\u{1}rewrite\u{1}{:016x}", rand::random::<u64>())
}
