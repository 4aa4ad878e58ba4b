//! The write id a keyed write carries: an idempotency key's rules and the
//! [`WriteSeq`] it stands for. The engine's stores apply a write id at most
//! once, atomically with its deltas, so a keyed write sent again writes
//! nothing. The record protocol around keys (claims, answers) is
//! [`crate::idempotency`]'s, which re-exports these.

use sha2::{Digest, Sha256};

use crate::engine::store::WriteSeq;
use crate::error::{Error, Result};

/// The longest key, in characters.
pub const MAX_KEY_LEN: usize = 255;
/// The writer lane of keyed writes ([`write_seq`]); writers number
/// their lanes from 0, so the two never meet.
pub const KEYED_LANE: u32 = u32::MAX;

/// Checks an idempotency key: 1 to 255 visible ASCII characters
/// (`!` to `~`, no spaces).
pub fn check_key(key: &str) -> Result<()> {
    if key.is_empty() || key.len() > MAX_KEY_LEN {
        return Err(Error::InvalidInput(format!(
            "an idempotency key is 1 to {MAX_KEY_LEN} characters, got {}",
            key.len()
        )));
    }
    if let Some(c) = key.chars().find(|c| !c.is_ascii_graphic()) {
        return Err(Error::InvalidInput(format!(
            "an idempotency key is visible ASCII characters (`!` to `~`), not {c:?}"
        )));
    }
    Ok(())
}

/// The write id a keyed write carries: a writer id hashed from the key, the
/// keyed lane, number 1. A store that already applied it applies it no
/// more (the store remembers it for [`crate::idempotency::MAX_RETENTION`]).
pub fn write_seq(key: &str) -> WriteSeq {
    let digest = Sha256::new()
        .chain_update(b"tally idempotency key\0")
        .chain_update(key.as_bytes())
        .finalize();
    let mut writer = [0u8; 8];
    writer.copy_from_slice(&digest[..8]);
    WriteSeq {
        writer: u64::from_be_bytes(writer),
        lane: KEYED_LANE,
        seq: 1,
    }
}
