//! `tally ts ...`: the time-series store from the command line.

use anyhow::{Result, bail};
use clap::Subcommand;
use tally::tsdb::{RangeSeries, RangeTotals, TopItems};
use tally::{TsIncrement, TsQuery};

use crate::config::Config;
use crate::context;
use crate::output;

/// Time-series commands. Times are Unix seconds, `now`, or relative to now
/// (`-90s`, `-15m`, `-6h`, `-7d`).
#[derive(Subcommand, Debug)]
pub enum TsCommand {
    /// Add COUNT (default 1) to KEY of MODEL, at every precision.
    Incr {
        /// The model (e.g. `group`).
        model: String,
        /// The key (an integer or a string).
        key: String,
        /// The amount, 1 to 2^53.
        #[arg(default_value_t = 1)]
        count: i64,
        /// When [default: now].
        #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
        at: Option<String>,
    },
    /// Show the series of one or more keys, every slice of the range.
    Get(KeysOverRange),
    /// Show each key's total over the range.
    Sums(KeysOverRange),
    /// Record distinct VALUES seen by KEY (for distinct counts).
    Record {
        /// The model (e.g. `group`).
        model: String,
        /// The key.
        key: String,
        /// The values seen (a user id, an address...).
        #[arg(required = true)]
        values: Vec<String>,
        /// When [default: now].
        #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
        at: Option<String>,
    },
    /// Distinct counts: each key's total over the range, its series
    /// (--series), or the union across keys (--union).
    Distinct {
        #[command(flatten)]
        of: ModelKeys,
        #[command(flatten)]
        range: RangeArgs,
        /// Per slice instead of over the range.
        #[arg(long, conflicts_with = "union")]
        series: bool,
        /// One figure for all keys together.
        #[arg(long)]
        union: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Count occurrences of ITEMs (ITEM or ITEM=COUNT) for KEY.
    Hit {
        /// The model (e.g. `group`).
        model: String,
        /// The key.
        key: String,
        /// The items seen, each once or COUNT times.
        #[arg(required = true, value_name = "ITEM[=COUNT]")]
        items: Vec<String>,
        /// When [default: now].
        #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
        at: Option<String>,
    },
    /// The most frequent items of KEY over the range.
    Top {
        /// The model (e.g. `group`).
        model: String,
        /// The key.
        key: String,
        /// How many.
        #[arg(short, long, default_value_t = 10)]
        n: usize,
        #[command(flatten)]
        range: RangeArgs,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Move everything of FROM into INTO (FROM is left empty).
    Merge {
        /// The model (e.g. `group`).
        model: String,
        /// The key that receives everything.
        into: String,
        /// The key emptied into INTO.
        from: String,
    },
    /// Delete every precision's data of the keys.
    Delete {
        #[command(flatten)]
        of: ModelKeys,
    },
}

/// A model and one or more of its keys.
#[derive(clap::Args, Debug)]
pub struct ModelKeys {
    /// The model (e.g. `group`).
    model: String,
    /// The keys.
    #[arg(required = true)]
    keys: Vec<String>,
}

/// Keys of a model over a time range, printed as a table or JSON.
#[derive(clap::Args, Debug)]
pub struct KeysOverRange {
    #[command(flatten)]
    of: ModelKeys,
    #[command(flatten)]
    range: RangeArgs,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

impl KeysOverRange {
    /// The query of these keys over this range.
    fn query(&self, now: f64) -> Result<TsQuery> {
        self.range.query(&self.of.model, self.of.keys.clone(), now)
    }
}

/// A time range and an optional precision (`--rollup`).
#[derive(clap::Args, Debug)]
pub struct RangeArgs {
    /// Start of the range (`-1h`: an hour ago).
    #[arg(
        long,
        value_name = "TIME",
        allow_hyphen_values = true,
        default_value = "-1h"
    )]
    start: String,
    /// End of the range.
    #[arg(
        long,
        value_name = "TIME",
        allow_hyphen_values = true,
        default_value = "now"
    )]
    end: String,
    /// Precision in seconds, one of the --rollups [default: the finest that
    /// covers the range].
    #[arg(long, value_name = "SECONDS")]
    rollup: Option<u64>,
}

impl RangeArgs {
    /// The read of `keys` of `model` over this range, `now` being now.
    fn query(
        &self,
        model: &str,
        keys: impl IntoIterator<Item = String>,
        now: f64,
    ) -> Result<TsQuery> {
        let (start, end) = (parse_time(&self.start, now)?, parse_time(&self.end, now)?);
        Ok(TsQuery::new(model, keys, start, end).precision(self.rollup))
    }
}

/// Parses `now`, `-15m`-style offsets from `now`, or Unix seconds.
pub fn parse_time(text: &str, now: f64) -> Result<f64> {
    let t = text.trim();
    if t == "now" {
        return Ok(now);
    }
    if let Some(rel) = t.strip_prefix('-') {
        let unit = rel.chars().last().unwrap_or('s');
        let (digits, scale) = match unit {
            's' => (&rel[..rel.len() - 1], 1.0),
            'm' => (&rel[..rel.len() - 1], 60.0),
            'h' => (&rel[..rel.len() - 1], 3600.0),
            'd' => (&rel[..rel.len() - 1], 86_400.0),
            _ => (rel, 1.0),
        };
        if let Ok(n) = digits.parse::<f64>() {
            return Ok(now - n * scale);
        }
    } else if let Ok(secs) = t.parse::<f64>() {
        return Ok(secs);
    }
    bail!(tally::Error::InvalidTime(format!(
        "{text:?} is not a time: use Unix seconds, `now`, or -90s, -15m, -6h, -7d"
    )))
}

