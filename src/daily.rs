//! `tally daily ...`: per-entity daily statistics from the command line.

use std::sync::Arc;

use anyhow::Result;
use clap::Subcommand;
use tally::{DailyStats, Day, SystemClock};

use crate::config::Config;
use crate::output;

/// Daily-statistics commands.
#[derive(Subcommand, Debug)]
pub enum DailyCommand {
    /// Count COUNT views (default 1) of ENTITY, now or at --at.
    Incr {
        entity: String,
        #[arg(default_value_t = 1)]
        count: i64,
        /// When, Unix seconds [default: now].
        #[arg(long, value_name = "UNIX_SECONDS")]
        at: Option<f64>,
        /// Print the day's count and the total as JSON.
        #[arg(long)]
        json: bool,
    },
    /// The last DAYS days ending today, oldest first, missing days as 0.
    Last {
        entity: String,
        #[arg(default_value_t = 30)]
        days: u32,
        #[arg(long)]
        json: bool,
    },
    /// One day's views (YYYY-MM-DD).
    Day {
        entity: String,
        day: String,
        #[arg(long)]
        json: bool,
    },
    /// Today's views.
    Today {
        entity: String,
        #[arg(long)]
        json: bool,
    },
    /// All-time views.
    Total {
        entity: String,
        #[arg(long)]
        json: bool,
    },
}

pub async fn run(command: DailyCommand, config: &Config) -> Result<()> {
    let backend = crate::cli::open_backend(config).await?;
    let store = backend.daily_store(&config.entity_prefix).await?;
    let daily = DailyStats::with_clock(store, config.daily.clone(), Arc::new(SystemClock))?;
    match command {
        DailyCommand::Incr {
            entity,
            count,
            at,
            json,
        } => {
            let c = daily.incr_by(&entity, count, at).await?;
            if json {
                println!("{}", serde_json::to_string(&c)?);
            } else {
                println!("{entity}: {} on {}, {} in all", c.day_count, c.day, c.total);
            }
        }
        DailyCommand::Last { entity, days, json } => {
            let days = daily.last(&entity, days).await?;
            if json {
                println!("{}", serde_json::to_string(&days)?);
            } else {
                for d in &days {
                    println!("{}\t{}", d.day, d.count);
                }
                let counts: Vec<i64> = days.iter().map(|d| d.count).collect();
                println!("{}", output::sparkline(&counts));
            }
        }
        DailyCommand::Day { entity, day, json } => {
            let day = Day::parse(&day)?;
            let count = daily.day(&entity, day).await?;
            if json {
                println!("{}", serde_json::json!({ "day": day, "count": count }));
            } else {
                println!("{count}");
            }
        }
        DailyCommand::Today { entity, json } => {
            let today = daily.today_count(&entity).await?;
            if json {
                println!("{}", serde_json::to_string(&today)?);
            } else {
                println!("{}", today.count);
            }
        }
        DailyCommand::Total { entity, json } => {
            let total = daily.total(&entity).await?;
            if json {
                println!("{}", serde_json::json!({ "total": total }));
            } else {
                println!("{total}");
            }
        }
    }
    Ok(())
}
