//! `tally completions SHELL`: shell completions for every command and flag,
//! printed to stdout (clap_complete).
//!
//! The dispatcher hands in the command tree, so this module does not import
//! it back.

use clap::Args;
use clap_complete::Shell;

/// `tally completions`.
#[derive(Args, Debug)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell.
    #[arg(value_enum)]
    shell: Shell,
}

/// Prints the completions of `command` for the shell asked for.
pub fn run(args: CompletionsArgs, mut command: clap::Command) {
    let name = command.get_name().to_owned();
    clap_complete::generate(args.shell, &mut command, name, &mut std::io::stdout());
}
