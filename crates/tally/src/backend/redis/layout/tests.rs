//! The key layouts' tests: keys as each layout names them.

use super::*;

#[test]
fn ria_keys_are_the_books() {
    assert_eq!(ria_member(5, "hits"), "5:hits");
    assert_eq!(ria_hash(5, "hits"), "count:5:hits");
    assert_eq!(ria_parse_member("5:hits"), Some((5, "hits")));
    assert_eq!(ria_parse_member("60:a:b"), Some((60, "a:b")));
    assert_eq!(ria_parse_member("x:hits"), None);
    assert_eq!(ria_parse_member("0:hits"), None);
}

#[test]
fn default_keys_share_a_tag_per_counter() {
    let name = Name::new("hits").unwrap();
    let shard = shard_of("hits");
    assert!(shard < SHARDS);
    let reg = default_registry("tally", shard);
    let h = default_hash("tally", 60, &name);
    assert_eq!(h, format!("{{tally:{shard}}}:60:hits"));
    assert!(reg.starts_with(&format!("{{tally:{shard}}}")));
}

/// A space of sums other than the counters': `stats`, at 60 s keeping 10.
fn stats_space() -> Space {
    use crate::engine::{Kind, Precision, Retention};
    Space::new(
        "stats",
        Kind::Sum,
        vec![Precision::new(60, 10)],
        Retention::Cleaner,
    )
    .unwrap()
}

#[test]
fn counters_keep_their_keys_and_other_spaces_get_their_own() {
    let counters = Space::counters(&[60], 10);
    let stats = stats_space();
    let shard = shard_of("hits");
    let seq = WriteSeq {
        writer: 0xab,
        lane: 2,
        seq: 9,
    };
    let book = Layout::Ria.space_keys(&counters);
    assert_eq!(book.hash(60, "hits"), "count:60:hits");
    assert_eq!(book.registry(0), "known:");
    assert_eq!(book.writer(&seq, 0), "tally-writer:00000000000000ab:2");
    let default = Layout::default();
    let keys = default.space_keys(&counters);
    assert_eq!(
        keys.hash(60, "hits"),
        default_hash("tally", 60, &Name::new("hits").unwrap())
    );
    assert_eq!(keys.registry(shard), default_registry("tally", shard));
    assert_eq!(
        keys.writer(&seq, shard),
        format!("{{tally:{shard}}}:writer:00000000000000ab:2")
    );
    let own = default.space_keys(&stats);
    assert_eq!(
        own.hash(60, "hits"),
        format!("{{tally:{shard}}}:stats:60:hits")
    );
    assert_eq!(
        own.registry(shard),
        format!("{{tally:{shard}}}:stats:names")
    );
    assert_eq!(own.registries().len(), SHARDS as usize);
    // A book-layout server keeps new spaces under the default prefix.
    assert_eq!(Layout::Ria.space_keys(&stats), own);
}

#[test]
fn shards_are_stable_and_spread() {
    // Stable: these values are part of the on-disk format.
    assert_eq!(shard_of(""), (0xcbf2_9ce4_8422_2325u64 % 64) as u32);
    let mut seen = [0u32; SHARDS as usize];
    for i in 0..6400 {
        seen[shard_of(&format!("counter-{i}")) as usize] += 1;
    }
    assert!(seen.iter().all(|&n| n > 50 && n < 150), "{seen:?}");
}

#[test]
fn expiring_keys_never_meet_the_default_ones() {
    let counters = Space::counters(&[60], 10);
    let stats = stats_space();
    let layout = Layout::parse("expiring", "app").unwrap();
    let shard = shard_of("hits");
    let keys = layout.space_keys(&counters);
    assert!(keys.is_expiring());
    assert_eq!(
        keys.chunk(60, 600, "hits"),
        format!("{{app:{shard}}}:60@600:hits")
    );
    assert_eq!(keys.registry(shard), format!("{{app:{shard}}}:names@e"));
    assert_eq!(keys.ends(shard), format!("{{app:{shard}}}:ends@e"));
    let own = layout.space_keys(&stats);
    assert_eq!(
        own.chunk(60, 600, "hits"),
        format!("{{app:{shard}}}:stats:60@600:hits")
    );
    assert_eq!(own.ends(shard), format!("{{app:{shard}}}:stats:ends@e"));
}

