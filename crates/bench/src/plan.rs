//! `tally bench plan`: the pure slice math of one increment, timed (a
//! smoke check of the harness; nothing is stored).

use anyhow::Result;
use tally::engine::plan::plan;
use tally::engine::{Space, Value};

/// Plans `increments` increments over `precisions` and prints the rate.
pub fn run(increments: u64, json: bool, precisions: &[u64]) -> Result<()> {
    let name = tally::Name::new("bench")?;
    let space = Space::counters(precisions, 1);
    let started = std::time::Instant::now();
    let mut total = 0usize;
    for i in 0..increments {
        let at = tally::Timestamp::from_secs(1_700_000_000 + i % 3600)?;
        total += plan(&space, [(&name, at, Value::Sum(1))])?.len();
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
