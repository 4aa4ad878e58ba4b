//! `tally stats record|get|top|delete`: statistics from the command line.
//!
//! Each command opens the store through [`context::open`], does one thing
//! with the library's [`tally::Stats`] (exact writes, one round trip) and
//! prints it: a readable table, or JSON with `--json` (the HTTP API's
//! shapes).

use anyhow::Result;
use clap::{Args, Subcommand};
use tally::stats::{DEFAULT_QUANTILES, Figure, Observation};

use super::{At, DeleteArgs, Series, print_deleted};
use crate::config::Config;
use crate::context;
use crate::output;

/// `tally stats ...`.
#[derive(Subcommand, Debug)]
pub enum StatsCommand {
    /// Record one or more values of a statistic, at every precision.
    #[command(mut_arg("at", |a| a.help("When they happened, Unix seconds with a fraction [default: now]")))]
    Record(RecordArgs),
    /// Show a statistic's slices (count, sum, min, max, mean, stddev,
    /// quantiles): every precision, or one.
    #[command(mut_arg("name", |a| a.help("The statistic")))]
    Get(GetArgs),
    /// Rank statistics by a figure over a range (the slowest pages).
    Top(TopArgs),
    /// Delete a statistic (all its precisions).
    #[command(mut_arg("name", |a| a.help("The statistic")))]
    Delete(DeleteArgs),
}

/// `tally stats record`.
#[derive(Args, Debug)]
pub struct RecordArgs {
    /// The statistic.
    name: String,
    /// The values observed (finite numbers).
    #[arg(required = true, allow_negative_numbers = true)]
    values: Vec<f64>,
    #[command(flatten)]
    at: At,
}

/// `tally stats get`.
#[derive(Args, Debug)]
pub struct GetArgs {
    #[command(flatten)]
    series: Series,
    /// Only slices starting at or after this instant (Unix seconds).
    #[arg(long, value_name = "UNIX_SECONDS")]
    from: Option<u64>,
    /// Only slices starting at or before this instant (Unix seconds).
    #[arg(long, value_name = "UNIX_SECONDS")]
    to: Option<u64>,
    /// Quantiles to report, each above 0 and at most 1 [default: 0.5,0.9,0.99].
    #[arg(long, value_name = "Q,...", value_delimiter = ',')]
    quantiles: Vec<f64>,
    /// Print JSON: an object keyed by precision, slices oldest first.
    #[arg(long)]
    json: bool,
}

/// `tally stats top`.
#[derive(Args, Debug)]
pub struct TopArgs {
    /// The figure to rank by: mean, max, count, sum, p50, p90, p99...
    #[arg(long, default_value = "mean", value_name = "FIGURE")]
    by: Figure,
    /// How many to show.
    #[arg(short = 'n', default_value_t = 10, value_name = "N")]
    n: usize,
    /// Only statistics whose names start with this (`--prefix` is the
    /// store's key prefix).
    #[arg(long, default_value = "", value_name = "PREFIX")]
    starts_with: String,
    /// The range's start, Unix seconds [default: an hour before --to].
    #[arg(long, value_name = "UNIX_SECONDS")]
    from: Option<u64>,
    /// The range's end, Unix seconds [default: now].
    #[arg(long, value_name = "UNIX_SECONDS")]
    to: Option<u64>,
    /// Print the ranking as JSON.
    #[arg(long)]
    json: bool,
}

pub async fn run(command: StatsCommand, config: &Config) -> Result<()> {
    let tally = context::open(config).await?;
    let stats = tally.stats();
    match command {
        StatsCommand::Record(RecordArgs { name, values, at }) => {
            let observations: Vec<Observation> = values
                .iter()
                .map(|&v| Observation {
                    name: name.clone(),
                    value: v,
                    at: at.at,
                    weight: None,
                })
                .collect();
            stats.record_many(&observations).await?;
        }
        StatsCommand::Get(GetArgs {
            series: Series { name, precision },
            from,
            to,
            quantiles,
            json,
        }) => {
            if let Some(q) = quantiles.iter().find(|q| !(**q > 0.0 && **q <= 1.0)) {
                anyhow::bail!(tally::Error::InvalidInput(format!(
                    "--quantiles: {q} is not a quantile (above 0, at most 1)"
                )));
            }
            let qs = if quantiles.is_empty() {
                DEFAULT_QUANTILES.to_vec()
            } else {
                quantiles
            };
            let series: Vec<(u64, Vec<tally::stats::SliceSummary>)> = match precision {
                Some(p) => vec![(p, stats.get(&name, p, &qs).await?)],
                None => stats
                    .get_all(&name, &qs)
                    .await?
                    .into_iter()
                    .map(|s| (s.precision, s.slices))
                    .collect(),
            };
            let keep = |s: &tally::stats::SliceSummary| {
                from.is_none_or(|f| s.start >= f) && to.is_none_or(|t| s.start <= t)
            };
            let series: Vec<(u64, Vec<_>)> = series
                .into_iter()
                .map(|(p, slices)| (p, slices.into_iter().filter(keep).collect()))
                .collect();
            if json {
                let map: serde_json::Map<String, serde_json::Value> = series
                    .iter()
                    .map(|(p, s)| (p.to_string(), serde_json::to_value(s).unwrap_or_default()))
                    .collect();
                println!("{}", serde_json::Value::Object(map));
            } else {
                println!("{name}");
                for (p, slices) in &series {
                    println!(
                        "at {} precision: {} slices",
                        output::precision_label(*p),
                        slices.len()
                    );
                    if slices.is_empty() {
                        continue;
                    }
                    println!(
                        "{:<22} {:>10} {:>12} {:>10} {:>10} {:>10} {:>10}  quantiles",
                        "slice start (UTC)", "count", "sum", "min", "max", "mean", "stddev"
                    );
                    for s in slices {
                        let f = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.4}"));
                        let qs: Vec<String> = s
                            .summary
                            .quantiles
                            .iter()
                            .map(|(q, v)| format!("{q}={v:.4}"))
                            .collect();
                        println!(
                            "{:<22} {:>10} {:>12.4} {:>10} {:>10} {:>10} {:>10}  {}",
                            output::utc(s.start),
                            s.summary.count,
                            s.summary.sum,
                            f(s.summary.min),
                            f(s.summary.max),
                            f(s.summary.mean),
                            f(s.summary.stddev),
                            qs.join(" ")
                        );
                    }
                }
            }
        }
        StatsCommand::Top(TopArgs {
            by,
            n,
            starts_with,
            from,
            to,
            json,
        }) => {
            let to = match to {
                Some(t) => t,
                None => tally.clock().now().whole_secs(),
            };
            let from = from.unwrap_or(to.saturating_sub(3600));
            let ranked = stats.top(by, &starts_with, from, to, n).await?;
            output::print(&ranked, json, |ranked| {
                for r in ranked {
                    println!("{:>14.4}  {}  (count {})", r.value, r.name, r.summary.count);
                }
            })?;
        }
        StatsCommand::Delete(DeleteArgs { name, json }) => {
            print_deleted(&name, stats.delete(&name).await?, json, "statistic")?;
        }
    }
    Ok(())
}
