//! Tally's carbon parser against carbon 1.1.10's own receivers (the test
//! harness runs them from PyPI, in the virtual environment `scripts/test`
//! makes): the same lines, over TCP (through Tally's line framing) and in
//! UDP datagrams, must be accepted by both with the same path, value and
//! timestamp, except the cases `tally::carbon` documents as refused, each
//! with its reason; and what carbon refuses, Tally refuses.

use tally::carbon::{
    DEFAULT_MAX_LINE, LineBuffer, Point, Reject, Window, datagram_lines, parse_line,
};
use tally::name::Name;
use tally::{CounterSettings, Timestamp};
use tally_testkit::graphite_web::{
    CARBON_REFERENCE_NOW, CarbonOutcome, carbon_reference_datagrams, carbon_reference_parse,
};

/// The window of the gauges' default precisions and samples at carbon's
/// reference "now".
fn window() -> Window {
    let s = CounterSettings::default();
    let precisions: Vec<tally::engine::Precision> = s
        .precisions
        .iter()
        .map(|&p| tally::engine::Precision::new(p, s.samples))
        .collect();
    Window::new(
        Timestamp::from_secs_f64(CARBON_REFERENCE_NOW).unwrap(),
        &precisions,
    )
}

/// What Tally makes of `line` sent over TCP with its `\n`: framed by a
/// [`LineBuffer`] of the default limit, then parsed.
fn tally_tcp(line: &[u8], window: &Window) -> Result<(String, f64, f64), Reject> {
    let mut lb = LineBuffer::new(DEFAULT_MAX_LINE);
    let data = [line, b"\n"].concat();
    let mut out = Vec::new();
    for chunk in data.chunks(4096) {
        lb.spare()[..chunk.len()].copy_from_slice(chunk);
        lb.filled(chunk.len());
        while let Some(piece) = lb.next_line() {
            out.push(
                piece
                    .and_then(|l| parse_line(l, window))
                    .map(|p: Point<'_>| (p.path.to_owned(), p.value, p.at)),
            );
        }
    }
    assert_eq!(lb.finish(), None);
    assert_eq!(
        out.len(),
        1,
        "{:?} framed as {out:?}",
        String::from_utf8_lossy(line)
    );
    out.pop().unwrap()
}

/// Why Tally refuses a point carbon accepted, as `tally::carbon` documents
/// it, or `None` when it must take it as carbon did.
fn documented_refusal(path: &str, value: f64, at: f64, window: &Window) -> Option<Reject> {
    if !value.is_finite() {
        Some(Reject::NotFinite)
    } else if Name::check(path).is_err() {
        Some(Reject::BadName)
    } else if !window.contains(at) {
        Some(Reject::TimeNotKept)
    } else {
        None
    }
}

/// What carbon refuses as an invalid line, Tally refuses as one of these.
const INVALID: [Reject; 3] = [Reject::Malformed, Reject::BadValue, Reject::BadTimestamp];

/// Checks Tally's verdict on one TCP line against carbon's.
fn compare(line: &[u8], carbon: &CarbonOutcome, window: &Window) {
    let shown = String::from_utf8_lossy(line);
    let shown = if shown.chars().count() > 80 {
        let head: String = shown.chars().take(80).collect();
        format!("{head}... ({} bytes)", line.len())
    } else {
        shown.into_owned()
    };
    let tally = tally_tcp(line, window);
    match carbon {
        CarbonOutcome::Accepted {
            path,
            value,
            timestamp,
        } => match documented_refusal(path, *value, *timestamp, window) {
            None => {
                let (p, v, at) = tally.unwrap_or_else(|r| {
                    panic!("{shown:?}: carbon accepted {carbon:?}, Tally refused it: {r:?}")
                });
                assert_eq!(
                    (p.as_str(), v, at),
                    (path.as_str(), *value, *timestamp),
                    "{shown:?}"
                );
            }
            Some(reason) => assert_eq!(tally, Err(reason), "{shown:?}: carbon {carbon:?}"),
        },
        CarbonOutcome::Invalid(_) => assert!(
            matches!(tally, Err(r) if INVALID.contains(&r)),
            "{shown:?}: carbon refused it, Tally made {tally:?}"
        ),
        // A NaN value.
        CarbonOutcome::Ignored => assert_eq!(tally, Err(Reject::NotFinite), "{shown:?}"),
        CarbonOutcome::Raised(e) if e.starts_with("UnicodeDecodeError") => {
            assert_eq!(tally, Err(Reject::NotUtf8), "{shown:?}")
        }
        // int() of a NaN or infinite timestamp.
        CarbonOutcome::Raised(e) => {
            assert_eq!(
                tally,
                Err(Reject::BadTimestamp),
                "{shown:?}: carbon raised {e}"
            )
        }
        CarbonOutcome::Closed(_) => assert_eq!(tally, Err(Reject::TooLong), "{shown:?}"),
    }
}

/// The brief's kinds of lines, one by one.
fn listed_lines() -> Vec<Vec<u8>> {
    let now = "2000000000";
    let mut lines: Vec<Vec<u8>> = [
        // Well formed.
        format!("app.load 0.5 {now}"),
        format!("servers.web-1.cpu.user 12.75 {now}"),
        // Odd whitespace, tabs, `\r` (the `\r\n` of a Windows sender).
        format!("  app.load\t\t0.5   {now}  "),
        format!("app.load 0.5 {now}\r"),
        format!("app.load\r0.5\r{now}"),
        format!("app.load\x0b0.5\x0c{now}\x1c"),
        format!("app.load\u{a0}0.5\u{3000}{now}\u{2028}"),
        format!("app.load\u{85}0.5\u{200b} {now}"),
        // Extra or missing fields, empty lines.
        format!("app.load 0.5 {now} extra"),
        format!("app.load 0.5 {now} 1 2"),
        "app.load 0.5".into(),
        "app.load".into(),
        String::new(),
        " \t ".into(),
        "\r".into(),
        // Values: signs, exponents, underscores, Unicode digits, NaN and
        // infinities, huge and tiny numbers, things that are not numbers.
        format!("v -0 {now}"),
        format!("v +1.5e3 {now}"),
        format!("v .5 {now}"),
        format!("v 5. {now}"),
        format!("v 1_000.000_1 {now}"),
        format!("v 1__0 {now}"),
        format!("v _1 {now}"),
        format!("v \u{661}\u{662}.\u{663} {now}"),
        format!("v \u{ff11}\u{ff12} {now}"),
        format!("v \u{bd} {now}"),
        format!("v nan {now}"),
        format!("v -NaN {now}"),
        format!("v inf {now}"),
        format!("v -Infinity {now}"),
        format!("v 1e308 {now}"),
        format!("v 1e309 {now}"),
        format!("v -1e400 {now}"),
        format!("v 1e-400 {now}"),
        format!("v 179769313486231570000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000 {now}"),
        format!("v 0x10 {now}"),
        format!("v 1,5 {now}"),
        format!("v abc {now}"),
        format!("v 1e {now}"),
        // Timestamps: "now" marks, negatives, fractions, exponents, out of
        // what the gauges keep, not numbers.
        "t 1 -1".into(),
        "t 1 -1.0".into(),
        "t 1 -1.999".into(),
        "t 1 -2".into(),
        "t 1 -0.5".into(),
        "t 1 0".into(),
        "t 1 2000000000.75".into(),
        "t 1 2e9".into(),
        "t 1 2_000_000_000".into(),
        "t 1 2000000060".into(),
        "t 1 2000000060.25".into(),
        "t 1 2000000061".into(),
        "t 1 1990000000".into(),
        "t 1 1989000000".into(),
        "t 1 4294967296".into(),
        "t 1 1e20".into(),
        "t 1 nan".into(),
        "t 1 inf".into(),
        "t 1 -inf".into(),
        "t 1 1e400".into(),
        "t 1 abc".into(),
        "t 1 2000000000x".into(),
        // Names: Unicode, tags, dots, controls, too long.
        format!("сервер.нагрузка 1 {now}"),
        format!("é.ü.😀 1 {now}"),
        format!("cpu;host=a;dc=b 1 {now}"),
        format!("a..b 1 {now}"),
        format!(".a/b:c 1 {now}"),
        format!("a\x01b 1 {now}"),
        format!("a\x7fb 1 {now}"),
        format!("a\u{9b}b 1 {now}"),
        format!("{} 1 {now}", "x".repeat(256)),
        format!("{} 1 {now}", "x".repeat(257)),
        format!("{} 1 {now}", "é".repeat(256)),
    ]
    .into_iter()
    .map(String::into_bytes)
    .collect();
    // Not UTF-8.
    lines.push(b"\xff.b 1 2000000000".to_vec());
    lines.push(b"a.b 1\xc3 2000000000".to_vec());
    // The line limit: 16,384 bytes fit, one more does not.
    let fits = [
        &b"a.b 1 2000000000 "[..],
        &vec![b' '; DEFAULT_MAX_LINE - 17],
    ]
    .concat();
    assert_eq!(fits.len(), DEFAULT_MAX_LINE);
    lines.push(fits);
    lines.push(vec![b'x'; DEFAULT_MAX_LINE + 1]);
    lines
}

/// Lines made of pieces of each field, picked by a fixed generator: many
/// more combinations than listed, the same every run.
fn generated_lines(n: usize) -> Vec<Vec<u8>> {
    let names = [
        "a.b",
        "x",
        "é.ü",
        "a;t=1",
        "a\x02",
        "😀",
        "a\u{feff}b",
        "-",
        "1",
        "nan",
    ];
    let gaps = [
        " ", "\t", "  ", "\u{a0}", "\x1c", "\x1f", "\x0b", "\u{2003}", "\r", " \t ",
    ];
    let values = [
        "1",
        "-2.5",
        "1_0",
        "1__0",
        "nan",
        "inf",
        "-inf",
        "1e400",
        "abc",
        "\u{661}",
        ".",
        "1.e3",
        "0x1",
        "+0",
        "1e-5",
        "1_",
        "\u{ff15}_\u{ff15}",
        "9007199254740993",
    ];
    let times = [
        "2000000000",
        "-1",
        "-1.5",
        "-2",
        "0",
        "2000000060.25",
        "2000000060.5",
        "1989705600",
        "1989705599.9",
        "nan",
        "inf",
        "2e9",
        "2_000_000_000",
        "abc",
        "2000000000.123456789",
    ];
    let ends = ["", "\r", " ", " extra", "\t\u{3000}"];
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut pick = |len: usize| {
        // xorshift64*
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        (state.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) as usize % len
    };
    (0..n)
        .map(|_| {
            let lead = if pick(4) == 0 {
                gaps[pick(gaps.len())]
            } else {
                ""
            };
            let line = format!(
                "{lead}{}{}{}{}{}{}",
                names[pick(names.len())],
                gaps[pick(gaps.len())],
                values[pick(values.len())],
                gaps[pick(gaps.len())],
                times[pick(times.len())],
                ends[pick(ends.len())],
            );
            line.into_bytes()
        })
        .collect()
}

#[test]
fn tally_accepts_exactly_the_lines_carbon_accepts_but_the_documented_ones() {
    let window = window();
    let mut lines = listed_lines();
    lines.extend(generated_lines(2000));
    let refs: Vec<&[u8]> = lines.iter().map(Vec::as_slice).collect();
    let outcomes = carbon_reference_parse(&refs);
    assert_eq!(outcomes.len(), lines.len());
    let (mut taken, mut refused) = (0, 0);
    for (line, outcome) in lines.iter().zip(&outcomes) {
        compare(line, outcome, &window);
        match tally_tcp(line, &window) {
            Ok(_) => taken += 1,
            Err(_) => refused += 1,
        }
    }
    // Both kinds are well represented.
    assert!(
        taken >= 50 && refused >= 50,
        "{taken} taken, {refused} refused"
    );
}

#[test]
fn datagrams_hold_the_lines_carbon_finds_in_them() {
    let window = window();
    let datagrams: Vec<&[u8]> = vec![
        b"a.b 1 2000000000\nc.d 2 2000000000",
        b"a.b 1 2000000000\r\nc.d 2 2000000000\r\n",
        b"a.b 1 2000000000\rc.d 2 2000000000\x0be.f 3 2000000000\x0c",
        "a.b 1 2000000000\u{2028}c.d 2 2000000000\u{85}e.f 3 2000000000\u{2029}".as_bytes(),
        b"a.b 1 2000000000\x1cc.d 2 2000000000\x1de.f 3 2000000000\x1e",
        // \x1f separates fields, not lines.
        b"a.b\x1f1\x1f2000000000",
        b"\n\na.b 1 2000000000\n\n",
        b"bad\na.b nan 2000000000\na.b 5 -1\nx y z\na.b 1 0\na.b inf 2000000000\n",
        b"a.b 1 2000000000 extra\r\n\r\nc.d 2\n",
        b"",
    ];
    let outcomes = carbon_reference_datagrams(&datagrams);
    for (datagram, carbon) in datagrams.iter().zip(&outcomes) {
        let shown = String::from_utf8_lossy(datagram);
        let mut tally = Vec::new();
        datagram_lines(datagram, |l| {
            tally.push(parse_line(l, &window).map(|p| (p.path.to_owned(), p.value, p.at)))
        });
        // carbon's accepted points, less the documented refusals, are
        // exactly Tally's, in order.
        let mut expected = Vec::new();
        let mut documented = Vec::new();
        let mut invalid = 0;
        for outcome in carbon {
            match outcome {
                CarbonOutcome::Accepted {
                    path,
                    value,
                    timestamp,
                } => match documented_refusal(path, *value, *timestamp, &window) {
                    None => expected.push((path.clone(), *value, *timestamp)),
                    Some(reason) => documented.push(reason),
                },
                CarbonOutcome::Invalid(_) => invalid += 1,
                other => panic!("{shown:?}: carbon made {other:?}"),
            }
        }
        let accepted: Vec<_> = tally.iter().filter_map(|r| r.clone().ok()).collect();
        assert_eq!(accepted, expected, "{shown:?}");
        let refused: Vec<Reject> = tally.iter().filter_map(|r| r.clone().err()).collect();
        assert_eq!(
            refused.iter().filter(|r| INVALID.contains(r)).count(),
            invalid,
            "{shown:?}: {refused:?} against carbon's {carbon:?}"
        );
        for reason in documented {
            assert!(refused.contains(&reason), "{shown:?}: {refused:?}");
        }
    }
}
