//! The SQLite database handle: [`Sqlite`] owns the connections and runs
//! every call on tokio's blocking pool, but a small read with a connection
//! free at once ([`Sqlite::read_small`]). Writes run in `BEGIN IMMEDIATE`
//! transactions on one writer connection, so a write is all or nothing and
//! several processes may share the file: SQLite's lock (with a busy
//! timeout) serialises their writers, and WAL mode lets readers go on
//! meanwhile. Commits are durable (`synchronous = FULL`): an acknowledged
//! write survives a crash.
//!
//! It knows only connections and transactions. The backend's stores
//! ([`crate::backend::sqlite`], which re-exports it) and the buffers' SQLite
//! sink ([`crate::buffers::sink_sqlite`]) both open their tables through it.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, Transaction, TransactionBehavior};

use crate::error::{Error, Result};

/// How long a writer waits for another process's write lock.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(10);
/// Idle reader connections kept open.
const MAX_IDLE_READERS: usize = 4;
/// The most rows a read may find (or look up) to run on the calling
/// thread ([`Sqlite::read_sized`]): its indexed lookups then cost less
/// than the hop to the blocking pool and back. Every precision of one
/// counter (7 × 120 slices) and one series of a Graphite render are such
/// reads.
pub const SMALL_READ_ROWS: u64 = 1024;
/// SQLite's page cache per connection, KiB (`PRAGMA cache_size = -N`;
/// SQLite's default is 2,000): a walk of the name index of 100,000 series
/// (a Graphite find of one level's nodes) touches more pages than the
/// default holds, and read each again from the file on every request.
pub const CACHE_KIB: i64 = 16 << 10;
/// The file name inside a data directory.
pub const DB_FILE: &str = "tally.sqlite3";

/// A SQLite database shared by Tally's stores. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Sqlite {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    writer: Mutex<Connection>,
    readers: Mutex<Vec<Connection>>,
    /// `None` in memory: reads then use the writer connection.
    path: Option<PathBuf>,
}

impl Sqlite {
    /// Opens (creating if needed) `tally.sqlite3` in `dir`, creating `dir`.
    pub fn open_dir(dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(dir).map_err(|e| {
            Error::Config(format!(
                "cannot create data directory {}: {e}",
                dir.display()
            ))
        })?;
        Self::open(&dir.join(DB_FILE))
    }

    /// Opens (creating if needed) the database file at `path`.
    pub fn open(path: &Path) -> Result<Self> {
        let writer = open_connection(path)?;
        enable_wal(&writer)?;
        Ok(Sqlite {
            inner: Arc::new(Inner {
                writer: Mutex::new(writer),
                readers: Mutex::new(Vec::new()),
                path: Some(path.to_owned()),
            }),
        })
    }

    /// A private in-memory database, gone when the last clone is dropped.
    pub fn open_in_memory() -> Result<Self> {
        let conn = Connection::open_in_memory()?;
        Ok(Sqlite {
            inner: Arc::new(Inner {
                writer: Mutex::new(conn),
                readers: Mutex::new(Vec::new()),
                path: None,
            }),
        })
    }

    /// The database file, or `None` in memory.
    pub fn path(&self) -> Option<&Path> {
        self.inner.path.as_deref()
    }

    /// A short description for logs: `sqlite:/path` or `sqlite::memory:`.
    pub fn describe(&self) -> String {
        match self.path() {
            Some(path) => format!("sqlite:{}", path.display()),
            None => "sqlite::memory:".to_owned(),
        }
    }

    /// Runs `f` in an immediate (write-locking) transaction and commits it;
    /// if `f` fails, the transaction is rolled back and nothing is written.
    pub async fn write<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Transaction<'_>) -> Result<T> + Send + 'static,
    {
        self.on_writer(move |conn| {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let value = f(&tx)?;
            tx.commit()?;
            Ok(value)
        })
        .await
    }

    /// Checks that the database answers: `SELECT 1` on a reader connection
    /// (what every SQLite store's `ping` is).
    pub async fn ping(&self) -> Result<()> {
        self.read_small(|conn| Ok(conn.execute_batch("SELECT 1")?))
            .await
    }

