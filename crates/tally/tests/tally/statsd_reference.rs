//! Tally's statsd parser against the reference daemon's own reading of the
//! same lines (issue 21): npm `statsd` 0.9.0, run by the test harness with
//! its console backend, is sent every line below, and what its flushes
//! print (counters, timers and their sample-rate counts, gauges, sets, bad
//! lines) is compared with what [`tally::statsd`] makes of them.
//!
//! Lines both read alike are compared figure by figure. Lines where Tally
//! reads DogStatsD's extensions or refuses what statsd half-takes are
//! listed with what each one does, so that every difference is a decision
//! written down, never a surprise; in all of them, both put every value
//! under the text before the line's first `:`.

use std::collections::{BTreeMap, BTreeSet};
use std::net::UdpSocket;
use std::time::Duration;

use tally::statsd::{Reading, Reject, Sample, parse_line};
use tally_testkit::{Flushed, StatsdDaemon};

/// Lines statsd 0.9.0 and Tally read the same way; one name per case, and
/// the lines of a case go in one datagram (in order).
const AGREED: &[&str] = &[
    "c1:1|c",
    "c2:5|c|@0.5",
    "c3:1|c:2|c",
    "c4:1|c|@0.5:3|c",
    "c5:2|c:7|c|@0.25",
    "c6:-3|c",
    "t1:320|ms",
    "t2:10|ms|@0.1",
    "t3:1|ms:2|ms:3|ms",
    "t4:4|ms|@0.5:8|ms|@0.25",
    "g1:5|g",
    "g2:5|g\ng2:+3|g\ng2:-6|g",
    "g3:0|g:-5|g",
    "g4:7|g:+1|g",
    "s1:ann|s",
    "s2:ann|s:bob|s:ann|s",
    "mx:1|c:20|ms:3|g:ann|s",
    // Refused by both: nothing written, one bad line each.
    "x1:abc|c",
    "x2:1",
    "x3:1|c|@x",
    "x4:|c",
    "x5:1|c|@-0.5",
    "x6:abc|g",
    "x7:abc|ms",
];

/// Lines the two read differently, each sent once: the bad lines statsd
/// counts for it, and what the test checks below.
const DIFFERING: &[(&str, u64)] = &[
    // DogStatsD's packed values: statsd reads `1` as a sample without a
    // type, and `h` as a counter.
    ("pk:1:2|h", 1),
    ("nm:1:2|c", 1),
    // Tally refuses a line whole when one sample is bad.
    ("hx:1|c:x|c", 1),
    ("shop:checkout:5|c", 1),
    ("ua:a:b|s", 1),
    // DogStatsD's fields, which statsd does not know.
    ("ct:1|c|c:abc123", 2),
    ("ts:1|c|T1656581400", 1),
    ("tg:1|c|#env:prod", 0),
    // Tally's own rules: rates in (0, 1], whole counts, known types.
    ("r2:1|c|@2", 0),
    ("c7:1.5|c", 0),
    ("zz:1|zz", 0),
    ("hh:5|h", 0),
    // statsd refuses negative timers; Tally keeps them.
    ("neg:-1|ms", 1),
];

/// What a run of lines leaves, in the daemon's terms.
#[derive(Debug, Default, PartialEq)]
struct View {
    counters: BTreeMap<String, f64>,
    timers: BTreeMap<String, Vec<f64>>,
    timer_counts: BTreeMap<String, f64>,
    gauges: BTreeMap<String, f64>,
    sets: BTreeMap<String, BTreeSet<String>>,
}

impl View {
    /// What Tally's parser makes of `lines`, and how many it refused.
    fn of_tally(lines: &[&str]) -> (View, u64) {
        let mut v = View::default();
        let mut refused = 0;
        for text in lines.iter().flat_map(|l| l.split('\n')) {
            let Ok(line) = parse_line(text) else {
                refused += 1;
                continue;
            };
            let name = line.name.to_owned();
            for sample in line.samples() {
                match sample.reading {
                    Reading::Count(n) => *v.counters.entry(name.clone()).or_default() += n as f64,
                    Reading::Observation { value, weight } => {
                        v.timers.entry(name.clone()).or_default().push(value);
                        *v.timer_counts.entry(name.clone()).or_default() += weight as f64;
                    }
                    Reading::Gauge { value, relative } => {
                        let g = v.gauges.entry(name.clone()).or_default();
                        *g = if relative { *g + value } else { value };
                    }
                    Reading::Member(m) => {
                        v.sets.entry(name.clone()).or_default().insert(m.to_owned());
                    }
                }
            }
        }
        for values in v.timers.values_mut() {
            values.sort_by(f64::total_cmp);
        }
        (v, refused)
    }

