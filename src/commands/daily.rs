//! `tally daily ...`: per-entity daily statistics from the command line.

use anyhow::Result;
use clap::Subcommand;
use tally::Day;

use crate::config::Config;
use crate::context;
use crate::output;

/// Daily-statistics commands.
#[derive(Subcommand, Debug)]
pub enum DailyCommand {
    /// Count COUNT views (default 1) of ENTITY, now or at --at.
    Incr {
        /// The entity (an advert, a page...).
        entity: String,
        /// The views to count.
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
        /// The entity (an advert, a page...).
        entity: String,
        /// How many days, today included.
        #[arg(default_value_t = 30)]
        days: u32,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// One day's views (YYYY-MM-DD).
    Day {
        /// The entity (an advert, a page...).
        entity: String,
        /// The day, YYYY-MM-DD.
        day: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Today's views.
    Today {
        /// The entity (an advert, a page...).
        entity: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// All-time views.
    Total {
        /// The entity (an advert, a page...).
        entity: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

pub async fn run(command: DailyCommand, config: &Config) -> Result<()> {
    let daily = context::open(config).await?.daily();
    match command {
        DailyCommand::Incr {
            entity,
            count,
            at,
            json,
        } => {
            let c = daily.incr_by(&entity, count, at).await?;
            output::print(&c, json, |c| {
                println!("{entity}: {} on {}, {} in all", c.day_count, c.day, c.total)
            })?;
        }
        DailyCommand::Last { entity, days, json } => {
            let days = daily.last(&entity, days).await?;
            output::print(&days, json, |days| {
                for d in days {
                    println!("{}\t{}", d.day, d.count);
                }
                let counts: Vec<i64> = days.iter().map(|d| d.count).collect();
                println!("{}", output::sparkline(&counts));
            })?;
        }
        DailyCommand::Day { entity, day, json } => {
            let day = Day::parse(&day)?;
            let count = daily.day(&entity, day).await?;
            output::print(
                &serde_json::json!({ "day": day, "count": count }),
                json,
                |_| println!("{count}"),
            )?;
        }
        DailyCommand::Today { entity, json } => {
            let today = daily.today_count(&entity).await?;
            output::print(&today, json, |today| println!("{}", today.count))?;
        }
        DailyCommand::Total { entity, json } => {
            let total = daily.total(&entity).await?;
            output::print(&serde_json::json!({ "total": total }), json, |_| {
                println!("{total}")
            })?;
        }
    }
    Ok(())
}
