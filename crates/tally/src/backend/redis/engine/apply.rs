//! Applying a batch: one `engine_apply.lua` call per registry shard (one
//! for everything on a standalone server), sent concurrently; when one
//! shard refuses its part, the others are taken back ([`super::revert`]).

use std::collections::BTreeMap;

use futures::future::join_all;
use redis::{RedisError, Value as Reply};

use super::super::WriteFailure;
use super::super::layout::SpaceKeys;
use super::RedisSliceStore;
use super::protocol::{ApplyCall, Route, apply_call, short_call};
use super::PENDING_AT_MAX;
use crate::engine::store::check_stored;
use crate::engine::{Applied, Batch, SeriesWrite};
use crate::error::{Error, Result};

impl RedisSliceStore {
    pub(super) async fn apply_batch(&self, batch: &Batch) -> Result<Applied> {
        check_stored(batch.space.kind)?;
        if batch.writes.is_empty() {
            return Ok(Applied::Written);
        }
        let keys = self.layout.space_keys(&batch.space);
        if let Some(applied) = self.apply_short(keys, batch).await? {
            return Ok(applied);
        }
        let calls = self.apply_calls(keys, batch, Route::of(keys, &batch.space))?;
        let results = join_all(calls.iter().map(|call| self.run_checked(keys, batch, call))).await;
        if let Some(failed) = results.iter().position(Result::is_err) {
            let refused = results
                .iter()
                .any(|r| matches!(r, Err(e) if e.is_bad_input()));
            if !refused {
                // Outcome unknown (unreachable, not replicated): keep what
                // was written; a retry with the same write id completes
                // the batch exactly once.
                return Err(results
                    .into_iter()
                    .nth(failed)
                    .and_then(Result::err)
                    .expect("an error"));
            }
            // A shard refused its part and wrote nothing: take back the
            // shards that were written, so nothing of the batch remains.
            let undo = calls
                .iter()
                .zip(&results)
                .filter(|(_, r)| matches!(r, Ok(Applied::Written)))
                .map(|(call, _)| self.run_revert(keys, &batch.space, call));
            for undone in join_all(undo).await {
                if let Err(e) = undone {
                    tracing::error!(error = %e, "could not take back part of a failed batch");
                }
            }
            let refusal = results
                .into_iter()
                .find(|r| matches!(r, Err(e) if e.is_bad_input()))
                .and_then(Result::err);
            return Err(refusal.expect("a refusal"));
        }
        Ok(
            if results.iter().any(|r| matches!(r, Ok(Applied::Written))) {
                Applied::Written
            } else {
                Applied::Duplicate
            },
        )
    }

