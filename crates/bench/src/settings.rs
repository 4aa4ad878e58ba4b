//! What the benches take from the `tally` binary's configuration; the
//! benches' own sizes are flags of each subcommand.

use tally::buffers::FlusherSettings;
use tally::{BackendConfig, CounterSettings};

/// What the benches take from the `tally` binary's configuration.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The configured backend: `buffer` buffers its stream in it.
    pub backend: BackendConfig,
    /// The configured counters: `plan` plans over their precisions.
    pub counters: CounterSettings,
    /// The configured flusher: `buffer` flushes in batches of its size.
    pub flusher: FlusherSettings,
}
