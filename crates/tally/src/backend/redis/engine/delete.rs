//! Deleting a series: one `engine_delete.lua` call over what its layout
//! says it holds ([`super::keys`]) and its kind's extra keys.

use super::RedisSliceStore;
use super::kinds;
use crate::engine::Space;
use crate::error::Result;
use crate::name::Name;

impl RedisSliceStore {
    pub(super) async fn delete_series(&self, space: &Space, name: &Name) -> Result<bool> {
        let keys = self.layout.space_keys(space);
        let gone = keys.deletion(space, name.as_str(), || self.clock.now())?;
        let mut invocation = self.delete.prepare_invoke();
        for key in &gone.registries {
            invocation.key(key);
        }
        invocation.arg(gone.registries.len());
        for member in &gone.members {
            invocation.arg(member);
        }
        for key in &gone.hashes {
            invocation.key(key);
        }
        if kinds::of(space.kind).is_ok_and(|k| k.current) {
            invocation.key(keys.current(name.as_str()));
        }
        if keys.folds(space.kind) {
            invocation.key(keys.pending(name.as_str()));
        }
        let deleted: u64 = invocation.invoke_async(&mut self.redis.handle()).await?;
        Ok(deleted > 0)
    }
}
