//! `tally bench ...`: a thin call into the `tally-bench` crate, which holds
//! every bench, its flags and its JSON.
//!
//! The benches link the test harness (`tally-testkit`), so they are behind the
//! `bench` feature, off by default: `cargo install --path . --features bench`
//! builds them in. Without it clap refuses `tally bench`
//! as an unknown command, and [`explain_missing`] adds how to build it in.
//!
//! Only what comes from the configuration is resolved here: the backend, the
//! precisions, the flusher's batch size, and the `buffer` bench's sink
//! (`--sink`, `TALLY_SINK`, else the config file's).

#[cfg(feature = "bench")]
pub use with_benches::*;

#[cfg(feature = "bench")]
mod with_benches {
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
}

/// Without the `bench` feature: if clap refused `tally bench` as an unknown
/// command, says how to build it in and exits 2 (a usage error).
#[cfg(not(feature = "bench"))]
pub fn explain_missing(error: &clap::Error) {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let bench = error.kind() == ErrorKind::InvalidSubcommand
        && matches!(
            error.get(ContextKind::InvalidSubcommand),
            Some(ContextValue::String(name)) if name == "bench"
        );
    if bench {
        eprintln!(
            "tally: error: this tally was built without `tally bench` (the `bench` feature, \
             which links the test harness); build it with \
             `cargo install --path . --features bench`, or run \
             `cargo run --release --features bench -- bench ...` in a checkout"
        );
        std::process::exit(2);
    }
}
