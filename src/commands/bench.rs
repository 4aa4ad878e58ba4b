//! `tally bench ...`: a thin call into the `tally-bench` crate, which holds
//! every bench, its flags and its JSON.
//!
//! Only what comes from the configuration is resolved here: the backend, the
//! precisions, the flusher's batch size, and the `buffer` bench's sink
//! (`--sink`, `TALLY_SINK`, else the config file's).

use anyhow::Result;
pub use tally_bench::BenchCommand;
use tally_bench::Settings;

use crate::config::Config;

pub async fn run(mut command: BenchCommand, config: &Config) -> Result<()> {
    if let BenchCommand::Buffer { sink, .. } = &mut command {
        *sink = Some(config.buffers.sink_url(sink.as_deref())?);
    }
    let settings = Settings {
        backend: config.backend.clone(),
        counters: config.counters.clone(),
        flusher: config.buffers.flusher.clone(),
    };
    tally_bench::run(command, &settings).await
}
