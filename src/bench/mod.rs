//! `tally bench`: benchmarks anyone can rerun, each a subcommand.
//!
//! Every bench measures its baseline in the same run (e.g. raw
//! `redis-benchmark` on the same server) and reports ratios, because this
//! kind of machine is shared and noisy. Every ingest bench checks afterwards
//! that the stored totals equal what it sent. `--json` prints one object per
//! bench for scripts and for BENCHMARKS.md.

mod buffer;

use anyhow::Result;
use clap::Subcommand;

use crate::config::Config;

/// The benchmarks.
#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// Time the pure slice math of one increment (a smoke check of the harness).
    Plan {
        /// Increments to plan.
        #[arg(long, default_value_t = 1_000_000)]
        increments: u64,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// SQL statements and wall time of one increment stream written naively
    /// (one upsert per increment) and through the buffer, in the same run.
    /// Creates and drops its own tables (`tally_bench_*`) in the sink.
    Buffer {
        /// The sink URL (postgres://... or sqlite:PATH) [default: from the config file].
        #[arg(long, env = "TALLY_SINK", value_name = "URL")]
        sink: Option<String>,
        /// Increments in the stream.
        #[arg(long, default_value_t = 20_000)]
        increments: u64,
        /// Rows they go to (half go to row 0, a hot row).
        #[arg(long, default_value_t = 100)]
        rows: u64,
        /// Concurrent writers.
        #[arg(long, default_value_t = 16)]
        writers: u64,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

pub async fn run(command: BenchCommand, config: &Config) -> Result<()> {
    match command {
        BenchCommand::Plan { increments, json } => plan(increments, json, config),
        BenchCommand::Buffer {
            sink,
            increments,
            rows,
            writers,
            json,
        } => {
            buffer::run(
                buffer::BufferBench {
                    sink,
                    increments,
                    rows,
                    writers,
                    json,
                },
                config,
            )
            .await
        }
    }
}

fn plan(increments: u64, json: bool, config: &Config) -> Result<()> {
    use tally::counters::slice::{ValidIncrement, plan};
    let name = tally::Name::new("bench")?;
    let started = std::time::Instant::now();
    let mut total = 0usize;
    for i in 0..increments {
        let inc = ValidIncrement {
            name: name.clone(),
            count: 1,
            at: tally::Timestamp::from_secs(1_700_000_000 + i % 3600)?,
        };
        total += plan(std::slice::from_ref(&inc), &config.counters.precisions)?.len();
    }
    let secs = started.elapsed().as_secs_f64();
    let rate = increments as f64 / secs;
    if json {
        println!(
            "{}",
            serde_json::json!({ "bench": "plan", "increments": increments, "seconds": secs, "per_second": rate })
        );
    } else {
        println!("planned {increments} increments ({total} writes) in {secs:.3} s: {rate:.0}/s");
    }
    Ok(())
}
