//! Idempotent writes: a write sent again with the same key is applied once
//! and answered with the first answer (the `Idempotency-Key` header;
//! docs/reference.md, "Idempotent HTTP writes").
//!
//! What it owns: the key's rules ([`check_key`]: 1 to 255 visible ASCII
//! characters), request fingerprints ([`fingerprint`]), the record protocol
//! ([`Idempotency`] over an [`IdempotencyStore`]) and the write id a key
//! stands for ([`write_seq`]).
//!
//! The protocol. A keyed request first *claims* its key in the store, in
//! one atomic step that also reads what is there: nothing (the claim makes
//! a record holding the request's fingerprint, a random token and a lease,
//! kept for the retention, default 24 h), a record with another
//! fingerprint (the key was used for another request: refused, nothing
//! changes), a record with an answer (the request is not run again: the
//! first answer is given back), or a record still held by a live claim
//! (another copy of the request is running: "in progress", retry later).
//! The claimer runs the request, then records its answer ([`Idempotency::
//! complete`]); when the request failed in a way a retry may not (the
//! backend unreachable, a server fault), it gives the claim up
//! ([`Idempotency::release`]) so that a retry runs it again. Records live
//! in the store, so the guarantee holds across restarts and across every
//! process sharing the store.
//!
//! The crash window, and how the writes close it. A process that dies
//! after applying a write but before recording its answer leaves a claim
//! whose lease ends; a retry then takes the claim over and runs the request
//! again. That is harmless because a keyed write carries its key into the
//! store: counters, statistics and gauges write with the engine write id
//! [`write_seq`] derives from the key, and the engine's stores apply a
//! write id at most once (atomically with the deltas); time series, daily
//! statistics, buffers and rate-limit checks carry the key's [`Mark`],
//! kept atomically with the write (a Redis key in each Lua call's slot, a
//! SQLite row in the transaction), and a write whose mark is there writes
//! nothing; a lock acquired with a key takes a token derived from it, so
//! the retry finds its own lease. Write ids and marks are remembered for a
//! week ([`MAX_RETENTION`], which is why the retention may not be longer).

//! Each step is sent again while the store is unreachable (for a third of
//! the lease; a claim made with its answer, for the whole lease): a claim whose reply was lost finds its own token and holds
//! the key, and completing or releasing twice is harmless. A step still
//! failing after that is an error (503): a claim may then stay behind
//! until its lease ends (a retry meanwhile is "in progress").
//!
//! The aggregating path claims the key with its answer already in it
//! ([`Idempotency::claim_answered`]), then hands the increments to the
//! aggregating writer: one extra round trip, and a retry before or after
//! the flush, in any process, finds the answer. If the process dies between
//! the two, the increments are lost as any unflushed increment would be;
//! so are they if the claim's reply is lost and the store stays
//! unreachable for a whole lease (the request is answered 503, its
//! retries find the recorded 202). The claim and the add run in a task of
//! their own, so a caller that gives up (a request timeout, a client
//! gone) does not cut them apart.
//!
//! What it does not do: decide which requests may carry a key, or make
//! HTTP answers (the server's `idempotency` layer does both).

pub mod store;

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

pub use store::{ClaimRequest, IdempotencyStore};

use crate::clock::SharedClock;
use crate::engine::plan::Item;
use crate::engine::series::{Rules, SeriesWriter};
use crate::engine::writer::Writer;
use crate::error::{Error, Result};

/// How long a record is kept by default.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(24 * 3600);
/// The longest retention: the time the counters' stores remember a write
/// id (`tally_writer` rows in SQLite, `writer:` keys in Redis), which keeps
/// a keyed counter write exact whatever happens in between.
pub const MAX_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);
/// The shortest retention.
pub const MIN_RETENTION: Duration = Duration::from_secs(1);
pub use crate::engine::keyed::{KEYED_LANE, MAX_KEY_LEN, check_key, write_seq};

/// The mark a keyed write hands its store with the write, for the stores
/// outside the slice engine (time series, daily statistics, buffers): the
/// store keeps it atomically with the write (a Redis key in the same hash
/// slot as the write's own keys, one per Lua call; a SQLite row in the
/// same transaction) for [`MAX_RETENTION`], and applies a write whose mark
/// it holds already as a no-op that reports [`crate::engine::Applied::Duplicate`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mark {
    /// The writer id of the key ([`write_seq`]).
    pub writer: u64,
    /// When the write was made, Unix seconds (SQLite drops marks older than
    /// [`MAX_RETENTION`] by it; Redis expires them).
    pub at: u64,
}

