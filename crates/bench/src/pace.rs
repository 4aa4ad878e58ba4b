//! How the benches' timed loops decide to go on.

/// Whether a timed loop takes another pass: always its first one, then
/// while `deadline` is ahead. A task that a loaded machine starts only after
/// its deadline still measures one pass, so a run never reports nothing.
pub(crate) fn go_on(deadline: std::time::Instant, passes: &mut u64) -> bool {
    *passes += 1;
    *passes == 1 || std::time::Instant::now() < deadline
}
