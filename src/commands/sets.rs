//! `tally sets add|get|delete`: distinct counts from the command line.
//!
//! Each command opens the store through [`context::open`], does one thing
//! with the library's [`tally::Sets`] (exact writes, one round trip) and
//! prints it: a readable table, or JSON with `--json` (the HTTP API's
//! shapes).

use anyhow::Result;
use clap::{Args, Subcommand};
use tally::sets::SetAdd;

use super::{At, DeleteArgs, GetArgs, Series, print_deleted};
use crate::config::Config;
use crate::context;
use crate::output;

/// `tally sets ...`.
#[derive(Subcommand, Debug)]
pub enum SetsCommand {
    /// Add members to a set, at every precision (each counted once per
    /// slice).
    #[command(mut_arg("at", |a| a.help("When they were seen, Unix seconds with a fraction [default: now]")))]
    Add(AddArgs),
    /// Show a set's slices with their distinct counts (every precision, or
    /// one) and the distinct members of everything stored.
    #[command(
        mut_arg("name", |a| a.help("The set")),
        mut_arg("json", |a| a.help(r#"Print JSON: `{"name", "precisions": {"60": [{"start", "count"}]}, "union": {"from", "to", "precision", "count"}}`"#)),
    )]
    Get(GetArgs),
    /// Delete a set (all its precisions).
    #[command(mut_arg("name", |a| a.help("The set")))]
    Delete(DeleteArgs),
}

/// `tally sets add`.
#[derive(Args, Debug)]
pub struct AddArgs {
    /// The set.
    name: String,
    /// The members (each a non-empty UTF-8 string of at most 255 bytes).
    #[arg(required = true)]
    members: Vec<String>,
    #[command(flatten)]
    at: At,
}

pub async fn run(command: SetsCommand, config: &Config) -> Result<()> {
    let sets = context::open(config).await?.sets();
    match command {
        SetsCommand::Add(AddArgs { name, members, at }) => {
            let mut add = SetAdd::new(name, members);
            add.at = at.at;
            sets.add_many(&[add]).await?;
        }
        SetsCommand::Get(GetArgs {
            series: Series { name, precision },
            json,
        }) => {
            if let Some(p) = precision {
                tally::counters::settings::check_precision_in(sets.precisions(), p)?;
            }
            let to = tally::Timestamp::MAX_SECS as u64;
            let mut view = sets.view(&name, 0, to).await?;
            view.series
                .retain(|s| precision.is_none_or(|p| p == s.precision));
            if json {
                let precisions: serde_json::Map<String, serde_json::Value> = view
                    .series
                    .iter()
                    .map(|s| {
                        let slices = serde_json::to_value(&s.slices).unwrap_or_default();
                        (s.precision.to_string(), slices)
                    })
                    .collect();
                let answer = serde_json::json!({
                    "name": name,
                    "precisions": precisions,
                    "union": view.union,
                });
                println!("{answer}");
            } else {
                println!(
                    "{name}: {} distinct (everything stored, read at {})",
                    view.union.count,
                    output::precision_label(view.union.precision)
                );
                for s in &view.series {
                    println!(
                        "at {} precision: {} slices",
                        output::precision_label(s.precision),
                        s.slices.len()
                    );
                    if s.slices.is_empty() {
                        continue;
                    }
                    println!("{:<22} {:>12}", "slice start (UTC)", "distinct");
                    for slice in &s.slices {
                        println!("{:<22} {:>12}", output::utc(slice.start), slice.count);
                    }
                }
            }
        }
        SetsCommand::Delete(DeleteArgs { name, json }) => {
            print_deleted(&name, sets.delete(&name).await?, json, "set")?;
        }
    }
    Ok(())
}