#[test]
fn compact_keys_are_one_hash_per_series_with_integer_fields() {
    let counters = Space::counters(&[1, 60], 10);
    let stats = stats_space();
    let layout = Layout::parse("compact", "app").unwrap();
    let shard = shard_of("hits");
    let keys = layout.space_keys(&counters);
    assert!(keys.is_compact());
    // Every precision in one hash; the default layout's registries.
    assert_eq!(keys.hash(1, "hits"), format!("{{app:{shard}}}:@:hits"));
    assert_eq!(keys.hash(60, "hits"), keys.hash(1, "hits"));
    assert_eq!(keys.registry(shard), default_registry("app", shard));
    let own = layout.space_keys(&stats);
    assert_eq!(
        own.hash(60, "hits"),
        format!("{{app:{shard}}}:stats:@:hits")
    );
    assert_eq!(own.registry(shard), format!("{{app:{shard}}}:stats:names"));
    // Fields: precision << 32 | slice index, and back.
    assert_eq!(
        keys.field(60, 1_336_376_400).unwrap(),
        (60 << 32) | 22_272_940
    );
    assert_eq!(
        compact_slice(60, (60 << 32) | 22_272_940),
        Some(1_336_376_400)
    );
    assert_eq!(compact_slice(1, (60 << 32) | 22_272_940), None);
    assert_eq!(keys.slice_of_field(60, (60 << 32) | 5), Some(300));
    assert_eq!(compact_field(86_400, 0).unwrap(), 86_400 << 32);
    // What the field cannot hold is refused.
    assert!(compact_field(1 << 31, 0).is_err());
    assert!(compact_field(1, 1 << 32).is_err());
    assert!(compact_field(1, (1 << 32) - 1).is_ok());
    assert!(check_compact("counter", [1, 86_400]).is_ok());
    let e = check_compact("counter", [1 << 31]).unwrap_err().to_string();
    assert!(e.contains("compact layout"), "{e}");
    // The default layout's fields are slice starts.
    let default = Layout::default();
    assert_eq!(default.space_keys(&counters).field(60, 120).unwrap(), 120);
    assert!(Layout::parse("compact", "a{b").is_err());
}

#[test]
fn chunks_hold_keep_slices_and_expire_when_their_last_leaves_the_window() {
    use crate::clock::Timestamp;
    let m = ChunkMath::new(Precision::new(60, 10));
    assert_eq!(m.span(), 600);
    assert_eq!(m.chunk_of(1_199), 600);
    assert_eq!(m.chunk_of(1_200), 1_200);
    // The chunk [600, 1200) holds slices 600..=1140; slice 1140 is kept
    // while now < 1140 + 600.
    assert_eq!(m.expiry(600), 1_740);
    let at = |s| Timestamp::from_secs(s).unwrap();
    // At 1_739 the window is 1_140..=1_680: chunks 600 and 1_200, and the
    // next one (1_800) for writes a little ahead.
    assert_eq!(m.chunks(at(1_739), 0, u64::MAX), vec![600, 1_200, 1_800]);
    assert_eq!(m.chunks(at(1_740), 0, u64::MAX), vec![1_200, 1_800]);
    assert_eq!(m.chunks(at(1_739), 1_200, 1_300), vec![1_200]);
    assert!(m.chunks(at(1_739), 0, 1_000).is_empty());
    assert!(m.chunks(at(1_739), 5_000, 6_000).is_empty());
}

#[test]
fn end_scores_mark_only_writes_that_prove_their_chunks() {
    let r = Precision::new;
    assert!(spans_nest(&[r(1, 120), r(5, 120), r(86_400, 120)]));
    assert!(!spans_nest(&[r(2, 3), r(3, 3)]));
    let fine = ChunkMath::new(r(1, 120));
    let (score, must) = end_score(1_000, Some((fine, 240)), true);
    assert_eq!(score, 1_000 * ENDS_SCALE + 2);
    assert!(!must);
    let (score, must) = end_score(1_000, None, true);
    assert_eq!(score, 1_000 * ENDS_SCALE + NO_MARK);
    assert!(must);
    assert!(end_score(1_000, Some((fine, 240)), false).1);
    // Exact in a double.
    let (score, _) = end_score(4_000_000_000, Some((fine, 240)), true);
    assert_eq!(score / ENDS_SCALE, 4_000_000_000);
    assert!(score < 1 << 53);
}

#[test]
fn layouts_parse_from_their_name_and_prefix() {
    for name in ["expiring", "compact"] {
        let layout = Layout::parse(name, "app").unwrap();
        assert_eq!(layout.name(), name);
        assert_eq!(layout.prefix(), "app");
    }
}

#[test]
fn prefixes_are_checked() {
    assert!(Layout::default_under("ok:prefix").is_ok());
    assert!(Layout::default_under("").is_err());
    assert!(Layout::default_under("a{b").is_err());
    assert!(Layout::parse("nope", "tally").is_err());
    assert_eq!(Layout::parse("ria", "x").unwrap(), Layout::Ria);
}
