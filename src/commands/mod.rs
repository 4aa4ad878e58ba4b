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

/// What the counter, set and statistic commands share: the `--at` of a
/// write, the name and `--precision` of a `get` (and the whole of a
/// counter's or a set's `get`), the arguments of a `delete` and what it
/// prints. Each group words the help of `<NAME>`, `--at` and a `get`'s
/// `--json` for its own thing, with `mut_arg` on its subcommand.
mod shared {
    use anyhow::Result;
    use clap::Args;

    use crate::output;

    /// When a write happened.
    #[derive(Args, Debug)]
    pub struct At {
        /// When it happened, Unix seconds with a fraction [default: now]
        /// (each group words its own).
        #[arg(long, value_name = "UNIX_SECONDS", allow_negative_numbers = true)]
        pub at: Option<f64>,
    }

    /// A `get`'s series and precision.
    #[derive(Args, Debug)]
    pub struct Series {
        /// The series (each group names its own).
        pub name: String,
        /// Only this precision, in seconds.
        #[arg(long, value_name = "SECONDS")]
        pub precision: Option<u64>,
    }

    /// A `get` of counters and sets (`tally stats get` has more).
    #[derive(Args, Debug)]
    pub struct GetArgs {
        #[command(flatten)]
        pub series: Series,
        /// Print JSON (each group describes its own).
        #[arg(long)]
        pub json: bool,
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

pub(crate) use shared::{At, DeleteArgs, GetArgs, Series, print_deleted};