impl Mark {
    /// The mark of `key` (checked: [`check_key`]) for a write made at `now`.
    pub fn of(key: &str, now: crate::clock::Timestamp) -> Result<Mark> {
        check_key(key)?;
        Ok(Mark {
            writer: write_seq(key).writer,
            at: now.whole_secs(),
        })
    }

    /// The writer id in hex, the name of the mark in a store.
    pub fn id(&self) -> String {
        format!("{:016x}", self.writer)
    }
}

/// The fingerprint of a request made of `parts` (for HTTP: the method, the
/// path and query, the body): SHA-256, hex. Each part is length-prefixed,
/// so no two different lists of parts share a fingerprint by concatenation.
pub fn fingerprint(parts: &[&[u8]]) -> String {
    let mut hash = Sha256::new();
    for part in parts {
        hash.update((part.len() as u64).to_be_bytes());
        hash.update(part);
    }
    hex(&hash.finalize())
}

/// Lowercase hex of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// The answer recorded for a key: a status, the headers worth giving back
/// and the body, byte for byte.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Answer {
    /// The HTTP status (or, for the library's own records, the one an HTTP
    /// request would have had).
    pub status: u16,
    /// Headers to give back with it, `(name, value)`.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

impl Answer {
    /// A JSON answer with `status`.
    pub fn json(status: u16, body: &serde_json::Value) -> Self {
        Answer {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body: body.to_string().into_bytes(),
        }
    }

    /// The headers as JSON text, as the stores keep them.
    #[cfg(any(feature = "redis", feature = "sqlite"))]
    pub(crate) fn headers_json(&self) -> String {
        serde_json::to_string(&self.headers).unwrap_or_else(|_| "[]".into())
    }

    /// An answer from the stores' parts.
    #[cfg(any(feature = "redis", feature = "sqlite"))]
    pub(crate) fn from_parts(status: i64, headers: &str, body: Vec<u8>) -> Result<Self> {
        let headers = serde_json::from_str(headers)
            .map_err(|e| Error::Corrupt(format!("idempotency record headers: {e}")))?;
        let status = u16::try_from(status)
            .map_err(|_| Error::Corrupt(format!("idempotency record status {status}")))?;
        Ok(Answer {
            status,
            headers,
            body,
        })
    }
}

/// A claim that holds a key: the one who runs the request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ticket {
    /// The key.
    pub key: String,
    /// The claim's random token.
    pub token: String,
}

/// What claiming a key found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Claim {
    /// The key is this caller's now: run the request, then
    /// [`Idempotency::complete`] or [`Idempotency::release`] (for a claim
    /// made with its answer, only release, if the request fails after all).
    Claimed(Ticket),
    /// The key's request was answered already: here is the answer.
    Done(Answer),
    /// The key was used for another request (another fingerprint).
    Mismatch,
    /// Another copy of the request is running; its claim's lease ends in
    /// `retry_after_ms`.
    InProgress {
        /// Milliseconds until the running claim's lease ends.
        retry_after_ms: u64,
    },
}

