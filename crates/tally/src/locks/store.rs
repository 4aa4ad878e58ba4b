//! The storage contract of locks, at the level of the domain operations.
//!
//! A [`LockStore`] acquires a named lock for a token with a time to live,
//! and releases or extends it only for the token that holds it. Each method
//! is one atomic step (one Lua call, one SQLite transaction). The fencing
//! number of a lock grows by one with every acquisition and is never reset,
//! not even when the lock expires or is released.

use std::fmt;

use async_trait::async_trait;

use crate::error::Result;
use crate::name::Name;

/// What an acquisition attempt found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AcquireOutcome {
    /// The lock is ours, with this fencing token.
    Acquired {
        /// Strictly greater than every earlier acquisition's.
        fence: u64,
    },
    /// The token holds it already (a keyed acquisition sent again): nothing
    /// changed, the fence is the holder's and the lease runs as it ran.
    Ours {
        /// The holder's fencing number.
        fence: u64,
        /// Time left on the lease, ms.
        expires_in_ms: u64,
    },
    /// Someone else holds it, for about this many more ms.
    Held {
        /// Time left on the holder's lease, ms.
        expires_in_ms: u64,
    },
}

/// Who asks about which lock, and when: the lock `name`, the `token` that
/// holds it or would, the store's instant `now_ms`.
#[derive(Clone, Copy, Debug)]
pub struct LockCall<'a> {
    /// The lock.
    pub name: &'a Name,
    /// The token that holds it, or asks to.
    pub token: &'a str,
    /// The instant leases are measured from, Unix ms.
    pub now_ms: u64,
}

/// Storage of locks. See the module docs.
#[async_trait]
pub trait LockStore: Send + Sync + fmt::Debug + 'static {
    /// Takes the lock for the call's token for `ttl_ms` if nobody holds it.
    async fn acquire(&self, call: LockCall<'_>, ttl_ms: u64) -> Result<AcquireOutcome>;

    /// Releases the lock if the call's token holds it; false (changing
    /// nothing) if not.
    async fn release(&self, call: LockCall<'_>) -> Result<bool>;

    /// Sets the lease of the lock to `ttl_ms` from now if the call's token
    /// holds it; false (changing nothing) if not.
    async fn extend(&self, call: LockCall<'_>, ttl_ms: u64) -> Result<bool>;
}
