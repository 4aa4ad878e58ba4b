//! The parser's tests: lines and packets read, refused, and round-tripped.

use super::*;
use proptest::prelude::*;

/// The name and samples of an accepted line.
fn read(line: &str) -> (&str, Vec<Sample<'_>>) {
    match parse_line(line) {
        Ok(l) => {
            let samples: Vec<Sample<'_>> = l.samples().collect();
            assert_eq!(samples.len(), l.len(), "{line:?}");
            (l.name, samples)
        }
        Err(r) => panic!("{line:?} refused: {r:?}"),
    }
}

fn reject(line: &str) -> Reject {
    match parse_line(line) {
        Err(r) => r,
        Ok(l) => panic!("{line:?} parsed as {:?}", read(line).1.get(..l.len())),
    }
}

fn now(reading: Reading<'_>) -> Sample<'_> {
    Sample { reading, at: None }
}

fn count(n: i64) -> Sample<'static> {
    now(Reading::Count(n))
}

fn obs(value: f64, weight: u64) -> Sample<'static> {
    now(Reading::Observation { value, weight })
}

fn gauge(value: f64, relative: bool) -> Sample<'static> {
    now(Reading::Gauge { value, relative })
}

#[test]
fn counters_with_rates_and_tags() {
    assert_eq!(read("hits:1|c"), ("hits", vec![count(1)]));
    assert_eq!(read("hits:-3|c"), ("hits", vec![count(-3)]));
    assert_eq!(read("hits:1|c|@0.1"), ("hits", vec![count(10)]));
    assert_eq!(
        read("hits:2|c|@0.5|#env:prod,az:b"),
        ("hits", vec![count(4)])
    );
    assert_eq!(read("hits:1|c|#env:prod|@0.25"), ("hits", vec![count(4)]));
    assert_eq!(
        read("api.calls/user:42|c"),
        ("api.calls/user", vec![count(42)])
    );
    assert_eq!(read("hits:1.6|c"), ("hits", vec![count(2)]));
    assert!(parse_line("hits:1|c|#env:prod").unwrap().tagged);
    assert!(!parse_line("hits:1|c").unwrap().tagged);
    // An empty tag list drops nothing.
    assert!(!parse_line("hits:1|c|#").unwrap().tagged);
}

/// Issue 21: the name ends at the first `:`, as statsd and DogStatsD
/// read it; `pk:1:2|h` was one observation of 2 on a statistic `pk:1`.
#[test]
fn issue_21_the_name_ends_at_the_first_colon() {
    assert_eq!(read("pk:1:2|h"), ("pk", vec![obs(1.0, 1), obs(2.0, 1)]));
    assert_eq!(read("hits:1|c:2|c"), ("hits", vec![count(1), count(2)]));
    assert_eq!(read("ct:1|c|c:abc123"), ("ct", vec![count(1)]));
    assert_eq!(
        read("ts:1|c|T1700000000"),
        (
            "ts",
            vec![Sample {
                reading: Reading::Count(1),
                at: Some(1_700_000_000)
            }]
        )
    );
    let tagged = parse_line("tg:1|c|#env:prod").unwrap();
    assert_eq!((tagged.name, tagged.tagged), ("tg", true));
    assert_eq!(tagged.samples().collect::<Vec<_>>(), vec![count(1)]);
    // What Tally once read as a name with `:` is the name `shop`.
    assert_eq!(reject("shop:checkout:5|c"), Reject::BadValue);
    assert_eq!(read("shop:5:6|c"), ("shop", vec![count(5), count(6)]));
    assert_eq!(reject("users:a:b|s"), Reject::BadValue);
}

