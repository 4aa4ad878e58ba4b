//! The commands, one module per group: each holds its clap arguments and
//! its `run`, a thin shim over the library.
//!
//! Commands import the shared modules ([`crate::config`],
//! [`crate::context`], [`crate::output`]) and never the dispatcher
//! ([`crate::cli`]) nor each other.

pub mod bench;
pub mod buffer;
pub mod completions;
pub mod counters;
pub mod daily;
pub mod limit;
pub mod lock;
pub mod migrate;
pub mod serve;
pub mod sets;
pub mod stats;
pub mod ts;

/// What the counter, set and statistic commands share: the name and
/// `--precision` of a `get`, the arguments of a `delete` and what it
/// prints. Each group names its own thing in the help of `<NAME>`, with
/// `mut_arg` on its subcommand.
mod shared {
    use anyhow::Result;
    use clap::Args;

    use crate::output;

    /// A `get`'s series and precision.
    #[derive(Args, Debug)]
    pub struct Series {
        /// The series (each group names its own).
        pub name: String,
        /// Only this precision, in seconds.
        #[arg(long, value_name = "SECONDS")]
        pub precision: Option<u64>,
    }

    /// A `delete`.
    #[derive(Args, Debug)]
    pub struct DeleteArgs {
        /// The series (each group names its own).
        pub name: String,
        /// Print `{"deleted": true|false}`.
        #[arg(long)]
        pub json: bool,
    }

    /// Prints what a delete of `name`, one `what` (counter, set, ...), did.
    pub fn print_deleted(name: &str, deleted: bool, json: bool, what: &str) -> Result<()> {
        output::print(&serde_json::json!({ "deleted": deleted }), json, |_| {
            if deleted {
                println!("deleted {name}");
            } else {
                println!("{name}: no such {what}");
            }
        })
    }
}

pub(crate) use shared::{DeleteArgs, Series, print_deleted};
