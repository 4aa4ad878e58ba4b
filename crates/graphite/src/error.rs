//! The crate's one error type: what graphite-web answers 400 for (bad parameters, a limit
//! passed) and what it answers 500 for (the store failed).
//!
//! Owns the mapping from an error to graphite-web's status code and message shape
//! (`Invalid parameters (...)`); it does not render bodies (see `lib.rs`).

/// Why a request failed.
///
/// The text of the two 400 variants is the whole body graphite-web answers, as
/// [`Error::invalid`] and [`Error::limit`] build it: `Invalid parameters (<reason>)`, possibly
/// followed by `; targets: "..."; func: "..."` as graphite-web appends them.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A parameter, target or time graphite-web refuses: its 400.
    #[error("{0}")]
    InvalidParameters(String),
    /// A configured limit (series, points, find results) was passed: a 400 naming the limit.
    #[error("{0}")]
    Limit(String),
    /// The store failed: a 500.
    #[error("store error: {0}")]
    Store(String),
}

impl Error {
    /// The HTTP status graphite-web answers with.
    pub fn status(&self) -> u16 {
        match self {
            Error::InvalidParameters(_) | Error::Limit(_) => 400,
            Error::Store(_) => 500,
        }
    }

    /// graphite-web's `InputParameterError(reason)`: `Invalid parameters (<reason>)`.
    pub fn invalid(reason: impl std::fmt::Display) -> Error {
        Error::InvalidParameters(format!("Invalid parameters ({reason})"))
    }

    /// A limit passed, in the same shape: `Invalid parameters (<reason>)`.
    pub fn limit(reason: impl std::fmt::Display) -> Error {
        Error::Limit(format!("Invalid parameters ({reason})"))
    }

    /// The message (the body of a 400, the log line of a 500).
    pub fn message(&self) -> &str {
        match self {
            Error::InvalidParameters(m) | Error::Limit(m) | Error::Store(m) => m,
        }
    }

    /// True for a limit that was passed.
    pub fn is_limit(&self) -> bool {
        matches!(self, Error::Limit(_))
    }
}

/// The crate's result.
pub type Result<T> = std::result::Result<T, Error>;
