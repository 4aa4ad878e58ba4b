//! Randomness: unique ids (batch ids, lock tokens) and backoff jitter.
//!
//! Everything comes from the operating system's generator (`getrandom`), so
//! ids stay unique across restarts and processes without any state here.
//! Nothing in this module reads the clock.

/// A random 64-bit number from the OS generator.
pub fn u64() -> u64 {
    getrandom::u64().unwrap_or_else(|e| panic!("the OS random generator failed: {e}"))
}

/// A random 128-bit number from the OS generator.
pub fn u128() -> u128 {
    (u128::from(u64()) << 64) | u128::from(u64())
}

/// A random number in `0..=max`.
pub fn up_to(max: u64) -> u64 {
    if max == u64::MAX {
        return u64();
    }
    u64() % (max + 1)
}

#[cfg(test)]
mod tests {
    #[test]
    fn ids_differ_and_bounds_hold() {
        assert_ne!(super::u128(), super::u128());
        for _ in 0..1000 {
            assert!(super::up_to(7) <= 7);
        }
        assert_eq!(super::up_to(0), 0);
    }
}
