//! Taking back a shard's applied part of a batch that failed elsewhere on
//! a cluster (`engine_revert.lua`).

use std::collections::BTreeMap;

use super::super::expiring;
use super::super::layout::{self, SpaceKeys};
use super::RedisSliceStore;
use super::apply::ApplyCall;
use crate::engine::Space;
use crate::error::{Error, Result};

impl RedisSliceStore {
    /// Takes back a call that was applied (tagged layouts, cluster only).
    pub(super) async fn run_revert(
        &self,
        keys: SpaceKeys<'_>,
        space: &Space,
        call: &ApplyCall<'_>,
    ) -> Result<()> {
        if keys.is_book() {
            return Ok(());
        }
        if !call.kind.has_undo() {
            return Err(Error::Backend(format!(
                "{} values cannot be taken back on a cluster yet",
                call.kind
            )));
        }
        let Some((first, _)) = call.ops.first() else {
            return Ok(());
        };
        let shard = keys.shard(first.as_str());
        let registry = keys.registry(shard);
        let mut invocation = self.revert.prepare_invoke();
        invocation.key(&registry);
        let expiring = keys.is_expiring();
        if expiring {
            invocation.key(keys.ends(shard));
        }
        // The call's KEYS, rebuilt: its lane record (if any) stands in
        // at index 1 so that the ops' indices still match, shifted for the
        // registry keys placed first.
        let shift = 1 + usize::from(expiring);
        let mut hash_keys: Vec<String> = Vec::new();
        if call.marker {
            hash_keys.push(registry.clone());
        }
        for (i, (name, c)) in call.ops.iter().enumerate() {
            if hash_keys.len() < call.op_keys[i] {
                hash_keys.push(if expiring {
                    let chunk = expiring::math(space, c.resolution)?.chunk_of(c.slice);
                    keys.chunk(c.resolution, chunk, name.as_str())
                } else {
                    keys.hash(c.resolution, name.as_str())
                });
            }
        }
        for key in &hash_keys {
            invocation.key(key);
        }
        // The writer lane's record keeps the reverted number: the writer's
        // next numbers are above it, so they still apply.
        invocation
            .arg(if expiring { layout::ENDS_SCALE } else { 0 })
            .arg(call.ops.len());
        let mut series: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for (i, (name, c)) in call.ops.iter().enumerate() {
            let key_index = call.op_keys[i] + shift;
            invocation
                .arg(key_index)
                .arg(c.slice)
                .arg(c.delta.as_sum().unwrap_or_default());
            let list = series.entry(name.as_str()).or_default();
            if !list.contains(&key_index) {
                list.push(key_index);
            }
        }
        for (name, list) in series {
            invocation.arg(name).arg(list.len());
            for i in list {
                invocation.arg(i);
            }
        }
        let _: i64 = invocation.invoke_async(&mut self.redis.handle()).await?;
        Ok(())
    }
}
