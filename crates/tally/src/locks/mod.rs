//! Distributed locks with fencing tokens (the published SETNX lock, done
//! right: docs/reference.md, "Locks").
//!
//! [`Locks::try_acquire`] takes a named lock with a time to live and a token
//! unique to this acquisition, atomically (Redis: `SET NX PX` in the same
//! Lua call as the fencing `INCR`; SQLite: one immediate transaction), so a
//! crash can never leave a lock without a lease. Release and extend succeed
//! only for the holder's token; a lock that expired and was taken by someone
//! else is never released by its former holder. [`Locks::acquire`] waits for
//! a lock until a deadline, retrying with jittered exponential backoff.
//! [`LockGuard`] releases when dropped. Every acquisition gets a fencing
//! number strictly greater than the previous one of the same lock, for the
//! protected resource to reject writes from a holder whose lease ran out.
//! [`Locks::acquire_keyed`] takes a lock for an idempotency key: its token
//! is derived from the key ([`keyed_token`]), so a repeat finds the lock
//! held by its own token and answers acquired, same token and fence, the
//! lease not renewed. Release and extend check the token, so a repeat
//! changes nothing more (a repeated release answers `false`: not held).
//!
//! A lock is only as safe as its lease: work that may outlive the TTL must
//! extend it, or check the fence at the resource. Not done here: waiting
//! queues or fairness (contenders race on each retry).

pub mod store;

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

pub use store::{AcquireOutcome, LockCall, LockStore};

use crate::clock::{Clock, SharedClock};
use crate::error::{Error, Result};
use crate::name::Name;

/// The shortest accepted time to live.
pub const MIN_TTL: Duration = Duration::from_millis(10);
/// The longest accepted time to live.
pub const MAX_TTL: Duration = Duration::from_secs(24 * 3600);
/// The longest a blocking acquire may wait.
pub const MAX_WAIT: Duration = Duration::from_secs(3600);
/// First backoff step of a blocking acquire (doubles up to [`MAX_BACKOFF`]).
pub const MIN_BACKOFF: Duration = Duration::from_millis(5);
/// Largest backoff step of a blocking acquire.
pub const MAX_BACKOFF: Duration = Duration::from_millis(250);

/// A lock held by us: what the HTTP layer hands back to a client.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Lease {
    /// The lock's name.
    pub name: String,
    /// The token of this acquisition (needed to release or extend).
    pub token: String,
    /// The fencing number: strictly greater than every earlier acquisition's.
    pub fence: u64,
    /// The time to live granted, ms.
    pub ttl_ms: u64,
}

/// The answer to an acquisition attempt.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Acquisition {
    /// Ours.
    Acquired(Lease),
    /// Someone else holds it.
    Held {
        /// Time left on the holder's lease, ms.
        retry_after_ms: u64,
    },
}

