//! carbon 1.1.10's own plaintext receivers as the oracle of Tally's carbon
//! listener.
//!
//! [`carbon_reference_parse`] hands each line to carbon's TCP line receiver
//! (`MetricLineReceiver`, through Twisted's line framing, on a fresh
//! connection per line) and [`carbon_reference_datagrams`] each datagram to
//! its UDP receiver (`MetricDatagramReceiver`), in one Python process from the
//! reference virtual environment ([`graphite_venv`](super::graphite_venv)),
//! and reports what carbon did: the datapoint it handed on to its pipeline,
//! its "invalid line" message, an exception escaping it, or nothing.
//!
//! The receivers are carbon's code with carbon's default settings; the
//! harness's Python (`py/tally_carbon_lines.py`) only replaces the sink, the
//! listener log and the clock around them. What it does not cover: what
//! carbon-cache does after the receiver (its write pipeline, whisper's own
//! limits), whitelists and blacklists, and settings other than the defaults.

use std::io::Write;
use std::process::Stdio;

use super::{PythonEnv, graphite_venv};

/// The clock carbon reads during a reference parse: a line whose timestamp
/// field is `-1` comes back with this timestamp (carbon's "now", a float).
pub const CARBON_REFERENCE_NOW: f64 = 2_000_000_000.25;

/// What carbon's receiver did with a line.
#[derive(Clone, Debug, PartialEq)]
pub enum CarbonOutcome {
    /// Handed on to carbon's pipeline (its `metricReceived` event) as this
    /// metric path and datapoint. `timestamp` is carbon's float as it stands
    /// (not truncated: carbon-cache leaves that to whisper), or
    /// [`CARBON_REFERENCE_NOW`] for a timestamp carbon read as "now".
    Accepted {
        /// The metric path, as carbon split it off the line.
        path: String,
        /// The value (may be infinite; NaN never gets here).
        value: f64,
        /// The timestamp.
        timestamp: f64,
    },
    /// Refused as an invalid line: carbon logged this message (which names
    /// the peer) and kept the connection.
    Invalid(String),
    /// Dropped without a word, the connection kept: carbon filters out a NaN
    /// value silently.
    Ignored,
    /// An exception escaped carbon's receiver (`"ValueError: ..."`). Under
    /// Twisted's reactor that closes a TCP connection, losing whatever else
    /// it had sent; over UDP the rest of the datagram is lost.
    Raised(String),
    /// carbon closed the connection itself (a line past its 16,384-byte
    /// limit), losing whatever else it had sent.
    Closed(String),
}

/// carbon 1.1.10's TCP line receiver on each of `lines`, one outcome per
/// line. Each line is sent without its newline (the harness adds `\n`) on a
/// fresh connection, so one line's fate does not touch the next.
///
/// Panics if a line holds `\n` (it would be two lines), or when the virtual
/// environment or Python is missing (saying how to install them).
pub fn carbon_reference_parse(lines: &[&[u8]]) -> Vec<CarbonOutcome> {
    for line in lines {
        assert!(
            !line.contains(&b'\n'),
            "carbon_reference_parse takes lines without their newline, got {:?}",
            String::from_utf8_lossy(line)
        );
    }
    let requests: Vec<(&str, &[u8])> = lines.iter().map(|l| ("tcp", *l)).collect();
    run(&requests)
        .into_iter()
        .zip(lines)
        .map(|(mut events, line)| {
            assert!(
                events.len() <= 1,
                "carbon made {events:?} of the single line {:?}",
                String::from_utf8_lossy(line)
            );
            events.pop().unwrap_or(CarbonOutcome::Ignored)
        })
        .collect()
}

/// carbon 1.1.10's UDP receiver on each of `datagrams`: per datagram, the
/// outcome of each of its lines in order (`Accepted`, `Invalid`, or a final
/// `Raised` that cut the datagram short). A line carbon drops silently (a
/// NaN value) leaves no entry, so entries need not match lines one to one.
///
/// Panics when the virtual environment or Python is missing (saying how to
/// install them).
pub fn carbon_reference_datagrams(datagrams: &[&[u8]]) -> Vec<Vec<CarbonOutcome>> {
    let requests: Vec<(&str, &[u8])> = datagrams.iter().map(|d| ("udp", *d)).collect();
    run(&requests)
}

/// Runs the requests through one Python process; the events of each.
fn run(requests: &[(&str, &[u8])]) -> Vec<Vec<CarbonOutcome>> {
    let env = PythonEnv::new(&graphite_venv());
    let mut input = String::new();
    for (kind, data) in requests {
        input.push_str(kind);
        input.push(' ');
        input.push_str(&hex(data));
        input.push('\n');
    }
    let mut child = env
        .command(&env.python())
        .arg(env.script_path("tally_carbon_lines.py"))
        .arg(format!("{CARBON_REFERENCE_NOW:?}"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("could not run {}: {e}", env.python().display()));
    // Written from a thread: the process may answer before it has read all.
    let mut stdin = child.stdin.take().expect("piped stdin");
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().expect("wait for Python");
    let _ = writer.join();
    assert!(
        out.status.success(),
        "carbon's line receiver failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).expect("the harness prints ASCII");
    let mut results = Vec::new();
    let mut events = Vec::new();
    for line in stdout.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        match fields.as_slice() {
            ["end"] => results.push(std::mem::take(&mut events)),
            ["accepted", path, value, timestamp] => events.push(CarbonOutcome::Accepted {
                path: unhex(path),
                value: python_float(value),
                timestamp: python_float(timestamp),
            }),
            ["invalid", message] => events.push(CarbonOutcome::Invalid(unhex(message))),
            ["raised", error] => events.push(CarbonOutcome::Raised(unhex(error))),
            ["closed", reason] => events.push(CarbonOutcome::Closed(unhex(reason))),
            _ => panic!("unexpected line from the carbon harness: {line:?}"),
        }
    }
    assert_eq!(
        results.len(),
        requests.len(),
        "the carbon harness answered {} of {} requests: {}",
        results.len(),
        requests.len(),
        String::from_utf8_lossy(&out.stderr)
    );
    results
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> String {
    let bytes: Vec<u8> = (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex from the harness"))
        .collect();
    String::from_utf8(bytes).expect("Python's text is UTF-8")
}

/// A Python float's `repr` (`1.5`, `1e+16`, `inf`, `-inf`).
fn python_float(repr: &str) -> f64 {
    repr.parse()
        .unwrap_or_else(|_| panic!("not a Python float: {repr:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips_and_python_floats_parse() {
        assert_eq!(hex(b"a.b \xff"), "612e6220ff");
        assert_eq!(unhex(&hex("é.x".as_bytes())), "é.x");
        assert_eq!(python_float("1e+16"), 1e16);
        assert_eq!(python_float("-inf"), f64::NEG_INFINITY);
        assert_eq!(python_float("2000000000.25"), CARBON_REFERENCE_NOW);
    }
}
