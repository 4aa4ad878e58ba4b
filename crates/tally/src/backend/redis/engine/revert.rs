//! Taking back a shard's applied part of a batch that failed elsewhere on
//! a cluster (`engine_revert.lua`, by subtraction): only kinds whose table
//! entry says they can be ([`super::kinds`]), only where the layout splits
//! a batch ([`SpaceKeys::takes_back`]).

use super::super::layout::SpaceKeys;
use super::RedisSliceStore;
use super::kinds;
use super::protocol::{ApplyCall, revert_call};
use crate::engine::Space;
use crate::error::{Error, Result};

impl RedisSliceStore {
    /// Takes back a call that was applied (the default and expiring layouts, cluster only).
    pub(super) async fn run_revert(
        &self,
        keys: SpaceKeys<'_>,
        space: &Space,
        call: &ApplyCall<'_>,
    ) -> Result<()> {
        if !keys.takes_back() {
            return Ok(());
        }
        if !kinds::of(call.kind)?.revert {
            return Err(Error::Backend(format!(
                "{} values cannot be taken back on a cluster yet",
                call.kind
            )));
        }
        let Some(invocation) = revert_call(&self.revert, keys, space, call)? else {
            return Ok(());
        };
        let _: i64 = invocation.invoke_async(&mut self.redis.handle()).await?;
        Ok(())
    }
}
