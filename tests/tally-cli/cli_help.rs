//! The command line reads well: each `--help` shows the command's own
//! arguments before the shared store options, grouped under headings, and
//! `tally completions` prints completions a shell accepts.

use crate::support;

use std::process::Command;

use support::{ok, run, tally};

/// `tally <args> --help`.
fn help(args: &[&str]) -> String {
    ok(tally().args(args).arg("--help"))
}

/// The line offset of `heading` in `text`, or a failure naming it.
fn at(text: &str, heading: &str) -> usize {
    text.find(&format!("\n{heading}\n"))
        .unwrap_or_else(|| panic!("no {heading:?} heading in:\n{text}"))
}

#[test]
fn own_arguments_come_before_the_grouped_store_options() {
    let mut commands = vec![
        &["incr"][..],
        &["ts", "get"],
        &["daily", "last"],
        &["buffer", "get"],
        &["limit", "check"],
        &["serve"],
    ];
    if cfg!(feature = "bench") {
        commands.push(&["bench", "ingest"]);
    }
    for args in commands {
        let text = help(args);
        let own = at(&text, "Options:");
        let store = at(&text, "Store options:");
        let counters = at(&text, "Counter options:");
        let ts = at(&text, "Time-series options:");
        let daily = at(&text, "Daily options:");
        assert!(
            own < store && store < counters && counters < ts && ts < daily,
            "tally {args:?} --help: headings out of order:\n{text}"
        );
        // Each global flag sits under its own heading, not among the command's.
        assert!(text[store..counters].contains("--redis <URL>"), "{text}");
        assert!(text[counters..ts].contains("--precisions"), "{text}");
        assert!(text[ts..daily].contains("--rollups"), "{text}");
        assert!(text[daily..].contains("--utc-offset"), "{text}");
        assert!(!text[own..store].contains("--redis"), "{text}");
    }
    // Positional arguments first of all.
    let text = help(&["incr"]);
    assert!(at(&text, "Arguments:") < at(&text, "Options:"), "{text}");
}

#[test]
fn bash_completions_parse_and_name_every_command() {
    let script = ok(tally().args(["completions", "bash"]));
    for name in [
        "incr",
        "get",
        "counters",
        "delete",
        "clean",
        "ts",
        "daily",
        "flush",
        "buffer",
        "limit",
        "lock",
        "serve",
        "completions",
        "--redis-cluster",
    ]
    .into_iter()
    // `bench` and its `daily-memory` exist with the `bench` feature only.
    .chain(cfg!(feature = "bench").then_some("bench"))
    .chain(cfg!(feature = "bench").then_some("daily-memory"))
    {
        assert!(script.contains(name), "bash completions lack {name}");
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tally.bash");
    std::fs::write(&path, &script).unwrap();
    let out = Command::new("bash").arg("-n").arg(&path).output().unwrap();
    assert!(
        out.status.success(),
        "bash -n rejects the completions: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn zsh_and_fish_completions_name_the_commands() {
    let zsh = ok(tally().args(["completions", "zsh"]));
    assert!(zsh.starts_with("#compdef tally"), "{zsh}");
    let fish = ok(tally().args(["completions", "fish"]));
    assert!(fish.contains("complete -c tally"), "{fish}");
    for script in [&zsh, &fish] {
        for name in ["incr", "ts", "daily", "data-dir"]
            .into_iter()
            .chain(cfg!(feature = "bench").then_some("bench"))
            .chain(cfg!(feature = "bench").then_some("daily-memory"))
        {
            assert!(script.contains(name), "completions lack {name}");
        }
    }
}

#[test]
fn completions_need_no_store_and_reject_an_unknown_shell() {
    // A broken config file does not stop completions: they open nothing.
    let out = ok(tally()
        .args(["completions", "bash"])
        .env("TALLY_CONFIG", "/nonexistent/tally.toml"));
    assert!(out.contains("incr"));
    let out = run(tally().args(["completions", "tcsh"]));
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("tcsh"),
        "the error names the bad shell"
    );
}

/// Without the `bench` feature (the default, what `cargo install --path .`
/// builds), `tally bench` is neither listed nor broken: it says how to build
/// it in and exits 2.
#[cfg(not(feature = "bench"))]
#[test]
fn without_the_bench_feature_bench_says_how_to_build_it() {
    let top = help(&[]);
    assert!(!top.contains("bench"), "{top}");
    let bash = ok(tally().args(["completions", "bash"]));
    assert!(!bash.contains("bench"), "{bash}");
    for args in [
        &["bench"][..],
        &["bench", "ingest", "--json"],
        &["bench", "--help"],
    ] {
        let out = run(tally().args(args));
        assert_eq!(out.status.code(), Some(2), "tally {args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("--features bench"), "{stderr}");
    }
}