#[test]
fn samples_have_their_own_type_rate_and_time() {
    assert_eq!(
        read("x:1|c|@0.5:2|ms|@0.25:3|g:+1|g:ann|s"),
        (
            "x",
            vec![
                count(2),
                obs(2.0, 4),
                gauge(3.0, false),
                gauge(1.0, true),
                now(Reading::Member("ann")),
            ]
        )
    );
    let (_, timed) = read("x:1|c|T100:2|c:3|c|T200");
    let times: Vec<Option<u64>> = timed.iter().map(|s| s.at).collect();
    assert_eq!(times, vec![Some(100), None, Some(200)]);
    assert!(parse_line("x:1|c:2|c|T5").unwrap().timed);
    assert!(!parse_line("x:1|c:2|c").unwrap().timed);
    // Packed values share their group's fields.
    assert_eq!(
        read("lat:1:2:3|ms|@0.5|#a:b|T9"),
        (
            "lat",
            [1.0, 2.0, 3.0]
                .map(|value| Sample {
                    reading: Reading::Observation { value, weight: 2 },
                    at: Some(9)
                })
                .to_vec()
        )
    );
    assert_eq!(
        read("q:5:+1:-2|g"),
        (
            "q",
            vec![gauge(5.0, false), gauge(1.0, true), gauge(-2.0, true)]
        )
    );
    // A line that fails in a later sample is refused whole.
    assert_eq!(reject("hits:1|c:x|c"), Reject::BadValue);
    assert_eq!(reject("hits:1|c:2|zz"), Reject::UnknownType);
    assert_eq!(reject("hits:1|c:2|c|@7"), Reject::BadRate);
    assert_eq!(reject("hits:1|c:"), Reject::Malformed);
    assert_eq!(reject("hits:1::2|c"), Reject::BadValue);
    assert_eq!(reject("hits:1:|c"), Reject::BadValue);
}

#[test]
fn fields_come_in_any_order_and_colons_in_tags_and_origin_are_theirs() {
    fn tagged_counter(line: &str) -> (&str, bool, Vec<Sample<'_>>) {
        let l = parse_line(line).unwrap_or_else(|r| panic!("{line:?}: {r:?}"));
        (l.name, l.tagged, l.samples().collect())
    }
    let at = |n, t| Sample {
        reading: Reading::Count(n),
        at: Some(t),
    };
    for line in [
        "n:1|c|@0.5|#k:v|c:id:x|T77",
        "n:1|c|T77|c:id:x|#k:v|@0.5",
        "n:1|c|c:id:x|@0.5|T77|#k:v",
        "n:1|c|#k:v|T77|@0.5|e:it-false,cn-web|card:low",
    ] {
        assert_eq!(tagged_counter(line), ("n", true, vec![at(2, 77)]), "{line}");
    }
    // After a tag list or an origin field, a `:` is still theirs, so a
    // statsd sample cannot follow them.
    assert_eq!(reject("n:1|c|#k:v:2|c"), Reject::Malformed);
    assert_eq!(reject("n:1|c|c:abc:2|c"), Reject::Malformed);
    assert_eq!(read("n:1|c|c:abc|#t"), ("n", vec![count(1)]));
}

#[test]
fn times_are_whole_unix_seconds() {
    for line in [
        "t:1|c|T",
        "t:1|c|T0",
        "t:1|c|T-5",
        "t:1|c|T+5",
        "t:1|c|T1.5",
        "t:1|c|T253402300800",
        "t:1|c|T99999999999999999999999",
    ] {
        assert_eq!(reject(line), Reject::BadTime, "{line}");
    }
    assert_eq!(read("t:1|c|T253402300799").1[0].at, Some(253_402_300_799));
}

#[test]
fn a_time_must_be_one_the_store_keeps() {
    let rs = [Precision::new(60, 60), Precision::new(3600, 24)];
    let now = Timestamp::from_secs(1_700_000_030).unwrap();
    assert_eq!(check_time(1_700_000_030, now, &rs), Ok(()));
    assert_eq!(check_time(1_700_000_030 - 60, now, &rs), Ok(()));
    // The oldest hour kept starts 23 hours before the current one.
    let oldest = 1_699_999_200 - 23 * 3600;
    assert_eq!(check_time(oldest, now, &rs), Ok(()));
    assert_eq!(check_time(oldest - 1, now, &rs), Err(Reject::TimeNotKept));
    assert_eq!(check_time(1_700_000_090, now, &rs), Ok(()));
    assert_eq!(
        check_time(1_700_000_091, now, &rs),
        Err(Reject::TimeNotKept)
    );
}

