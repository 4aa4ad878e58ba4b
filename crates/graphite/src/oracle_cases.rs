//! Test support: case files written by graphite-web 1.1.10's own code (its grammar and
//! `attime.py`), for the differential tests of `grammar` and `attime`.
//!
//! Two sources, both used every run: the cases recorded in `tests/oracle/cases/` (made by the
//! generators `tests/oracle/grammar_cases.py` and `attime_cases.py` with seed 1), and fresh
//! ones the same generators write with another seed while the test runs, with the reference
//! virtual environment's Python (`tally_testkit::graphite_web::graphite_python`). Without that
//! environment the fresh run fails, saying how to install it; nothing is skipped.

use std::path::Path;
use std::process::Command;

/// Runs generator `script` of `tests/oracle/` with `args` (seed, count) on graphite-web's
/// code from the reference virtual environment; its JSON lines.
pub(crate) fn generate(script: &str, args: &[&str]) -> String {
    let python = tally_testkit::graphite_web::graphite_python()
        .unwrap_or_else(|e| panic!("cannot run graphite-web's own code for {script}: {e}"));
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/oracle")
        .join(script);
    let out = Command::new(&python)
        .arg(&path)
        .args(args)
        .env_remove("GRAPHITE_WEBAPP")
        .env_remove("PYTHONPATH")
        .env("PYTHONHASHSEED", "0")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("TZ", "UTC")
        .output()
        .unwrap_or_else(|e| panic!("could not run {}: {e}", python.display()));
    assert!(
        out.status.success(),
        "{} {} failed ({}): {}",
        python.display(),
        path.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("the generators print UTF-8 JSON");
    assert!(
        text.lines().count() > 0,
        "{script} wrote no cases: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// Checks every JSON line of `text` with `check` (an error describing a disagreement) and
/// fails listing the disagreements, naming where the cases came from.
pub(crate) fn agree(source: &str, text: &str, check: impl Fn(&str) -> Result<(), String>) {
    let mut bad = Vec::new();
    let mut total = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        total += 1;
        if let Err(e) = check(line) {
            bad.push(e);
        }
    }
    assert!(total > 0, "{source}: no cases");
    assert!(
        bad.is_empty(),
        "{} of {total} cases from {source} disagree with graphite-web:\n{}",
        bad.len(),
        bad.join("\n")
    );
}

/// Declares the two differential tests of one piece of graphite-web, both checking each case
/// line with `$check`: `$recorded` on the cases recorded in `tests/oracle/cases/$cases`, and
/// `$run_now` on fresh ones its generator `$script` (of `tests/oracle/`) writes with the
/// arguments `$arg` (seed, count) as the test runs.
macro_rules! differential_tests {
    (
        $check:ident,
        $recorded:ident($cases:literal),
        $run_now:ident($script:literal, $($arg:literal),+ $(,)?) $(,)?
    ) => {
        #[test]
        fn $recorded() {
            $crate::oracle_cases::agree(
                concat!("tests/oracle/cases/", $cases),
                include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/oracle/cases/", $cases)),
                $check,
            );
        }

        #[test]
        fn $run_now() {
            let text = $crate::oracle_cases::generate($script, &[$($arg),+]);
            let source = concat!($script $(, " ", $arg)+);
            $crate::oracle_cases::agree(source, &text, $check);
        }
    };
}
pub(crate) use differential_tests;