fn parse_item(text: &str) -> Result<(String, i64)> {
    match text.rsplit_once('=') {
        Some((item, count)) => match count.parse() {
            Ok(n) => Ok((item.to_owned(), n)),
            Err(_) => bail!(tally::Error::InvalidCount(format!(
                "{text:?}: the count after `=` must be a whole number"
            ))),
        },
        None => Ok((text.to_owned(), 1)),
    }
}

pub async fn run(command: TsCommand, config: &Config) -> Result<()> {
    let tally = context::open(config).await?;
    let ts = tally.tsdb();
    let now = tally.clock().now().as_secs_f64();
    let time = |t: &Option<String>| t.as_deref().map(|t| parse_time(t, now)).transpose();
    match command {
        TsCommand::Incr {
            model,
            key,
            count,
            at,
        } => {
            let mut inc = TsIncrement::new(model, key).count(count);
            inc.at = time(&at)?;
            ts.incr_multi(&[inc]).await?;
        }
        TsCommand::Get(k) => {
            let series = ts.get_range(&k.query(now)?).await?;
            print_series(&k.of.model, &series, k.json)?;
        }
        TsCommand::Sums(k) => print_totals(&ts.get_sums(&k.query(now)?).await?, k.json)?,
        TsCommand::Record {
            model,
            key,
            values,
            at,
        } => ts.record(&model, key, &values, time(&at)?).await?,
        TsCommand::Distinct {
            of: ModelKeys { model, keys },
            range,
            series,
            union,
            json,
        } => {
            let query = range.query(&model, keys, now)?;
            if series {
                let s = ts.get_distinct_series(&query).await?;
                print_series(&model, &s, json)?;
            } else if union {
                let u = ts.get_distinct_union(&query).await?;
                if json {
                    println!("{}", serde_json::json!({ "distinct": u.total }));
                } else {
                    println!("{}", u.total);
                }
            } else {
                let t = ts.get_distinct_totals(&query).await?;
                print_totals(&t, json)?;
            }
        }
        TsCommand::Hit {
            model,
            key,
            items,
            at,
        } => {
            let items = items
                .iter()
                .map(|i| parse_item(i))
                .collect::<Result<Vec<_>>>()?;
            ts.record_frequency(&model, key, &items, time(&at)?).await?;
        }
        TsCommand::Top {
            model,
            key,
            n,
            range,
            json,
        } => {
            let top = ts.get_top(&range.query(&model, [key], now)?, n).await?;
            print_top(&top, json)?;
        }
        TsCommand::Merge { model, into, from } => ts.merge(&model, into, from).await?,
        TsCommand::Delete {
            of: ModelKeys { model, keys },
        } => ts.delete(&model, &keys).await?,
    }
    Ok(())
}

fn print_series(model: &str, series: &RangeSeries, json: bool) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string(series)?);
        return Ok(());
    }
    println!(
        "{model} at {} rollup",
        output::precision_label(series.rollup)
    );
    for s in &series.series {
        let counts: Vec<i64> = s.points.iter().map(|p| p.count).collect();
        let total: i128 = counts.iter().map(|&c| i128::from(c)).sum();
        let first = s
            .points
            .first()
            .map(|p| output::utc(p.start))
            .unwrap_or_default();
        println!(
            "{:<20} {:>12}  from {first}  {}",
            s.key,
            total,
            output::sparkline(&counts[counts.len().saturating_sub(60)..])
        );
    }
    Ok(())
}

fn print_totals(totals: &RangeTotals, json: bool) -> Result<()> {
    output::print(totals, json, |totals| {
        for t in &totals.totals {
            println!("{}\t{}", t.key, t.total);
        }
    })
}

fn print_top(top: &TopItems, json: bool) -> Result<()> {
    output::print(top, json, |top| {
        for i in &top.items {
            println!("{}\t{}", i.item, i.count);
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_absolute_now_or_relative() {
        assert_eq!(parse_time("now", 1000.0).unwrap(), 1000.0);
        assert_eq!(parse_time("-15m", 1000.0).unwrap(), 100.0);
        assert_eq!(parse_time("-2h", 10_000.0).unwrap(), 2800.0);
        assert_eq!(parse_time("-30", 100.0).unwrap(), 70.0);
        assert_eq!(parse_time("1700000000", 0.0).unwrap(), 1_700_000_000.0);
        assert!(parse_time("yesterday", 0.0).is_err());
        assert_eq!(parse_item("a=3").unwrap(), ("a".into(), 3));
        assert_eq!(parse_item("a").unwrap(), ("a".into(), 1));
        assert!(parse_item("a=x").is_err());
    }
}
