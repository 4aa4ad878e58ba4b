//! The `tally` binary: a thin shim over the `tally` library.
//!
//! Parses flags (clap, with `TALLY_*` variables and a TOML file), opens the
//! configured backend and runs one command. Results go to stdout (`--json`
//! where a script reads them); logs and errors go to stderr. Exit codes: 0
//! success, 2 bad input or usage, 3 rate limited or lock held, 1 anything
//! else.
//!
//! Layout: [`cli`] (the dispatcher) over [`commands`] (one module per
//! command group), which share [`config`], [`context`] (the open store, the
//! shutdown signal) and [`output`]; nothing imports the dispatcher back.

mod cli;
mod commands;
mod config;
mod context;
mod output;

use std::process::ExitCode;

// glibc's malloc spent over half of the exact ingest path's client CPU
// (measured with perf, see docs/bench-log/ingest.md); mimalloc's
// thread-local free lists cut that. The library leaves the choice to its
// users.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = cli::parse();
    cli::init_tracing(&cli);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("tally: error: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(cli::run(cli)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("tally: error: {e:#}");
            let bad_input = e
                .downcast_ref::<tally::Error>()
                .is_some_and(|e| e.is_bad_input() || matches!(e, tally::Error::Config(_)));
            if bad_input {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}