#[test]
fn events_and_service_checks_have_a_reason_of_their_own() {
    for line in [
        "_e{5,4}:title|text",
        "_e{21,36}:An exception occurred|Cannot parse CSV file from 10.0.0.17|t:warning|#err_type:bad_file",
        "_sc|Redis connection|2|#env:dev|m:Redis connection timed out after 10s",
        "_sc|db|0",
    ] {
        assert_eq!(reject(line), Reject::EventOrServiceCheck, "{line}");
    }
    // A metric whose name merely starts like one is a metric.
    assert_eq!(read("_scale:1|c"), ("_scale", vec![count(1)]));
    assert_eq!(read("_e:1|c"), ("_e", vec![count(1)]));
}

/// The example datagrams of the DogStatsD protocol documentation
/// (datagram format, protocol v1.0 to v1.6), as Tally reads them.
#[test]
fn dogstatsd_documentation_examples() {
    let member = |m| now(Reading::Member(m));
    // Each line's metric is the text before its first `:`.
    let cases: Vec<(&str, bool, Vec<Sample<'_>>)> = vec![
        ("page.views:1|c", false, vec![count(1)]),
        ("fuel.level:0.5|g", false, vec![gauge(0.5, false)]),
        ("song.length:240|h|@0.5", false, vec![obs(240.0, 2)]),
        ("users.uniques:1234|s", false, vec![member("1234")]),
        ("users.online:1|c|#country:china", true, vec![count(1)]),
        ("users.online:1|c|@0.5|#country:china", true, vec![count(2)]),
        // v1.1: packed values.
        (
            "page.views:1:2:32|d",
            false,
            vec![obs(1.0, 1), obs(2.0, 1), obs(32.0, 1)],
        ),
        (
            "song.length:240:234|h|@0.5",
            false,
            vec![obs(240.0, 2), obs(234.0, 2)],
        ),
        // v1.2: a container id.
        (
            "page.views:1|g|#env:dev|c:83c0a99c0a54c0c187f461c7980e9b57f3f6a8b0c918c8d93df19a9de6f3fe1d",
            true,
            vec![gauge(1.0, false)],
        ),
        // v1.3: a timestamp.
        (
            "page.views:15|c|#env:dev|T1656581400",
            true,
            vec![Sample {
                reading: Reading::Count(15),
                at: Some(1_656_581_400),
            }],
        ),
        // v1.4: the container id field's prefixed forms.
        ("page.views:1|c|c:ci-83c0a99c0a54", false, vec![count(1)]),
        ("page.views:1|c|c:in-1234", false, vec![count(1)]),
        // v1.5 and v1.6: external data and cardinality.
        (
            "page.views:1|c|#env:dev|e:it-false,cn-nginx-webserver,pu-75a2b6d5-3949-4afb-ad0d-92ff0674e759",
            true,
            vec![count(1)],
        ),
        (
            "page.views:1|c|#env:dev|card:orchestrator",
            true,
            vec![count(1)],
        ),
        // The shell examples.
        ("custom_metric:60|g|#shell", true, vec![gauge(60.0, false)]),
        ("custom.metric.name:1|c", false, vec![count(1)]),
    ];
    for (line, tagged, samples) in cases {
        let name = &line[..line.find(':').unwrap()];
        let parsed = parse_line(line).unwrap_or_else(|r| panic!("{line}: {r:?}"));
        assert_eq!(
            (
                parsed.name,
                parsed.tagged,
                parsed.samples().collect::<Vec<_>>()
            ),
            (name, tagged, samples),
            "{line}"
        );
    }
    for line in [
        "_e{21,42}:An exception occurred|Cannot parse JSON request:\\\\n{\"foo: \"bar\"}|p:low|#err_type:bad_request",
        "_e{20,24}:Event from the shell|This was sent from Bash!|#shell,bash",
    ] {
        assert_eq!(reject(line), Reject::EventOrServiceCheck, "{line}");
    }
}