    /// Groups a batch's series into calls on `route`: one for everything
    /// on a standalone server, one per registry shard on a cluster.
    pub(super) fn apply_calls<'a>(
        &self,
        keys: SpaceKeys<'_>,
        batch: &'a Batch,
        route: Route,
    ) -> Result<Vec<ApplyCall<'a>>> {
        let now = self.clock.now();
        let (script, kind) = self.apply_script(batch.space.kind, route)?;
        if keys.one_call(self.redis.is_cluster()) {
            let all: Vec<&SeriesWrite> = batch.writes.iter().collect();
            return Ok(vec![apply_call(script, keys, kind, &all, batch, now, route)?]);
        }
        let mut groups: BTreeMap<u32, Vec<&'a SeriesWrite>> = BTreeMap::new();
        for write in &batch.writes {
            groups
                .entry(keys.shard(write.name.as_str()))
                .or_default()
                .push(write);
        }
        groups
            .into_values()
            .map(|writes| apply_call(script, keys, kind, &writes, batch, now, route))
            .collect()
    }

    /// Runs `call`, and when it answers that a count passed what its
    /// route may write unchecked ([`Route::Checked`]; it wrote nothing),
    /// the same series again through their pending slices, checked against
    /// them.
    async fn run_checked(
        &self,
        keys: SpaceKeys<'_>,
        batch: &Batch,
        call: &ApplyCall<'_>,
    ) -> Result<Applied> {
        match self.send(call).await? {
            Sent::Answered(applied) => Ok(applied),
            Sent::Check => {
                let route = Route::Pending { fold: false };
                let (script, kind) = self.apply_script(call.kind, route)?;
                let now = self.clock.now();
                let again = apply_call(script, keys, kind, &call.writes, batch, now, route)?;
                self.run_apply(&again).await
            }
        }
    }

    /// A write of one busy counter into the slice its pending slice was
    /// last seen at, as the short call (`sum_short.lua`): its answer, or
    /// `None` when the batch is another write or the call found the
    /// pending slice elsewhere (it wrote nothing: the full call follows).
    async fn apply_short(&self, keys: SpaceKeys<'_>, batch: &Batch) -> Result<Option<Applied>> {
        let seen = |pending: &str, field| self.pending_seen(pending) == Some(field);
        let Some((cmd, pending)) = short_call(&self.short, keys, batch, seen)? else {
            return Ok(None);
        };
        match self.redis.eval_cmd(&self.short, &cmd).await {
            Ok(Reply::Int(2)) => Ok(Some(Applied::Written)),
            Ok(Reply::Int(0)) => Ok(Some(Applied::Duplicate)),
            Ok(Reply::Int(3)) => {
                self.pending_lost(&pending);
                Ok(None)
            }
            Ok(other) => Err(Error::Backend(format!("sum_short.lua answered {other:?}"))),
            Err(WriteFailure::Redis(e)) => Err(e.into()),
            Err(WriteFailure::Tally(e)) => Err(e),
        }
    }

    /// The field `pending` was last seen at.
    pub(super) fn pending_seen(&self, pending: &str) -> Option<u64> {
        let seen = self.pending_at.lock().unwrap_or_else(|e| e.into_inner());
        seen.get(pending).copied()
    }

    /// Notes `pending` at `field`.
    fn pending_found(&self, pending: &str, field: u64) {
        let mut seen = self.pending_at.lock().unwrap_or_else(|e| e.into_inner());
        if seen.len() >= PENDING_AT_MAX && !seen.contains_key(pending) {
            seen.clear();
        }
        seen.insert(pending.to_owned(), field);
    }

    /// Forgets where `pending` was.
    fn pending_lost(&self, pending: &str) {
        let mut seen = self.pending_at.lock().unwrap_or_else(|e| e.into_inner());
        seen.remove(pending);
    }

    /// Runs `call`: its answer.
    pub(super) async fn run_apply(&self, call: &ApplyCall<'_>) -> Result<Applied> {
        match self.send(call).await? {
            Sent::Answered(applied) => Ok(applied),
            Sent::Check => Err(Error::Backend(
                "engine_apply.lua asked for a check of a call that offered none".into(),
            )),
        }
    }

    /// Sends `call` to its route's script: its answer, or the request to
    /// send it again checked.
    async fn send(&self, call: &ApplyCall<'_>) -> Result<Sent> {
        let script = self.apply_script(call.kind, call.route)?.0;
        let applied = match self.redis.eval_cmd(script, &call.cmd).await {
            Ok(Reply::Int(reply @ (1 | 2))) => {
                if let Some((pending, field)) = &call.only {
                    match reply {
                        2 => self.pending_found(pending, *field),
                        _ => self.pending_lost(pending),
                    }
                }
                Applied::Written
            }
            Ok(Reply::Int(0)) => Applied::Duplicate,
            Ok(other) => {
                return Err(Error::Backend(format!(
                    "engine_apply.lua answered {other:?}"
                )));
            }
            Err(WriteFailure::Redis(e))
                if call.route == Route::Checked && e.code() == Some("TALLY_CHECK") =>
            {
                return Ok(Sent::Check);
            }
            Err(WriteFailure::Redis(e)) => return Err(call.error(e)),
            Err(WriteFailure::Tally(e)) => return Err(e),
        };
        Ok(Sent::Answered(applied))
    }
}

/// What an apply call answered.
enum Sent {
    /// Written, or a replay.
    Answered(Applied),
    /// Nothing written: send it again through the pending slices
    /// ([`Route::Checked`]).
    Check,
}

impl ApplyCall<'_> {
    fn error(&self, e: RedisError) -> Error {
        let op = e
            .detail()
            .and_then(|d| d.split_whitespace().next())
            .and_then(|i| i.parse::<usize>().ok())
            .and_then(|i| self.ops.get(i));
        match (e.code(), op) {
            (Some("TALLY_OVERFLOW"), Some((name, c))) => match c.delta.as_sum() {
                Some(delta) => Error::Overflow {
                    kind: self.noun,
                    name: name.to_string(),
                    precision: c.precision,
                    slice: c.slice,
                    delta,
                },
                None => Error::InvalidCount(format!(
                    "merging into {} {name:?} at its {} s slice starting at {} would leave \
                     the range of its values; nothing was written",
                    self.noun, c.precision, c.slice
                )),
            },
            (Some("TALLY_FAILED"), Some((name, c))) => Error::Backend(format!(
                "redis refused to merge into {} {name:?} at precision {} s: {}",
                self.noun,
                c.precision,
                e.detail().unwrap_or_default()
            )),
            _ => Error::from(e),
        }
    }
}