/// Idempotency records in a store, kept for a retention. Cheap to clone.
///
/// # Example
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> tally::Result<()> {
/// use tally::idempotency::{Answer, Claim, fingerprint};
///
/// let tally = tally::Tally::open("sqlite::memory:").await?;
/// let idem = tally.idempotency();
/// let request = fingerprint(&[b"POST", b"/v1/orders", br#"{"n":1}"#]);
///
/// let Claim::Claimed(ticket) = idem.claim("order-7", &request).await? else {
///     unreachable!("a new key")
/// };
/// // ... run the request, then record its answer:
/// idem.complete(&ticket, &Answer::json(200, &serde_json::json!({"ok": true}))).await?;
///
/// // The same request again is answered with the first answer...
/// assert!(matches!(idem.claim("order-7", &request).await?, Claim::Done(a) if a.status == 200));
/// // ...and another request with the same key is refused.
/// let other = fingerprint(&[b"POST", b"/v1/orders", br#"{"n":2}"#]);
/// assert_eq!(idem.claim("order-7", &other).await?, Claim::Mismatch);
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct Idempotency {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    store: Arc<dyn IdempotencyStore>,
    clock: SharedClock,
    retention: Duration,
    lease: Duration,
}

/// The default lease of a claim: how long a claim whose process died keeps
/// a retry waiting.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);

impl Idempotency {
    /// Records in `store`, kept for `retention` (1 s to 7 days), read "now"
    /// from `clock`; claims are held for [`DEFAULT_LEASE`].
    pub fn new(
        store: Arc<dyn IdempotencyStore>,
        clock: SharedClock,
        retention: Duration,
    ) -> Result<Self> {
        check_retention(retention)?;
        Ok(Idempotency {
            inner: Arc::new(Inner {
                store,
                clock,
                retention,
                lease: DEFAULT_LEASE,
            }),
        })
    }

    /// The same records with claims held for `lease` (at least 100 ms, at
    /// most the retention): long enough for the slowest request to finish,
    /// short enough that a retry after a crash does not wait long.
    pub fn with_lease(&self, lease: Duration) -> Result<Self> {
        if lease < Duration::from_millis(100) || lease > self.inner.retention {
            return Err(Error::Config(format!(
                "an idempotency claim's lease must be 100 ms to the retention ({:?}), got {lease:?}",
                self.inner.retention
            )));
        }
        Ok(Idempotency {
            inner: Arc::new(Inner {
                store: self.inner.store.clone(),
                clock: self.inner.clock.clone(),
                retention: self.inner.retention,
                lease,
            }),
        })
    }

    /// How long records are kept.
    pub fn retention(&self) -> Duration {
        self.inner.retention
    }

    /// How long a claim is held.
    pub fn lease(&self) -> Duration {
        self.inner.lease
    }

    /// Claims `key` for the request whose fingerprint is `fingerprint`
    /// (see [`Claim`]); one round trip.
    pub async fn claim(&self, key: &str, fingerprint: &str) -> Result<Claim> {
        self.claim_with(key, fingerprint, None).await
    }

    /// Claims `key` with its answer already recorded: a later claim finds
    /// [`Claim::Done`] at once. For requests whose answer is known before
    /// they run (handing increments to the aggregating writer); release the
    /// ticket if the request fails after all.
    pub async fn claim_answered(
        &self,
        key: &str,
        fingerprint: &str,
        answer: &Answer,
    ) -> Result<Claim> {
        self.claim_with(key, fingerprint, Some(answer)).await
    }

    async fn claim_with(
        &self,
        key: &str,
        fingerprint: &str,
        answer: Option<&Answer>,
    ) -> Result<Claim> {
        // A claim made with its answer must learn whether it landed: if it
        // did and the caller never hears so, the request is recorded as
        // done and never run. It keeps trying for the whole lease.
        let patience = match answer {
            Some(_) => self.inner.lease,
            None => self.inner.lease / 3,
        };
        check_key(key)?;
        let token = format!("{:032x}", crate::random::u128());
        let request = ClaimRequest {
            key,
            fingerprint,
            token: &token,
            now_ms: self.inner.clock.now().as_millis(),
            lease_ms: self.inner.lease.as_millis() as u64,
            retention_ms: self.inner.retention.as_millis() as u64,
            answer,
        };
        let found = self
            .retrying(patience, || self.inner.store.claim(&request))
            .await?;
        Ok(match found {
            Claim::Claimed(_) => Claim::Claimed(Ticket {
                key: key.to_owned(),
                token,
            }),
            other => other,
        })
    }

    /// Records the answer of a claimed request; false when the claim no
    /// longer held the key (its lease ended and another took it over).
    pub async fn complete(&self, ticket: &Ticket, answer: &Answer) -> Result<bool> {
        self.retrying(self.inner.lease / 3, || {
            self.inner
                .store
                .complete(&ticket.key, &ticket.token, answer)
        })
        .await
    }

    /// A keyed batch for an aggregating writer: claims `key` with its
    /// `answer` already recorded, then adds `items` to `writer` if the
    /// claim is this call's (giving the key up if the writer refuses
    /// them), and says what the claim found. In a task of its own, so a
    /// caller that stops waiting cannot leave a claim recorded as done
    /// with its items never added. The items are then written as every
    /// aggregated write is (lost with the process before a flush, the key
    /// staying used); a retry is answered from the record, never added
    /// again.
    pub async fn add_claimed(
        &self,
        key: &str,
        fingerprint: &str,
        answer: &Answer,
        writer: &Writer,
        items: Vec<Item>,
    ) -> Result<Claim> {
        let (writer, idempotency) = (writer.clone(), self.clone());
        let (key, fingerprint, answer) = (key.to_owned(), fingerprint.to_owned(), answer.clone());
        let task = tokio::spawn(async move {
            let claim = idempotency
                .claim_answered(&key, &fingerprint, &answer)
                .await?;
            if let Claim::Claimed(ticket) = &claim
                && let Err(e) = writer.add_many(&items).await
            {
                if let Err(release) = idempotency.release(ticket).await {
                    tracing::warn!(error = %release, key, "could not give an idempotency key up");
                }
                return Err(e);
            }
            Ok(claim)
        });
        task.await
            .map_err(|e| Error::Backend(format!("a keyed add failed: {e}")))?
    }

    /// Gives a claim up, so that a retry runs the request again.
    pub async fn release(&self, ticket: &Ticket) -> Result<bool> {
        self.retrying(self.inner.lease / 3, || {
            self.inner.store.release(&ticket.key, &ticket.token)
        })
        .await
    }

    /// Runs a step of the protocol, sending it again while the store is
    /// unreachable, for up to `patience`: each step may be sent
    /// twice (a claim finds its own token, completing and releasing are
    /// idempotent), and a step whose reply was lost must not leave a record
    /// the request does not know about (a claimed key with nothing done).
    async fn retrying<T, F, Fut>(&self, patience: Duration, step: F) -> Result<T>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        let deadline = std::time::Instant::now() + patience;
        let mut pause = Duration::from_millis(10);
        loop {
            match step().await {
                Err(e) if e.is_unavailable() && std::time::Instant::now() < deadline => {
                    tracing::debug!(error = %e, "idempotency record step failed; sending it again");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_millis(200));
                }
                other => return other,
            }
        }
    }
}