#[test]
fn other_types_and_garbage_are_rejected() {
    let cases: [(Reject, &[&str]); 6] = [
        (Reject::UnknownType, &["temp:21|x", "rt:320|timer"]),
        (
            Reject::BadValue,
            &[
                "users:|s",
                "temp:+x|g",
                "hits:abc|c",
                "hits:NaN|c",
                "hits:inf|c",
            ],
        ),
        (
            Reject::BadRate,
            &["rt:1|ms|@0", "hits:1|c|@0", "hits:1|c|@1.5", "hits:1|c|@x"],
        ),
        (
            Reject::Overflow,
            &[
                "rt:1|ms|@1e-300",
                "hits:1e19|c",
                "hits:1|c|@0.0000000000000000001",
            ],
        ),
        (
            Reject::Malformed,
            &[
                "hits",
                "hits:",
                "hits:1",
                "hits:1|",
                "hits|c",
                "a|b:1|c",
                "hits:1|c|x",
                "hits:1|c|",
                "hits:1|c||@0.5",
                "hits:1|c|card",
            ],
        ),
        (Reject::BadName, &[":1|c"]),
    ];
    for (why, lines) in cases {
        for line in lines {
            assert_eq!(reject(line), why, "{line}");
        }
    }
}

#[test]
fn timers_histograms_and_distributions_are_weighted_observations() {
    assert_eq!(read("rt:320|ms"), ("rt", vec![obs(320.0, 1)]));
    assert_eq!(read("rt:1.5|ms|@0.1"), ("rt", vec![obs(1.5, 10)]));
    assert_eq!(read("rt:2|h|@0.3"), ("rt", vec![obs(2.0, 3)]));
    assert_eq!(read("ab:-4|d|#k:v|@0.5"), ("ab", vec![obs(-4.0, 2)]));
    // A rate close to 1 still weighs one observation.
    assert_eq!(read("rt:7|ms|@0.9"), ("rt", vec![obs(7.0, 1)]));
}

#[test]
fn gauges_set_or_adjust_and_sets_take_members() {
    assert_eq!(read("temp:21|g"), ("temp", vec![gauge(21.0, false)]));
    assert_eq!(read("temp:+3.5|g"), ("temp", vec![gauge(3.5, true)]));
    assert_eq!(read("temp:-5|g"), ("temp", vec![gauge(-5.0, true)]));
    assert_eq!(read("temp:0|g|#env:x"), ("temp", vec![gauge(0.0, false)]));
    assert_eq!(
        read("users:alice|s"),
        ("users", vec![now(Reading::Member("alice"))])
    );
    assert_eq!(
        read("users:alice|s:bob|s"),
        (
            "users",
            vec![now(Reading::Member("alice")), now(Reading::Member("bob"))]
        )
    );
}