    /// The daemon's figures for `names`.
    fn of_statsd(f: &Flushed, names: &BTreeSet<&str>) -> View {
        fn only<T: Clone>(m: &BTreeMap<String, T>, names: &BTreeSet<&str>) -> BTreeMap<String, T> {
            m.iter()
                .filter(|(k, _)| names.contains(k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        }
        View {
            counters: only(&f.counters, names),
            timers: only(&f.timers, names),
            timer_counts: only(&f.timer_counts, names),
            gauges: only(&f.gauges, names),
            sets: only(&f.sets, names),
        }
    }
}

fn name(case: &str) -> &str {
    case.split(':').next().unwrap()
}

#[test]
fn tally_reads_statsd_lines_as_statsd_0_9_0_does() {
    let daemon = StatsdDaemon::start_with_console(Duration::from_millis(100))
        .expect("start the reference statsd daemon");
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    let cases = AGREED.iter().chain(DIFFERING.iter().map(|(l, _)| l));
    let mut lines = 0;
    for case in cases {
        socket
            .send_to(case.as_bytes(), ("127.0.0.1", daemon.port))
            .unwrap();
        lines += case.split('\n').count() as u64;
    }
    let f = daemon
        .flushed(lines, Duration::from_secs(60))
        .expect("the daemon's flushes account for every line");
    assert_eq!(f.lines, lines);

    // Where they agree: every figure of every name.
    let names: BTreeSet<&str> = AGREED.iter().map(|c| name(c)).collect();
    let (tally, refused) = View::of_tally(AGREED);
    assert_eq!(View::of_statsd(&f, &names), tally, "{:#?}", f);
    assert_eq!(refused, 7);
    // A sanity check of the comparison itself.
    assert_eq!(tally.counters["c5"], 30.0);
    assert_eq!(tally.timer_counts["t4"], 6.0);
    assert_eq!(tally.gauges["g2"], 2.0);

    // Neither ever writes under a name with the line's `:` in it.
    for key in f
        .counters
        .keys()
        .chain(f.timers.keys())
        .chain(f.gauges.keys())
        .chain(f.sets.keys())
    {
        assert!(!key.contains(':'), "statsd wrote under {key:?}");
    }
    let bad_differing: u64 = DIFFERING.iter().map(|(_, bad)| bad).sum();
    assert_eq!(f.bad_lines, refused + bad_differing, "{f:#?}");

    // Where they differ, what each does.
    let read = |line: &'static str| -> Result<(&'static str, Vec<Sample<'static>>), Reject> {
        parse_line(line).map(|l| (l.name, l.samples().collect()))
    };
    let count = |n| Sample {
        reading: Reading::Count(n),
        at: None,
    };
    let obs = |value| Sample {
        reading: Reading::Observation { value, weight: 1 },
        at: None,
    };
    let counter = |key: &str| f.counters.get(key).copied();
    // Packed values: two observations for Tally; statsd counts the 2 only.
    assert_eq!(read("pk:1:2|h"), Ok(("pk", vec![obs(1.0), obs(2.0)])));
    assert_eq!(counter("pk"), Some(2.0));
    assert_eq!(read("nm:1:2|c"), Ok(("nm", vec![count(1), count(2)])));
    assert_eq!(counter("nm"), Some(2.0));
    // A bad sample: statsd keeps the others, Tally none.
    assert_eq!(read("hx:1|c:x|c"), Err(Reject::BadValue));
    assert_eq!(counter("hx"), Some(1.0));
    assert_eq!(read("shop:checkout:5|c"), Err(Reject::BadValue));
    assert_eq!(counter("shop"), Some(5.0));
    assert_eq!(read("ua:a:b|s"), Err(Reject::BadValue));
    assert_eq!(f.sets["ua"], BTreeSet::from(["b".to_owned()]));
    // DogStatsD's fields: statsd refuses the container id and the time,
    // and files a tagged line under a key of its own.
    assert_eq!(read("ct:1|c|c:abc123"), Ok(("ct", vec![count(1)])));
    assert_eq!(counter("ct"), None);
    let at = Sample {
        at: Some(1_656_581_400),
        ..count(1)
    };
    assert_eq!(read("ts:1|c|T1656581400"), Ok(("ts", vec![at])));
    assert_eq!(counter("ts"), None);
    assert!(parse_line("tg:1|c|#env:prod").unwrap().tagged);
    assert_eq!(read("tg:1|c|#env:prod"), Ok(("tg", vec![count(1)])));
    assert_eq!((counter("tg"), counter("tg;env=prod")), (None, Some(1.0)));
    // Tally's own rules.
    assert_eq!(read("r2:1|c|@2"), Err(Reject::BadRate));
    assert_eq!(counter("r2"), Some(0.5));
    assert_eq!(read("c7:1.5|c"), Ok(("c7", vec![count(2)])));
    assert_eq!(counter("c7"), Some(1.5));
    assert_eq!(read("zz:1|zz"), Err(Reject::UnknownType));
    assert_eq!(counter("zz"), Some(1.0));
    assert_eq!(read("hh:5|h"), Ok(("hh", vec![obs(5.0)])));
    assert_eq!(counter("hh"), Some(5.0));
    assert_eq!(read("neg:-1|ms"), Ok(("neg", vec![obs(-1.0)])));
    assert!(!f.timers.contains_key("neg"));
}