    /// Runs `f` on a reader connection (a consistent snapshot when `f` opens
    /// a transaction).
    pub async fn read<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        let inner = self.inner.clone();
        blocking(move || {
            let Some(path) = &inner.path else {
                return f(&unpoisoned(&inner.writer));
            };
            let idle = unpoisoned(&inner.readers).pop();
            let conn = match idle {
                Some(conn) => conn,
                None => open_connection(path)?,
            };
            let result = f(&conn);
            let mut readers = unpoisoned(&inner.readers);
            if readers.len() < MAX_IDLE_READERS {
                readers.push(conn);
            }
            result
        })
        .await
    }

    /// Runs `f` as [`Sqlite::read`] does, but on the calling thread when a
    /// connection is free at once: for reads of a few indexed lookups, which
    /// take less time than the hop to the blocking pool and back (two thread
    /// switches, most of a one-series Graphite render's CPU). When none is
    /// free (the pool's first read, every reader busy, or in memory a write
    /// under way) it is [`Sqlite::read`]: it never waits for a lock on the
    /// runtime's thread.
    pub async fn read_small<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        if self.inner.path.is_none() {
            // In memory, reads share the writer's connection.
            let f = match self.inner.writer.try_lock() {
                Ok(conn) => return f(&conn),
                Err(TryLockError::Poisoned(p)) => return f(&p.into_inner()),
                Err(TryLockError::WouldBlock) => f,
            };
            return self.read(f).await;
        }
        let idle = match self.inner.readers.try_lock() {
            Ok(mut readers) => readers.pop(),
            Err(TryLockError::Poisoned(p)) => p.into_inner().pop(),
            Err(TryLockError::WouldBlock) => None,
        };
        let Some(conn) = idle else {
            return self.read(f).await;
        };
        let result = f(&conn);
        let mut readers = unpoisoned(&self.inner.readers);
        if readers.len() < MAX_IDLE_READERS {
            readers.push(conn);
        }
        result
    }

    /// [`Sqlite::read_small`] when `rows`, the most rows `f` can find or
    /// look up, is at most [`SMALL_READ_ROWS`]; else [`Sqlite::read`].
    pub async fn read_sized<T, F>(&self, rows: u64, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        if rows <= SMALL_READ_ROWS {
            self.read_small(f).await
        } else {
            self.read(f).await
        }
    }

    /// Runs `f` on the writer connection outside a transaction (schema set-up).
    pub async fn with_writer<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        self.on_writer(move |conn| f(conn)).await
    }

    /// Creates a store's tables: `schema` is SQL statements, each `IF NOT
    /// EXISTS`, run on the writer connection.
    pub(crate) async fn create_tables(&self, schema: String) -> Result<()> {
        self.with_writer(move |conn| Ok(conn.execute_batch(&schema)?))
            .await
    }

    /// Runs `f` on the writer connection, on the blocking pool.
    async fn on_writer<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T> + Send + 'static,
    {
        let inner = self.inner.clone();
        blocking(move || f(&mut unpoisoned(&inner.writer))).await
    }
}

/// Runs the reads of `f` on `conn` in one snapshot: one read transaction
/// around them, ended whether `f` failed or not.
pub(crate) fn in_snapshot<T>(conn: &Connection, f: impl FnOnce() -> Result<T>) -> Result<T> {
    conn.execute_batch("BEGIN")?;
    let result = f();
    conn.execute_batch("COMMIT")?;
    result
}

/// The connection(s) behind `lock`, also after a call panicked holding it
/// (a connection stays usable: its transaction was rolled back on drop).
fn unpoisoned<T>(lock: &Mutex<T>) -> MutexGuard<'_, T> {
    lock.lock().unwrap_or_else(|p| p.into_inner())
}

/// Puts the database in WAL mode, which is a property of the file: after
/// the first open there is nothing to do. Converting a new file needs an
/// exclusive lock and SQLite does not run the busy handler for it, so when
/// several processes open a new file at once the losers retry here (within
/// [`BUSY_TIMEOUT`]) until one of them has converted it.
fn enable_wal(conn: &Connection) -> Result<()> {
    let deadline = std::time::Instant::now() + BUSY_TIMEOUT;
    let mut pause = Duration::from_millis(1);
    loop {
        let mode: String = conn.pragma_query_value(None, "journal_mode", |r| r.get(0))?;
        if mode.eq_ignore_ascii_case("wal") {
            return Ok(());
        }
        match conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get::<_, String>(0)) {
            Ok(mode) if mode.eq_ignore_ascii_case("wal") => return Ok(()),
            Ok(mode) => {
                return Err(Error::Config(format!(
                    "SQLite refused WAL mode (journal mode stays {mode:?})"
                )));
            }
            Err(e)
                if e.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy)
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(50));
            }
            Err(e) => return Err(e.into()),
        }
    }
}

fn open_connection(path: &Path) -> Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_URI,
    )
    .map_err(|e| {
        Error::Config(format!(
            "cannot open SQLite database {}: {e}",
            path.display()
        ))
    })?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    conn.pragma_update(None, "cache_size", -CACHE_KIB)?;
    Ok(conn)
}