/// Named locks over a [`LockStore`]. Cheap to clone.
///
/// # Example
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> tally::Result<()> {
/// use std::time::Duration;
///
/// let tally = tally::Tally::open("sqlite::memory:").await?;
/// let locks = tally.locks();
///
/// let guard = locks.try_acquire("nightly-report", Duration::from_secs(30)).await?;
/// let guard = guard.expect("nobody holds it yet");
/// // Held: another attempt gets `None` (a value, not an error).
/// assert!(locks.try_acquire("nightly-report", Duration::from_secs(30)).await?.is_none());
/// let fence = guard.fence(); // orders the holders' writes elsewhere
/// assert!(fence > 0);
/// assert!(guard.release().await?); // released by its holder only
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct Locks {
    store: Arc<dyn LockStore>,
    clock: SharedClock,
}

impl Locks {
    /// Locks on `store`, reading time from `clock`.
    pub fn new(store: Arc<dyn LockStore>, clock: Arc<dyn Clock>) -> Self {
        Locks { store, clock }
    }

    /// A store call about `name` for `token`, now.
    fn call<'a>(&self, name: &'a Name, token: &'a str) -> LockCall<'a> {
        LockCall {
            name,
            token,
            now_ms: self.clock.now().as_millis(),
        }
    }

    /// One attempt to take `name` for `ttl`: a lease, or how long it stays held.
    pub async fn acquire_once(&self, name: &str, ttl: Duration) -> Result<Acquisition> {
        self.attempt(name, ttl, &random_token()).await
    }

    /// One attempt with `token`: a lease (also when `token` holds the lock
    /// already: then its fence and the time left), or how long it stays
    /// held.
    async fn attempt(&self, name: &str, ttl: Duration, token: &str) -> Result<Acquisition> {
        let name = Name::new(name)?;
        let ttl_ms = check_ttl(ttl)?;
        let lease = |fence, ttl_ms| {
            Acquisition::Acquired(Lease {
                name: name.to_string(),
                token: token.to_owned(),
                fence,
                ttl_ms,
            })
        };
        Ok(
            match self.store.acquire(self.call(&name, token), ttl_ms).await? {
                AcquireOutcome::Acquired { fence } => lease(fence, ttl_ms),
                AcquireOutcome::Ours {
                    fence,
                    expires_in_ms,
                } => lease(fence, expires_in_ms),
                AcquireOutcome::Held { expires_in_ms } => Acquisition::Held {
                    retry_after_ms: expires_in_ms,
                },
            },
        )
    }

    /// Takes `name` for `ttl` if free: a guard, or `None` when held.
    pub async fn try_acquire(&self, name: &str, ttl: Duration) -> Result<Option<LockGuard>> {
        Ok(self.guarded(self.acquire_once(name, ttl).await?))
    }

    /// Waits up to `wait` for `name`, retrying with jittered exponential
    /// backoff (never sleeping past the deadline): a guard, or `None` when it
    /// stayed held.
    pub async fn acquire(
        &self,
        name: &str,
        ttl: Duration,
        wait: Duration,
    ) -> Result<Option<LockGuard>> {
        Ok(self.guarded(self.acquire_waiting(name, ttl, wait).await?))
    }

    /// As [`Locks::acquire`], but hands back the lease itself (no guard: the
    /// caller releases it), or how long it stays held: what the HTTP layer
    /// answers.
    pub async fn acquire_waiting(
        &self,
        name: &str,
        ttl: Duration,
        wait: Duration,
    ) -> Result<Acquisition> {
        self.wait_for(name, ttl, wait, &random_token()).await
    }

    /// [`Locks::acquire_waiting`] with an idempotency key: the lease's token
    /// is derived from the key and the lock's name ([`keyed_token`]), so
    /// the same acquisition sent again (a retry after a server died before
    /// recording its answer) finds the lock held by its own token and
    /// answers acquired, with the same token and fence and the time left on
    /// the lease (not renewed), instead of waiting for itself or taking
    /// the lock twice. When that lease has ended meanwhile, the repeat is a
    /// new acquisition (a new fence), or held if someone else took it.
    pub async fn acquire_keyed(
        &self,
        key: &str,
        name: &str,
        ttl: Duration,
        wait: Duration,
    ) -> Result<Acquisition> {
        crate::idempotency::check_key(key)?;
        self.wait_for(name, ttl, wait, &keyed_token(key, name))
            .await
    }

    async fn wait_for(
        &self,
        name: &str,
        ttl: Duration,
        wait: Duration,
        token: &str,
    ) -> Result<Acquisition> {
        if wait > MAX_WAIT {
            return Err(Error::InvalidInput(format!(
                "a lock wait is at most {} s, got {} s",
                MAX_WAIT.as_secs(),
                wait.as_secs_f64()
            )));
        }
        let deadline = tokio::time::Instant::now() + wait;
        let mut step = MIN_BACKOFF;
        loop {
            match self.attempt(name, ttl, token).await? {
                acquired @ Acquisition::Acquired(_) => return Ok(acquired),
                held @ Acquisition::Held { retry_after_ms } => {
                    let now = tokio::time::Instant::now();
                    if now >= deadline {
                        return Ok(held);
                    }
                    // Full jitter in [step/2, step], no later than the lease end.
                    let half = step.as_micros() as u64 / 2;
                    let mut sleep = Duration::from_micros(half + crate::random::up_to(half));
                    sleep = sleep.min(Duration::from_millis(retry_after_ms.max(1)));
                    tokio::time::sleep(sleep.min(deadline - now)).await;
                    step = (step * 2).min(MAX_BACKOFF);
                }
            }
        }
    }

    /// Releases `name` if `token` holds it; false (changing nothing) if not.
    pub async fn release(&self, name: &str, token: &str) -> Result<bool> {
        let name = Name::new(name)?;
        self.store.release(self.call(&name, token)).await
    }

    /// Extends `name` to `ttl` from now if `token` holds it; false (changing
    /// nothing) if not.
    pub async fn extend(&self, name: &str, token: &str, ttl: Duration) -> Result<bool> {
        let name = Name::new(name)?;
        let ttl_ms = check_ttl(ttl)?;
        self.store.extend(self.call(&name, token), ttl_ms).await
    }

    /// A guard over a lease obtained from [`Locks::acquire_once`].
    pub fn guard(&self, lease: Lease) -> LockGuard {
        LockGuard {
            locks: self.clone(),
            lease,
            released: false,
        }
    }

    /// A guard of the lease acquired, or `None` when the lock was held.
    fn guarded(&self, acquisition: Acquisition) -> Option<LockGuard> {
        match acquisition {
            Acquisition::Acquired(lease) => Some(self.guard(lease)),
            Acquisition::Held { .. } => None,
        }
    }
}

/// A fresh random lease token.
fn random_token() -> String {
    format!("{:032x}", crate::random::u128())
}

/// The lease token of a keyed acquisition of lock `name`: 32 hex digits
/// hashed from the idempotency key and the name, the same for every copy
/// of the request.
pub fn keyed_token(key: &str, name: &str) -> String {
    let mut token =
        crate::idempotency::fingerprint(&[b"tally lock token", key.as_bytes(), name.as_bytes()]);
    token.truncate(32);
    token
}

fn check_ttl(ttl: Duration) -> Result<u64> {
    if ttl < MIN_TTL || ttl > MAX_TTL {
        return Err(Error::InvalidInput(format!(
            "a lock's time to live must be {} ms to {} s, got {} ms",
            MIN_TTL.as_millis(),
            MAX_TTL.as_secs(),
            ttl.as_millis()
        )));
    }
    Ok(ttl.as_millis() as u64)
}

/// A held lock; released when dropped (by a spawned task, best effort: the
/// TTL frees it anyway). Call [`LockGuard::release`] to know the outcome.
#[derive(Debug)]
pub struct LockGuard {
    locks: Locks,
    lease: Lease,
    released: bool,
}

impl LockGuard {
    /// The lease (name, token, fence, TTL).
    pub fn lease(&self) -> &Lease {
        &self.lease
    }

    /// The fencing number of this acquisition.
    pub fn fence(&self) -> u64 {
        self.lease.fence
    }

    /// The token of this acquisition.
    pub fn token(&self) -> &str {
        &self.lease.token
    }

    /// Extends the lease to `ttl` from now; false if we no longer hold it.
    pub async fn extend(&mut self, ttl: Duration) -> Result<bool> {
        let ok = self
            .locks
            .extend(&self.lease.name, &self.lease.token, ttl)
            .await?;
        if ok {
            self.lease.ttl_ms = ttl.as_millis() as u64;
        }
        Ok(ok)
    }

    /// Releases the lock; true if we still held it (false: it had expired).
    pub async fn release(mut self) -> Result<bool> {
        self.released = true;
        self.locks
            .release(&self.lease.name, &self.lease.token)
            .await
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        let (locks, name, token) = (
            self.locks.clone(),
            self.lease.name.clone(),
            self.lease.token.clone(),
        );
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                handle.spawn(async move {
                    if let Err(e) = locks.release(&name, &token).await {
                        tracing::warn!(lock = %name, error = %e, "releasing a dropped lock failed; its TTL will free it");
                    }
                });
            }
            Err(_) => tracing::warn!(
                lock = %self.lease.name,
                "a lock guard was dropped outside a tokio runtime; its TTL will free it"
            ),
        }
    }
}
