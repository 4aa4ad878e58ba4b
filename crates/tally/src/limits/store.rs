//! The storage contract of rate limiters, at the level of the domain
//! operation: "check this key against this limit, counting this cost".
//!
//! One check is one atomic step of the backend (one Lua call, one SQLite
//! transaction): the state is read, decided on by the algorithm, and
//! written back with nothing in between, so concurrent checks never admit
//! more than the limit allows. Stores use the pure algorithms of
//! [`super::fixed`], [`super::sliding`] and [`super::gcra`] (the Redis Lua
//! scripts are line-for-line ports, checked against them by the behaviour
//! suite). Inputs are validated before a store is called.

use std::fmt;

use async_trait::async_trait;

use super::{Decision, Limit};
use crate::error::Result;
use crate::idempotency::Mark;
use crate::name::Name;

/// One check handed to a store: `cost` units for `key` under `limit` at
/// `now_ms`, kept with `mark` when it is a keyed check.
#[derive(Clone, Copy, Debug)]
pub struct Check<'a> {
    /// The key checked.
    pub key: &'a Name,
    /// The limit it is checked against.
    pub limit: &'a Limit,
    /// The units counted.
    pub cost: u64,
    /// The instant of the check, Unix ms.
    pub now_ms: u64,
    /// The keyed check's mark, if any.
    pub mark: Option<&'a Mark>,
}

/// Storage of rate-limit state.
#[async_trait]
pub trait LimiterStore: Send + Sync + fmt::Debug + 'static {
    /// Checks `check.cost` units for `check.key` under `check.limit` at
    /// `check.now_ms`, atomically. With a `mark` (a keyed check), an
    /// admitted check keeps the mark with its count; a check whose mark is
    /// kept already counts nothing and is answered admitted, its
    /// `remaining`, `reset_at_ms` those of the current state
    /// ([`super::repeated`]).
    async fn check(&self, check: Check<'_>) -> Result<Decision>;
}

/// The state key suffix of a limit: algorithm and parameters, so the same
/// key under different limits keeps separate state.
pub fn state_id(limit: &Limit) -> String {
    match limit.algorithm {
        super::Algorithm::Fixed => format!("f:{}", limit.window_ms),
        super::Algorithm::Sliding => format!("s:{}", limit.window_ms),
        super::Algorithm::Gcra => {
            format!("g:{}:{}:{}", limit.window_ms, limit.limit, limit.burst())
        }
    }
}