#[test]
fn packets_hold_several_lines() {
    let lines: Vec<Result<(&str, Vec<Sample<'_>>), Reject>> =
        parse_packet(b"a:1|c\nb:2|c|@0.5\r\nbad\n\ng:1|g\nq:1|zz\n_sc|x|0\n")
            .map(|l| l.map(|l| (l.name, l.samples().collect())))
            .collect();
    assert_eq!(
        lines,
        vec![
            Ok(("a", vec![count(1)])),
            Ok(("b", vec![count(4)])),
            Err(Reject::Malformed),
            Ok(("g", vec![gauge(1.0, false)])),
            Err(Reject::UnknownType),
            Err(Reject::EventOrServiceCheck),
        ]
    );
    assert_eq!(
        parse_packet(b"\xff\xfe:1|c")
            .map(|l| l.err())
            .collect::<Vec<_>>(),
        vec![Some(Reject::Malformed)]
    );
    // A packet that is not UTF-8 as a whole loses only its bad lines.
    let mixed: Vec<Result<&str, Reject>> =
        parse_packet(b"a:1|c\r\n\xff:1|c\n \nn\xc3\xa9:2|c\nb:\xe9|s")
            .map(|l| l.map(|l| l.name))
            .collect();
    assert_eq!(
        mixed,
        vec![
            Ok("a"),
            Err(Reject::Malformed),
            Ok("né"),
            Err(Reject::Malformed)
        ]
    );
}

/// A sample as generated for the round trip: its text and what it reads.
fn group_strategy() -> impl Strategy<Value = (String, Vec<Sample<'static>>)> {
    let value = -1_000_000i64..1_000_000;
    let fields = (
        proptest::option::of(1u32..=100),
        proptest::option::of(1u64..2_000_000_000),
        proptest::option::of("[a-z]{1,5}(:[a-z0-9]{1,5})?(,[a-z]{1,5}:[a-z]{1,3}){0,2}"),
        proptest::option::of("(ci-|in-)?[a-f0-9:]{1,12}"),
        any::<u8>(),
    );
    (0u8..4, proptest::collection::vec(value, 1..4), fields).prop_map(
        |(kind, values, (rate, at, tags, container, order))| {
            let rate_f = rate.map_or(1.0, |r| f64::from(r) / 100.0);
            let (type_, values, read): (&str, Vec<i64>, Vec<Reading<'static>>) = match kind {
                0 => (
                    "c",
                    values.clone(),
                    values
                        .iter()
                        .map(|&v| Reading::Count((v as f64 / rate_f).round() as i64))
                        .collect(),
                ),
                1 => {
                    let weight = ((1.0 / rate_f).round() as u64).max(1);
                    (
                        "ms",
                        values.clone(),
                        values
                            .iter()
                            .map(|&v| Reading::Observation {
                                value: v as f64,
                                weight,
                            })
                            .collect(),
                    )
                }
                2 => (
                    "g",
                    values.clone(),
                    values
                        .iter()
                        .map(|&v| Reading::Gauge {
                            value: v as f64,
                            relative: v < 0,
                        })
                        .collect(),
                ),
                // Sets: one member; a number's text is a fine member.
                _ => {
                    let m: &'static str = Box::leak(values[0].to_string().into_boxed_str());
                    ("s", vec![values[0]], vec![Reading::Member(m)])
                }
            };
            let mut fields: Vec<String> = Vec::new();
            if let Some(r) = rate {
                fields.push(format!("@{}", f64::from(r) / 100.0));
            }
            if let Some(t) = at {
                fields.push(format!("T{t}"));
            }
            if let Some(t) = &tags {
                fields.push(format!("#{t}"));
            }
            if let Some(c) = &container {
                fields.push(format!("c:{c}"));
            }
            let turn = usize::from(order) % fields.len().max(1);
            fields.rotate_left(turn);
            let text = format!(
                "{}|{type_}{}",
                values
                    .iter()
                    .map(i64::to_string)
                    .collect::<Vec<_>>()
                    .join(":"),
                fields.iter().map(|f| format!("|{f}")).collect::<String>()
            );
            let samples = read
                .into_iter()
                .map(|reading| Sample { reading, at })
                .collect();
            (text, samples)
        },
    )
}

/// The fields a sample may carry after its type: a rate, tags, a
/// container id, external data, a cardinality, a time.
const FIELDS: &[&str] = &[
    "|@0.5",
    "|#k:v",
    "|#t",
    "|c:ab:1",
    "|e:x",
    "|card:low",
    "|T99",
];

/// Pieces of statsd lines: names, values, separators, types, fields.
fn tokens() -> Vec<&'static str> {
    let head = [
        "a", "b.c", ":", "|", "1", "2.5", "-3", "+4", "c", "ms", "h", "g", "s", "|c",
    ];
    let tail = ["#", "@", "T", "_e{", "_sc|"];
    [&head[..], FIELDS, &tail[..]].concat()
}

