//! The one error type of the `tally` crate.
//!
//! Expected outcomes (a rate limit reached, a lock held, a counter not found)
//! are return values, not errors. Errors are either bad input, which changed
//! nothing and names the problem ([`Error::is_bad_input`]), or a fault of the
//! backend ([`Error::is_unavailable`] when it could not be reached).

use std::fmt;

/// A `Result` with Tally's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in Tally.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A counter (or other) name was rejected.
    #[error("invalid name {name:?}: {reason}")]
    InvalidName {
        /// The name as given (truncated for display when very long).
        name: String,
        /// Why it was rejected.
        reason: String,
    },
    /// A precision that is not configured was asked for.
    #[error("precision {precision} s is not configured (configured: {configured})")]
    UnknownPrecision {
        /// What was asked for.
        precision: u64,
        /// The configured precisions, comma-separated.
        configured: String,
    },
    /// A time that is not finite, negative or too far in the future.
    #[error("invalid time: {0}")]
    InvalidTime(String),
    /// A count outside the accepted range.
    #[error("invalid count: {0}")]
    InvalidCount(String),
    /// Applying the increment would overflow a stored 64-bit count; nothing
    /// was written.
    #[error(
        "{} would overflow its {precision} s slice starting at {slice}; nothing was written",
        overflowing(kind, name, *delta)
    )]
    Overflow {
        /// What kind of series overflowed, in the words of its service
        /// (`engine::store::Space::noun`): `"counter"` for a counter, the
        /// kind whose stored counts are 64-bit sums; other kinds refuse
        /// what leaves their range as [`Error::InvalidCount`] or
        /// [`Error::InvalidInput`], naming their kind.
        kind: &'static str,
        /// The series.
        name: String,
        /// The precision of the slice that would overflow.
        precision: u64,
        /// The slice start.
        slice: u64,
        /// The (merged) delta that did not fit.
        delta: i64,
    },
    /// Input that is malformed in another way (a batch too large, an empty
    /// batch, a bad cursor...).
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// A bounded buffer or queue is full (or shut down); retry later.
    #[error("overloaded: {0}")]
    Overloaded(String),
    /// A configuration value was rejected at start.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The backend could not be reached (connection refused or dropped,
    /// timeout, database busy for too long).
    #[error("backend unavailable: {0}")]
    Unavailable(String),
    /// A write was applied on the Redis master but fewer replicas than
    /// required confirmed it in time (see `ReplicationWait`); retrying it
    /// with the same write id is safe.
    #[error(
        "write applied on the master but confirmed by {confirmed} of {wanted} replicas in time; \
         retry it with the same write id"
    )]
    NotReplicated {
        /// Replicas that confirmed.
        confirmed: u32,
        /// Replicas required.
        wanted: u32,
    },
    /// The backend answered with an error.
    #[error("backend error: {0}")]
    Backend(String),
    /// Stored data that Tally cannot read.
    #[error("stored data is not what Tally expects: {0}")]
    Corrupt(String),
}

/// The start of an overflow's message: what was being added to what, with
/// the verb of the kind ("incrementing counter "x" by 5", "adding 5 to
/// gauge "y"").
fn overflowing(kind: &str, name: &str, delta: i64) -> String {
    match kind {
        "counter" => format!("incrementing counter {name:?} by {delta}"),
        "" => format!("adding {delta} to series {name:?}"),
        kind => format!("adding {delta} to {kind} {name:?}"),
    }
}

impl Error {
    /// True for errors caused by the caller's input; nothing was written.
    pub fn is_bad_input(&self) -> bool {
        matches!(
            self,
            Error::InvalidName { .. }
                | Error::UnknownPrecision { .. }
                | Error::InvalidTime(_)
                | Error::InvalidCount(_)
                | Error::Overflow { .. }
                | Error::InvalidInput(_)
        )
    }

    /// An [`Error::Overflow`]'s kind, series, precision, slice and delta;
    /// `None` for any other error.
    pub fn overflow(&self) -> Option<(&'static str, &str, u64, u64, i64)> {
        match self {
            Error::Overflow {
                kind,
                name,
                precision,
                slice,
                delta,
            } => Some((kind, name, *precision, *slice, *delta)),
            _ => None,
        }
    }

    /// True when the backend could not be reached; the operation may be
    /// retried.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, Error::Unavailable(_) | Error::NotReplicated { .. })
    }

    /// A short machine-readable code, used in JSON error bodies.
    pub fn code(&self) -> &'static str {
        match self {
            Error::InvalidName { .. } => "invalid_name",
            Error::UnknownPrecision { .. } => "unknown_precision",
            Error::InvalidTime(_) => "invalid_time",
            Error::InvalidCount(_) => "invalid_count",
            Error::Overflow { .. } => "overflow",
            Error::InvalidInput(_) => "invalid_input",
            Error::Config(_) => "invalid_config",
            Error::Overloaded(_) => "overloaded",
            Error::Unavailable(_) => "backend_unavailable",
            Error::NotReplicated { .. } => "not_replicated",
            Error::Backend(_) => "backend_error",
            Error::Corrupt(_) => "corrupt_data",
        }
    }

    pub(crate) fn invalid_name(name: &str, reason: impl fmt::Display) -> Self {
        let shown: String = if name.len() > 64 {
            let mut end = 64;
            while !name.is_char_boundary(end) {
                end -= 1;
            }
            format!("{}…", &name[..end])
        } else {
            name.to_owned()
        };
        Error::InvalidName {
            name: shown,
            reason: reason.to_string(),
        }
    }
}

#[cfg(feature = "redis")]
impl From<redis::RedisError> for Error {
    fn from(e: redis::RedisError) -> Self {
        if e.is_io_error()
            || e.is_connection_dropped()
            || e.is_connection_refusal()
            || e.is_timeout()
            || e.is_cluster_error()
            || matches!(
                e.kind(),
                redis::ErrorKind::Server(redis::ServerErrorKind::BusyLoading)
                    | redis::ErrorKind::Server(redis::ServerErrorKind::TryAgain)
                    | redis::ErrorKind::Server(redis::ServerErrorKind::ClusterDown)
                    | redis::ErrorKind::Server(redis::ServerErrorKind::MasterDown)
                    | redis::ErrorKind::Server(redis::ServerErrorKind::ReadOnly)
            )
        {
            Error::Unavailable(format!("redis: {e}"))
        } else {
            Error::Backend(format!("redis: {e}"))
        }
    }
}

#[cfg(feature = "redis")]
impl From<redis::ParsingError> for Error {
    fn from(e: redis::ParsingError) -> Self {
        Error::Backend(format!("redis answered something unexpected: {e}"))
    }
}

#[cfg(feature = "postgres")]
impl From<sqlx::Error> for Error {
    fn from(e: sqlx::Error) -> Self {
        match &e {
            sqlx::Error::Io(_)
            | sqlx::Error::Tls(_)
            | sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::WorkerCrashed => Error::Unavailable(format!("sql: {e}")),
            _ => Error::Backend(format!("sql: {e}")),
        }
    }
}

#[cfg(feature = "sqlite")]
impl From<rusqlite::Error> for Error {
    fn from(e: rusqlite::Error) -> Self {
        match e.sqlite_error_code() {
            Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => {
                Error::Unavailable(format!("sqlite: {e}"))
            }
            _ => Error::Backend(format!("sqlite: {e}")),
        }
    }
}
