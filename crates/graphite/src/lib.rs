//! graphite-web 1.1.10's render language and answers, over a store trait: what a Graphite
//! server needs to answer Grafana exactly as graphite-web would on the same data.
//!
//! # Layout
//!
//! | module | owns |
//! | --- | --- |
//! | [`grammar`] | parsing a target into an [`Expr`] |
//! | [`attime`] | time references and offsets (`-1h`, `noon+1d`, ...) |
//! | [`glob`] | path patterns: wildcards, brace expansion, matching |
//! | [`window`](mod@window) | whisper's archive choice and slots for one fetch |
//! | [`series`] | the series value, its consolidation and datapoints |
//! | [`store`] | the trait an embedder implements |
//! | [`functions`] | the [`Function`] trait, metadata, validation, the built-ins; `functions/eval.rs`: prefetch, merge and evaluation of targets (it calls the functions, and they evaluate their own targets) |
//! | `render` | `/render` options, maxDataPoints, JSON and CSV |
//! | `find` | `/metrics/find` and `/metrics/expand` |
//! | `form` | decoding query strings and form bodies, the last value of a parameter |
//! | [`Limits`], [`Answer`] | a request's limits; an HTTP answer |
//! | `json`, `pyfmt`, `pyre` | Python's JSON text, number text and `re.sub` |
//! | `oracle_cases` | (tests) cases written by graphite-web's own grammar and `attime.py` |
//!
//! Nothing here reads a clock, a file or a socket: `now` and the store are given.

#![deny(missing_docs)]

use std::sync::Arc;

mod answer;
pub mod attime;
mod error;
mod find;
mod form;
pub mod functions;
pub mod glob;
pub mod grammar;
mod json;
mod limits;
#[cfg(test)]
mod oracle_cases;
mod percent;
mod pyfmt;
mod pyre;
mod render;
pub mod series;
pub mod store;
pub mod window;

pub use answer::Answer;
pub use error::{Error, Result};
pub use form::parse_form;
pub use functions::{Args, Context, Function, Param, ParamType, Signature, Value};
pub use glob::Glob;
pub use grammar::Expr;
pub use limits::Limits;
pub use series::{Consolidation, Series};
pub use store::{Fetch, Node, Store};
pub use window::{Archive, Window, window};

/// Which of graphite-web's two browsing endpoints a request is for
/// ([`Graphite::browse`]): the same parameters, answered with the nodes or the paths a
/// pattern matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Browse {
    /// `/metrics/find` (`format` `treejson`, the default, `completer` or `nodelist`).
    Find,
    /// `/metrics/expand`: `{"results": [...]}` (or by query with `groupByExpr=1`).
    Expand,
}

/// The render engine: the function registry (built-ins and an embedder's own).
#[derive(Clone)]
pub struct Graphite {
    registry: functions::Registry,
}

impl Default for Graphite {
    fn default() -> Graphite {
        Graphite::new()
    }
}

impl Graphite {
    /// The built-in functions.
    pub fn new() -> Graphite {
        Graphite {
            registry: functions::Registry::builtin(),
        }
    }

    /// Adds (or replaces, by name) a function.
    pub fn with_function(mut self, f: Arc<dyn Function>) -> Graphite {
        self.registry.add(f);
        self
    }

    /// `/render`: `params` are the query string's and the form body's pairs in order
    /// (`target` repeatable; for other names the last one counts), `now` the clock.
    pub async fn render(
        &self,
        store: &dyn Store,
        params: &[(String, String)],
        now: i64,
        limits: &Limits,
    ) -> Answer {
        Answer::of(render::render(&self.registry, store, params, now, limits).await)
    }

    /// `/metrics/find` as graphite-web answers a client sending `Accept: application/json`
    /// or none (see [`Graphite::browse`]).
    pub async fn find(
        &self,
        store: &dyn Store,
        params: &[(String, String)],
        limits: &Limits,
    ) -> Answer {
        self.browse(Browse::Find, store, params, None, limits).await
    }

    /// `/metrics/expand` (`Accept` absent; see [`Graphite::browse`]).
    pub async fn expand(
        &self,
        store: &dyn Store,
        params: &[(String, String)],
        limits: &Limits,
    ) -> Answer {
        self.browse(Browse::Expand, store, params, None, limits)
            .await
    }

    /// `/metrics/find` or `/metrics/expand` (see [`Browse`]). The request's `Accept`
    /// header decides the JSON text as in graphite-web: exactly `application/json` (or
    /// none) escapes non-ASCII, anything else (Grafana's `application/json, text/plain,
    /// */*`) writes UTF-8 and says `;charset=utf-8`.
    pub async fn browse(
        &self,
        endpoint: Browse,
        store: &dyn Store,
        params: &[(String, String)],
        accept: Option<&str>,
        limits: &Limits,
    ) -> Answer {
        let request = find::Request {
            store,
            params,
            accept,
            limits,
        };
        Answer::of(match endpoint {
            Browse::Find => find::find(request).await,
            Browse::Expand => find::expand(request).await,
        })
    }

    /// `/functions`: every registered function in graphite-web's shape (`group=`,
    /// `grouped=1`, `type=pie`, `pretty=1` as it reads them).
    pub fn functions(&self, params: &[(String, String)]) -> Answer {
        render::functions_list(&self.registry, params)
    }

    /// `/functions/<name>`: one function's entry, or graphite-web's 404.
    pub fn function(&self, name: &str, params: &[(String, String)]) -> Answer {
        render::function_details(&self.registry, name, params)
    }

    /// Parses a target, as `/render` does (exposed for embedders and tests).
    pub fn parse_target(&self, target: &str) -> Result<Expr> {
        Expr::parse(target)
    }
}
