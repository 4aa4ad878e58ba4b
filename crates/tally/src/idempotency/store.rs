//! The storage contract of idempotency records, at the level of the
//! protocol's steps: claim a key, record its answer, or give the claim up.
//!
//! A record holds the fingerprint of the request that first used the key,
//! the token of the claim that is running it (with the claim's lease), and,
//! once known, the answer. Each step is one atomic round trip (one Lua call
//! on a single key in Redis, one immediate transaction in SQLite), so
//! several processes sharing one store see one record. Records go when the
//! retention set at their first claim has passed (a key's PX expiry in
//! Redis; in SQLite, expired rows are removed by the claims that follow).
//! Keys and fingerprints were checked before a store is called.

use std::fmt;

use async_trait::async_trait;

use super::{Answer, Claim};
use crate::error::Result;

/// One claim, as a store records it.
#[derive(Clone, Copy, Debug)]
pub struct ClaimRequest<'a> {
    /// The request's idempotency key (checked).
    pub key: &'a str,
    /// The fingerprint of the request (hex).
    pub fingerprint: &'a str,
    /// This claim's random token: only it may complete or release the claim.
    pub token: &'a str,
    /// Now, Unix milliseconds (the injected clock).
    pub now_ms: u64,
    /// How long the claim is held before another request may take it over.
    pub lease_ms: u64,
    /// How long the record is kept, from its first claim.
    pub retention_ms: u64,
    /// When known at once (the aggregating path), the answer: the record is
    /// made complete in the same step.
    pub answer: Option<&'a Answer>,
}

/// Storage for idempotency records. See the module docs for the contract.
#[async_trait]
pub trait IdempotencyStore: Send + Sync + fmt::Debug + 'static {
    /// In one atomic step: no live record (none, or past its retention):
    /// makes one, held by this claim (complete at once when the request
    /// carries an answer) and answers [`Claim::Claimed`]. A record with
    /// another fingerprint: [`Claim::Mismatch`]. With an answer:
    /// [`Claim::Done`]. Held by a claim whose lease has not ended:
    /// [`Claim::InProgress`]; whose lease ended (its process died): this
    /// claim takes it over, [`Claim::Claimed`]. The same claim sent again
    /// (same token: its first reply was lost) finds itself:
    /// [`Claim::Claimed`].
    async fn claim(&self, claim: &ClaimRequest<'_>) -> Result<Claim>;

    /// Records `answer` for `key` if the claim `token` still holds it;
    /// false when it does not (taken over, or gone).
    async fn complete(&self, key: &str, token: &str, answer: &Answer) -> Result<bool>;

    /// Removes the record of `key` if the claim `token` holds it and it has
    /// no answer (the request failed in a way a retry may not): a retry
    /// then runs the request again.
    async fn release(&self, key: &str, token: &str) -> Result<bool>;
}
