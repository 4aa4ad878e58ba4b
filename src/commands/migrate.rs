//! `tally migrate --from STORE --to STORE`: moves every counter, statistic,
//! gauge and set, the daily statistics and the time series from one store
//! into another with [`tally::migrate`] (resumable:
//! running the same command again finishes an interrupted migration and
//! counts nothing twice). A progress bar on stderr when it is a terminal; a
//! summary at the end (`--json`: the library's report).

use std::io::{IsTerminal, Write};

use anyhow::{Context, Result};
use clap::Args;
use tally::backend::redis::Layout;
use tally::migrate::{MAX_NAMES_PER_BATCH, MigrateReport, MigrateSettings, Progress, migrate};

use crate::config::Config;
use crate::context;
use crate::output;

/// `tally migrate`.
#[derive(Args, Debug)]
pub struct MigrateArgs {
    /// The store to copy from: a data directory (a path or sqlite:///path),
    /// redis://host:port[/db], or redis+cluster://host:port,host:port,...
    #[arg(long, value_name = "STORE")]
    from: String,
    /// The store to copy into (the same forms as --from).
    #[arg(long, value_name = "STORE")]
    to: String,
    /// The Redis key layout of --from: default, expiring, compact or ria.
    #[arg(long, default_value = "default", value_name = "LAYOUT")]
    from_layout: String,
    /// The Redis key layout of --to: default, expiring, compact or ria.
    #[arg(long, default_value = "default", value_name = "LAYOUT")]
    to_layout: String,
    /// Series per batch (one round trip per node each).
    #[arg(long, default_value_t = 50, value_name = "N")]
    batch: usize,
    /// The migration's id: a rerun with the same id resumes it [default:
    /// made from --from, --to and their layouts].
    #[arg(long, value_name = "ID")]
    id: Option<String>,
    /// Print the summary as JSON.
    #[arg(long)]
    json: bool,
}

pub async fn run(args: MigrateArgs, config: &Config) -> Result<()> {
    anyhow::ensure!(
        (1..=MAX_NAMES_PER_BATCH).contains(&args.batch),
        "--batch must be 1 to {MAX_NAMES_PER_BATCH}, got {}",
        args.batch
    );
    // Both sides use the key prefix of the global options (--prefix).
    let from_layout = Layout::parse(&args.from_layout, &config.prefix).context("--from-layout")?;
    let to_layout = Layout::parse(&args.to_layout, &config.prefix).context("--to-layout")?;
    let id = args.id.clone().unwrap_or_else(|| {
        format!(
            "{} ({}) -> {} ({})",
            args.from, args.from_layout, args.to, args.to_layout
        )
    });
    let from = context::builder(config)
        .layout(from_layout)
        .open(&args.from)
        .await
        .context("--from")?;
    let to = context::builder(config)
        .layout(to_layout)
        .open(&args.to)
        .await
        .context("--to")?;
    let settings = MigrateSettings {
        names_per_batch: args.batch,
        ..MigrateSettings::new(id)
    };
    let mut bar = Bar::new(std::io::stderr().is_terminal());
    let report = migrate(&from, &to, &settings, |p| bar.show(p)).await;
    bar.finish();
    let report = report?;
    output::print(&report, args.json, summary)
}

fn summary(report: &MigrateReport) {
    for s in report
        .spaces
        .iter()
        .chain([&report.daily, &report.time_series])
    {
        let mut line = format!(
            "{:<9} {} series, {} slices: {} batches written, {} already there",
            s.space, s.series, s.slices, s.batches_written, s.batches_skipped
        );
        if !s.resolutions_not_copied.is_empty() {
            line += &format!(
                " (not copied: precisions {:?} s, which the target does not keep)",
                s.resolutions_not_copied
            );
        }
        println!("{line}");
    }
    println!("done in {:.1} s", report.seconds);
}

/// A one-line progress bar per space on a terminal; nothing otherwise.
struct Bar {
    on: bool,
    space: Option<String>,
}

impl Bar {
    fn new(on: bool) -> Self {
        Bar { on, space: None }
    }

    fn show(&mut self, p: &Progress<'_>) {
        if !self.on {
            return;
        }
        if self.space.as_deref() != Some(p.space) {
            self.finish();
            self.space = Some(p.space.to_owned());
        }
        const WIDTH: u64 = 30;
        let filled = (p.series_done * WIDTH)
            .checked_div(p.series_total)
            .unwrap_or(WIDTH);
        let mut err = std::io::stderr().lock();
        let _ = write!(
            err,
            "\r{:<9} [{}{}] {}/{} series, {} slices",
            p.space,
            "#".repeat(filled as usize),
            ".".repeat((WIDTH - filled) as usize),
            p.series_done,
            p.series_total,
            p.slices_done
        );
        let _ = err.flush();
    }

    fn finish(&mut self) {
        if self.on && self.space.take().is_some() {
            eprintln!();
        }
    }
}
