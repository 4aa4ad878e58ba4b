//! The mark of a keyed write in Redis, shared by the stores outside the
//! slice engine (time series, daily statistics, buffers).
//!
//! A keyed write's Lua call takes one more key, `{<the call's tag>}:applied:
//! <writer hex>` ([`key`]): in the call's own hash slot, so on a cluster
//! each node's call carries its own mark and each part is applied once.
//! The script (with `lua/once.lua` prepended) checks the mark first and
//! writes nothing when it is there; otherwise it writes and sets the mark,
//! kept for [`crate::idempotency::MAX_RETENTION`] (`ONCE_MS` in the Lua), atomically with the
//! write.
//!
//! What it does not do: decide what a repeat answers (each script does).

use crate::idempotency::Mark;

/// The mark's key in the hash slot of `tag` (`{...}`, braces included).
pub(crate) fn key(tag: &str, mark: &Mark) -> String {
    format!("{tag}:applied:{}", mark.id())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::idempotency::MAX_RETENTION;

    #[test]
    fn marks_live_as_long_as_the_longest_retention() {
        let lua = include_str!("lua/once.lua");
        let ms = MAX_RETENTION.as_millis();
        assert!(lua.contains(&format!("local ONCE_MS = {ms}\n")), "{lua}");
    }

    #[test]
    fn a_mark_shares_its_calls_slot() {
        let mark = Mark {
            writer: 0xab,
            at: 0,
        };
        assert_eq!(
            key("{advert:7}", &mark),
            "{advert:7}:applied:00000000000000ab"
        );
    }
}