/// Lines of statsd's shape (a name, `:`, groups of values with a type
/// and fields) with up to three tokens put in or swapped at random
/// places: about a third are still accepted.
fn near_lines() -> impl Strategy<Value = String> {
    let group = (
        proptest::collection::vec(
            proptest::sample::select(&["1", "2.5", "-3", "+4"][..]),
            1..3,
        ),
        proptest::sample::select(&["c", "ms", "h", "d", "g"][..]),
        proptest::collection::vec(proptest::sample::select(FIELDS), 0..3),
    );
    let noise = proptest::collection::vec(
        (
            any::<prop::sample::Index>(),
            proptest::sample::select(tokens()),
            any::<bool>(),
        ),
        0..3,
    );
    (
        proptest::sample::select(&["a", "b.c", "x_y"][..]),
        proptest::collection::vec(group, 1..3),
        noise,
    )
        .prop_map(|(name, groups, noise)| {
            let mut pieces: Vec<&str> = vec![name];
            for (values, kind, fields) in groups {
                pieces.push(":");
                for (i, v) in values.into_iter().enumerate() {
                    if i > 0 {
                        pieces.push(":");
                    }
                    pieces.push(v);
                }
                pieces.push("|");
                pieces.push(kind);
                pieces.extend(fields);
            }
            for (at, token, insert) in noise {
                let at = at.index(pieces.len());
                if insert {
                    pieces.insert(at, token);
                } else {
                    pieces[at] = token;
                }
            }
            pieces.concat()
        })
}

proptest! {
    #[test]
    fn never_panics(packet in proptest::collection::vec(any::<u8>(), 0..300)) {
        for line in parse_packet(&packet).flatten() {
            prop_assert!(Name::check(line.name).is_ok());
            prop_assert_eq!(line.samples().count(), line.len());
            for s in line.samples() {
                if let Reading::Count(n) = s.reading {
                    prop_assert!(n != i64::MIN);
                }
            }
        }
    }

    /// Issue 21's property: an accepted line writes only under the text
    /// before its first `:`, whatever `:`, `|`, tags and fields it holds.
    #[test]
    fn accepted_lines_write_under_the_text_before_the_first_colon(
        line in near_lines(),
    ) {
        if let Ok(parsed) = parse_line(&line) {
            prop_assert_eq!(Some(parsed.name), line.split(':').next());
            prop_assert!(!parsed.name.contains(':'));
        }
    }

    /// Lines made of any samples, packed values and fields (tags and
    /// container ids full of `:`) read back as sent, under their name.
    #[test]
    fn generated_lines_read_back_as_sent(
        name in "[a-z][a-z0-9._-]{0,20}",
        groups in proptest::collection::vec(group_strategy(), 1..4),
    ) {
        // Tags and origin fields swallow a following `:`, so only the
        // last group may carry them.
        let last = groups.len() - 1;
        let mut text = name.clone();
        let mut expected = Vec::new();
        let mut tagged = false;
        for (i, (group, samples)) in groups.iter().enumerate() {
            let group = if i < last {
                group.split('|').filter(|f| !f.starts_with('#') && !f.starts_with("c:")).collect::<Vec<_>>().join("|")
            } else {
                tagged = group.split('|').any(|f| f.len() > 1 && f.starts_with('#'));
                group.clone()
            };
            text.push(':');
            text.push_str(&group);
            expected.extend_from_slice(samples);
        }
        let parsed = parse_line(&text);
        prop_assert!(parsed.is_ok(), "{} refused: {:?}", text, parsed.err());
        let parsed = parsed.unwrap();
        prop_assert_eq!(parsed.name, name.as_str());
        prop_assert_eq!(parsed.tagged, tagged);
        prop_assert_eq!(parsed.samples().collect::<Vec<_>>(), expected);
    }

    #[test]
    fn any_other_type_is_rejected(name in "[a-z]{1,10}", value in 0u32..1000, kind in "(x|set|timer|cc|gg|[A-Z]{1,3})") {
        let line = format!("{name}:{value}|{kind}");
        prop_assert_eq!(parse_line(&line).err(), Some(Reject::UnknownType));
    }

    #[test]
    fn sampled_observations_weigh_the_inverse_rate(value in -1e6f64..1e6, rate_pct in 1u32..=100) {
        let rate = f64::from(rate_pct) / 100.0;
        let line = format!("rt:{value}|ms|@{rate}");
        let weight = ((1.0 / rate).round() as u64).max(1);
        prop_assert_eq!(read(&line), ("rt", vec![obs(value, weight)]));
    }
}
