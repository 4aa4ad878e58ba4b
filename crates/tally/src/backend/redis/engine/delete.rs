//! Deleting a series: one `engine_delete.lua` call.

use super::super::expiring;
use super::super::layout;
use super::RedisSliceStore;
use crate::engine::{Kind, Space};
use crate::error::Result;
use crate::name::Name;

impl RedisSliceStore {
    pub(super) async fn delete_series(&self, space: &Space, name: &Name) -> Result<bool> {
        let keys = self.layout.space_keys(space);
        let shard = keys.shard(name.as_str());
        let mut invocation = self.delete.prepare_invoke();
        invocation.key(keys.registry(shard));
        if keys.is_expiring() {
            invocation.key(keys.ends(shard)).arg(2).arg(name.as_str());
            // Every chunk that can still exist: older ones have expired.
            let now = self.clock.now();
            for r in &space.resolutions {
                let m = expiring::math(space, r.seconds)?;
                for chunk in m.chunks(now, 0, u64::MAX) {
                    invocation.key(keys.chunk(r.seconds, chunk, name.as_str()));
                }
            }
        } else {
            invocation.arg(1);
            if keys.is_book() {
                for r in &space.resolutions {
                    invocation.arg(layout::ria_member(r.seconds, name.as_str()));
                }
            } else {
                invocation.arg(name.as_str());
            }
            for r in &space.resolutions {
                invocation.key(keys.hash(r.seconds, name.as_str()));
            }
        }
        if space.kind == Kind::Gauge {
            invocation.key(keys.current(name.as_str()));
        }
        let deleted: u64 = invocation.invoke_async(&mut self.redis.handle()).await?;
        Ok(deleted > 0)
    }
}