async fn blocking<T, F>(f: F) -> Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T> + Send + 'static,
{
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Error::Backend(format!("sqlite worker failed: {e}")))?
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The thread a read ran on.
    fn thread_of_read(conn: &Connection) -> Result<std::thread::ThreadId> {
        conn.execute_batch("SELECT 1")?;
        Ok(std::thread::current().id())
    }

    /// Readers and the writer of a file each keep a page cache of
    /// [`CACHE_KIB`], not SQLite's default.
    #[tokio::test]
    async fn every_connection_keeps_the_larger_page_cache() {
        let dir = tempfile::tempdir().unwrap();
        let db = Sqlite::open(&dir.path().join(DB_FILE)).unwrap();
        fn cache(conn: &Connection) -> Result<i64> {
            Ok(conn.pragma_query_value(None, "cache_size", |r| r.get(0))?)
        }
        assert_eq!(db.read(cache).await.unwrap(), -CACHE_KIB);
        assert_eq!(db.write(|tx| cache(tx)).await.unwrap(), -CACHE_KIB);
    }

    /// A small read runs on the caller's thread when a reader connection
    /// is idle, and on the blocking pool (answering the same) when none is:
    /// the first read of a new handle, every reader taken, or the list of
    /// idle readers locked, where it does not wait for the lock.
    #[tokio::test]
    #[expect(
        clippy::await_holding_lock,
        reason = "the lock is held across one poll on purpose: the read must not wait for it"
    )]
    async fn a_small_read_stays_on_the_callers_thread_only_with_an_idle_reader() {
        let dir = tempfile::tempdir().unwrap();
        let db = Sqlite::open(&dir.path().join(DB_FILE)).unwrap();
        let here = std::thread::current().id();
        // No reader yet: the pool opens one, and keeps it.
        assert_ne!(db.read_small(thread_of_read).await.unwrap(), here);
        assert_eq!(db.inner.readers.lock().unwrap().len(), 1);
        assert_eq!(db.read_small(thread_of_read).await.unwrap(), here);
        assert_eq!(db.inner.readers.lock().unwrap().len(), 1, "returned");
        // Every idle reader taken (as by reads under way): the pool again.
        let taken: Vec<_> = db.inner.readers.lock().unwrap().drain(..).collect();
        assert_ne!(db.read_small(thread_of_read).await.unwrap(), here);
        drop(taken);
        // The list locked (another thread taking a reader): the read goes
        // to the pool at once, where it waits for the lock.
        let held = db.inner.readers.lock().unwrap();
        let mut read = std::pin::pin!(db.read_small(thread_of_read));
        assert!(futures::poll!(&mut read).is_pending(), "not run here");
        drop(held);
        assert_ne!(read.await.unwrap(), here);
    }

    /// In memory a small read uses the writer's connection on the caller's
    /// thread when it is free, and waits for a write holding it on the
    /// blocking pool, not on the runtime's thread.
    #[tokio::test]
    async fn a_small_read_in_memory_waits_for_a_write_off_the_runtimes_thread() {
        let db = Sqlite::open_in_memory().unwrap();
        db.write(|tx| Ok(tx.execute_batch("CREATE TABLE t (x INTEGER)")?))
            .await
            .unwrap();
        let here = std::thread::current().id();
        assert_eq!(db.read_small(thread_of_read).await.unwrap(), here);
        let (started, write_started) = tokio::sync::oneshot::channel();
        let (finish, may_finish) = std::sync::mpsc::channel::<()>();
        let writer = db.clone();
        let write = tokio::spawn(async move {
            writer
                .write(move |tx| {
                    tx.execute_batch("INSERT INTO t VALUES (1)")?;
                    started.send(()).unwrap();
                    may_finish.recv().unwrap();
                    Ok(())
                })
                .await
        });
        write_started.await.unwrap();
        let mut read = std::pin::pin!(db.read_small(|conn| {
            let n: i64 = conn.query_row("SELECT count(*) FROM t", [], |r| r.get(0))?;
            Ok((n, std::thread::current().id()))
        }));
        assert!(futures::poll!(&mut read).is_pending(), "not run here");
        finish.send(()).unwrap();
        write.await.unwrap().unwrap();
        let (n, ran_on) = read.await.unwrap();
        assert_eq!(n, 1, "the read ran after the write committed");
        assert_ne!(ran_on, here);
    }

    /// Another process holding the write lock must not make an open fail:
    /// `PRAGMA journal_mode = WAL` is not covered by the busy timeout.
    #[test]
    fn opening_while_another_connection_writes_waits_instead_of_failing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(DB_FILE);
        let first = Sqlite::open(&path).unwrap();
        first
            .inner
            .writer
            .lock()
            .unwrap()
            .execute_batch("CREATE TABLE t (x INTEGER)")
            .unwrap();
        // A separate connection, as another process would have, holds the
        // write lock for a while.
        let holder = open_connection(&path).unwrap();
        holder
            .execute_batch("BEGIN IMMEDIATE; INSERT INTO t VALUES (1)")
            .unwrap();
        let release = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            holder.execute_batch("COMMIT").unwrap();
        });
        let second = Sqlite::open(&path);
        release.join().unwrap();
        let second = second.expect("open while another connection writes");
        let n: i64 = second
            .inner
            .writer
            .lock()
            .unwrap()
            .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 1);
    }

    /// Processes started together (a cron job and a reader, `tally flush`
    /// and a CLI call) open a new file at once; each must get it in WAL mode.
    #[test]
    fn concurrent_opens_of_a_new_file_all_succeed() {
        for _ in 0..100 {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join(DB_FILE);
            let opens: Vec<_> = (0..4)
                .map(|_| {
                    let path = path.clone();
                    std::thread::spawn(move || Sqlite::open(&path).map(|_| ()))
                })
                .collect();
            for open in opens {
                open.join().unwrap().expect("a concurrent open");
            }
            let conn = open_connection(&path).unwrap();
            let mode: String = conn
                .pragma_query_value(None, "journal_mode", |r| r.get(0))
                .unwrap();
            assert_eq!(mode, "wal");
        }
    }
}