/// A retention of 1 s to 7 days ([`MAX_RETENTION`]).
pub fn check_retention(retention: Duration) -> Result<()> {
    if retention < MIN_RETENTION || retention > MAX_RETENTION {
        return Err(Error::Config(format!(
            "the idempotency retention must be 1 s to 7 days (604800 s: the time the stores \
             remember a write id), got {} s",
            retention.as_secs_f64()
        )));
    }
    Ok(())
}

/// The error of a key used for another request.
pub(crate) fn reused(key: &str) -> Error {
    Error::InvalidInput(format!(
        "the idempotency key {key:?} was used for another request; use a new key for a new request"
    ))
}

impl<R: Rules> SeriesWriter<R> {
    /// [`SeriesWriter::take_many`] for a keyed request of `fingerprint`
    /// whose answer, once recorded, is `answer` (the HTTP server's): the
    /// key is claimed with the answer before the operations are handed
    /// over ([`Idempotency::add_claimed`]), so a retry is answered from
    /// the record and never taken twice.
    pub async fn take_many_claimed(
        &self,
        idempotency: &Idempotency,
        key: &str,
        fingerprint: &str,
        ops: &[R::Op],
        answer: &Answer,
    ) -> Result<Claim> {
        let items = self.items(ops)?;
        idempotency
            .add_claimed(key, fingerprint, answer, self.engine(), items)
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_visible_ascii_up_to_255() {
        assert!(check_key("a").is_ok());
        assert!(check_key(&"k".repeat(255)).is_ok());
        assert!(check_key("4f1c-9a!~{}").is_ok());
        let err = |k: &str| check_key(k).unwrap_err().to_string();
        assert!(err("").contains("1 to 255 characters, got 0"));
        assert!(err(&"k".repeat(256)).contains("got 256"));
        assert!(err("a b").contains("not ' '"));
        assert!(err("tab\t").contains("not '\\t'"));
        assert!(err("é").contains("not 'é'"));
    }

    #[test]
    fn write_ids_are_stable_per_key_and_on_their_own_lane() {
        let a = write_seq("order-1");
        assert_eq!(a, write_seq("order-1"));
        assert_ne!(a.writer, write_seq("order-2").writer);
        assert_eq!((a.lane, a.seq), (KEYED_LANE, 1));
    }

    #[test]
    fn fingerprints_tell_parts_apart() {
        let f = fingerprint(&[b"POST", b"/v1/incr", b"{}"]);
        assert_eq!(f.len(), 64);
        assert_eq!(f, fingerprint(&[b"POST", b"/v1/incr", b"{}"]));
        assert_ne!(f, fingerprint(&[b"POST", b"/v1/incr", b"{} "]));
        assert_ne!(
            fingerprint(&[b"ab", b"c"]),
            fingerprint(&[b"a", b"bc"]),
            "parts are length-prefixed"
        );
    }

    #[test]
    fn retention_is_one_second_to_seven_days() {
        assert!(check_retention(DEFAULT_RETENTION).is_ok());
        assert!(check_retention(MAX_RETENTION).is_ok());
        assert!(check_retention(Duration::from_millis(999)).is_err());
        let e = check_retention(MAX_RETENTION + Duration::from_secs(1)).unwrap_err();
        assert!(e.to_string().contains("604801 s"), "{e}");
    }
}
