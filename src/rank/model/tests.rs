//! Unit tests of the pure leaderboard logic.
use super::*;
use crate::error::Error;
use std::collections::BTreeMap;

/// A small deterministic generator (xorshift) so tests are reproducible.
use crate::testutil::Rng;

#[test]
fn derived_names_lead_back_to_their_board() {
    assert_eq!(base_of_part(b"b|meta"), Some(&b"b"[..]));
    assert_eq!(base_of_part(b"b|slot|42"), Some(&b"b"[..]));
    assert_eq!(
        base_of_part(&slot_key(b"{x}|slot|1", -3)),
        Some(&b"{x}|slot|1"[..])
    );
    assert_eq!(base_of_part(b"b|slot|"), None);
    assert_eq!(base_of_part(b"b|slot|x"), None);
    assert_eq!(base_of_part(b"b"), None);
    assert_eq!(base_of_part(b"|meta"), Some(&b""[..]));
}

/// The meta as stored in the current layout: `(_tally, _slots)`.
fn fields(marker: &str, slots: &str) -> Option<(Meta, MetaLayout)> {
    Meta::from_fields(marker.as_bytes(), Some(slots.as_bytes()))
}

/// The meta as stored in the first layout: four numbers in `_tally`, no `_slots`.
fn four_numbers(marker: &str) -> Option<(Meta, MetaLayout)> {
    Meta::from_fields(marker.as_bytes(), None)
}

#[test]
fn a_span_that_does_not_fit_its_window_is_not_a_leaderboard() {
    // 10000 slots of 1 ms: a span of a million slot indexes is a forgery.
    assert_eq!(fields("rank 10000 1", "0 1000000"), None);
    assert!(fields("rank 10000 1", "0 19999").is_some());
    assert_eq!(fields("rank 10000 1", "0 20000"), None);
    assert!(fields("rank 10000 1", "5 4").is_some());
    // The same in the four-number layout.
    assert_eq!(four_numbers("rank 10000 1 0 1000000"), None);
    assert!(four_numbers("rank 10000 1 0 19999").is_some());
    assert_eq!(four_numbers("rank 10000 1 0 20000"), None);
    assert!(four_numbers("rank 10000 1 5 4").is_some());
}

#[test]
fn marker_and_slots_round_trip() {
    let meta = Meta {
        window: 86_400_000,
        slot: 3_600_000,
        lo: 480_000,
        hi: 480_023,
        capacity: 0,
    };
    assert_eq!(meta.marker(), "rank 86400000 3600000");
    assert_eq!(meta.slots_value(), "480000 480023");
    assert_eq!(
        fields(&meta.marker(), &meta.slots_value()),
        Some((meta, MetaLayout::Current))
    );
    let empty = Meta::new(40, 10);
    assert_eq!(empty.slots_value(), "0 -1");
    assert_eq!(
        fields(&empty.marker(), &empty.slots_value()),
        Some((empty, MetaLayout::Current))
    );
}

#[test]
fn the_four_number_marker_still_loads() {
    let meta = Meta {
        window: 86_400_000,
        slot: 3_600_000,
        lo: 480_000,
        hi: 480_023,
        capacity: 0,
    };
    assert_eq!(
        four_numbers("rank 86400000 3600000 480000 480023"),
        Some((meta, MetaLayout::FourNumberMarker))
    );
    assert_eq!(
        four_numbers("rank 40 10 0 -1"),
        Some((Meta::new(40, 10), MetaLayout::FourNumberMarker))
    );
}

#[test]
fn garbage_markers_are_not_leaderboards() {
    for bad in [
        &b"rank"[..],
        b"rank 1 2 3",
        b"rank 10 3 0 0",
        b"rank 10 5 0 0 9",
        b"ranks 10 5 0 0",
        b"counter 1s:10",
        b"rank 10 5 x 0",
        b"rank 100000 1 0 0",
        b"rank 10 5 0 9000000000",
        // Settings alone, but no `_slots`: the range is unknown.
        b"rank 10 5",
        b"rank 10 5 ",
        b"rank  10 5 0 0",
    ] {
        assert_eq!(Meta::from_fields(bad, None), None, "{bad:?}");
    }
}

#[test]
fn a_valid_marker_with_unreadable_slots_is_not_a_leaderboard() {
    for slots in [
        "",
        "0",
        "0 1 2",
        "x 1",
        "0 x",
        " 0 1",
        "0 1 ",
        "0  1",
        "0 9000000000",
    ] {
        assert_eq!(fields("rank 10 5", slots), None, "{slots:?}");
    }
    // The two layouts never mix: four numbers in `_tally` next to a `_slots` field
    // is nothing tally writes.
    assert_eq!(fields("rank 10 5 0 1", "0 1"), None);
    assert_eq!(fields("rank 10 3", "0 1"), None);
    assert_eq!(fields("rank 100000 1", "0 0"), None);
    assert!(fields("rank 10 5", "-7 -6").is_some());
}

#[test]
fn settings_are_checked() {
    assert!(validate_settings(86_400_000, 3_600_000).is_ok());
    assert_eq!(
        validate_settings(1000, 300).unwrap_err().to_string(),
        "ERR WINDOW (1s) must be a whole multiple of SLOT (300ms)"
    );
    assert_eq!(
        validate_settings(10_001, 1).unwrap_err().to_string(),
        "ERR WINDOW can hold at most 10000 slots"
    );
    assert!(validate_settings(10_000, 1).is_ok());
    // WINDOW and SLOT are durations: at most 10,000 years (a stored meta is checked too).
    let max = crate::args::MAX_DURATION_MS;
    assert!(validate_settings(max, max / 10).is_ok());
    assert_eq!(
        validate_settings(max + 86_400_000, max + 86_400_000),
        Err(Error::InvalidDuration("3652501d".into()))
    );
    let forged = format!("rank {} {}", 10 * max, max);
    assert_eq!(Meta::from_fields(forged.as_bytes(), Some(b"0 0")), None);
}

#[test]
fn ranges_follow_the_window() {
    // 4 slots of 10 ms; slots 3..=7 written.
    let mut meta = Meta::new(40, 10);
    assert!(meta.is_empty());
    assert_eq!(meta.next_due(), None);
    assert!(meta.note_write(5));
    assert!(meta.note_write(3));
    assert!(meta.note_write(7));
    assert!(!meta.note_write(6));
    assert_eq!((meta.lo, meta.hi), (3, 7));
    // At t=75 the window is slots 4..=7: slot 3 is pending.
    assert_eq!(meta.pending_range(75), Some((3, 3)));
    assert_eq!(meta.live_range(75), Some((4, 7)));
    assert_eq!(meta.next_due(), Some(70));
    assert_eq!(meta.pending_range(69), None);
    // Long after: everything pending, nothing live.
    assert_eq!(meta.pending_range(1000), Some((3, 7)));
    assert_eq!(meta.live_range(1000), None);
}

#[test]
fn derived_names_and_hash_tags() {
    assert_eq!(meta_key(b"{lb}x").to_vec(), b"{lb}x|meta".to_vec());
    assert_eq!(slot_key(b"lb", 42).to_vec(), b"lb|slot|42".to_vec());
    assert_eq!(base_of_meta(b"lb|meta"), Some(&b"lb"[..]));
    assert_eq!(base_of_meta(b"lb"), None);
    assert!(has_hash_tag(b"{a}"));
    assert!(has_hash_tag(b"x{a}y"));
    assert!(!has_hash_tag(b"{}a"));
    assert!(!has_hash_tag(b"a{"));
    assert!(!has_hash_tag(b"abc"));
    assert!(!has_hash_tag(b"}{"));
    assert!(has_hash_tag(b"a{{}b}"));
}

/// The quick test in front of the parse turns away no derived name: seeded random names
/// built from the pieces of derived names (and of usual key names) get the answer of the
/// full parse.
#[test]
fn the_quick_test_keeps_every_derived_name() {
    let pieces: [&[u8]; 12] = [
        b"|", b"slot", b"|slot|", b"|meta", b"meta", b"-", b"0", b"7", b"12", b"a", b"user:",
        b"{t}",
    ];
    let mut rng = Rng(11);
    let mut derived = 0;
    for _ in 0..200_000 {
        let mut name = Vec::new();
        for _ in 0..rng.below(7) {
            name.extend_from_slice(pieces[rng.below(pieces.len() as i64) as usize]);
        }
        let parsed = base_of_meta(&name).or_else(|| base_of_slot(&name));
        derived += usize::from(parsed.is_some());
        let shown = String::from_utf8_lossy(&name);
        assert_eq!(base_of_part(&name), parsed, "{shown}");
        assert!(parsed.is_none() || may_be_part(&name), "{shown}");
    }
    assert!(derived > 1000, "only {derived} derived names drawn");
    for name in [
        &b"host:12345"[..],
        b"counter:7",
        b"x|slot",
        b"",
        b"5",
        b"-1",
        b"a|meta0",
    ] {
        assert!(!may_be_part(name), "{}", String::from_utf8_lossy(name));
    }
    for name in [
        &b"b|meta"[..],
        b"b|slot|0",
        b"b|slot|-3",
        b"|slot|9",
        b"b|slot|007",
    ] {
        assert!(may_be_part(name), "{}", String::from_utf8_lossy(name));
    }
    // Long numbers (read 8 digits at a time) and every byte value next to them.
    for digits in 0..30 {
        for byte in 0..=255u8 {
            for tail in [&b""[..], b"9", b"123456789"] {
                let mut name = b"b|slot|".to_vec();
                name.extend(std::iter::repeat_n(b'4', digits));
                name.push(byte);
                name.extend_from_slice(tail);
                let parsed = base_of_meta(&name).or_else(|| base_of_slot(&name));
                assert_eq!(base_of_part(&name), parsed, "{:?}", name);
                assert!(parsed.is_none() || may_be_part(&name));
            }
        }
    }
}

#[test]
fn sub_windows() {
    let meta = Meta::new(86_400_000, 3_600_000);
    assert_eq!(meta.sub_window_slots(3_600_000), Ok(1));
    assert_eq!(meta.sub_window_slots(86_400_000), Ok(24));
    assert!(meta.sub_window_slots(1_800_000).is_err());
    assert!(meta.sub_window_slots(90_000_000).is_err());
}

/// Brute force: exact totals sorted in leaderboard order.
fn brute(raw: &BTreeMap<Vec<u8>, i64>, pending: &BTreeMap<Vec<u8>, i64>) -> Vec<(Vec<u8>, i64)> {
    sort_totals(
        raw.iter()
            .map(|(m, r)| (m.clone(), r - pending.get(m).copied().unwrap_or(0))),
    )
}

/// The raw sorted set in reverse order, as `ZREVRANGE` walks it.
fn walk(raw: &BTreeMap<Vec<u8>, i64>) -> Vec<(Vec<u8>, i64)> {
    let mut all: Vec<(Vec<u8>, i64)> = raw.iter().map(|(m, r)| (m.clone(), *r)).collect();
    all.sort_by(|a, b| ahead((b.1, &b.0), (a.1, &a.0)));
    all
}

#[test]
fn threshold_top_and_rank_match_brute_force() {
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    for round in 0..400 {
        let n = 1 + rng.below(40) as usize;
        let mut raw = BTreeMap::new();
        let mut pending = BTreeMap::new();
        for _ in 0..n {
            let member = format!("m{}", rng.below(60)).into_bytes();
            let r = 1 + rng.below(8);
            let p = if rng.below(3) == 0 {
                rng.below(r + 1)
            } else {
                0
            };
            raw.insert(member.clone(), r);
            pending.insert(member, p);
        }
        let expected = brute(&raw, &pending);
        let adjust = |m: &[u8], r: i64| r - pending.get(m).copied().unwrap_or(0);
        for want in [0usize, 1, 3, 10, 100] {
            let got = top_adjusted(walk(&raw).into_iter(), want, adjust);
            let exp: Vec<_> = expected.iter().take(want).cloned().collect();
            assert_eq!(got, exp, "round {round} want {want}");
        }
        for (pos, (member, total)) in expected.iter().enumerate() {
            let rank = rank_adjusted(walk(&raw).into_iter(), (*total, member), adjust);
            assert_eq!(rank, pos as i64, "round {round} member {member:?}");
        }
    }
}

#[test]
fn threshold_stops_early() {
    // 1000 members, nothing pending: the walk reads only want + 1 of them.
    let raw: BTreeMap<Vec<u8>, i64> = (0..1000)
        .map(|i| (format!("m{i:04}").into_bytes(), 1000 - i))
        .collect();
    let mut read = 0;
    let top = top_adjusted(walk(&raw).into_iter().inspect(|_| read += 1), 10, |_, r| r);
    assert_eq!(top.len(), 10);
    assert_eq!(top.first().map(|e| e.1), Some(1000));
    assert_eq!(read, 11);
}

#[test]
fn scores_become_totals() {
    assert_eq!(score_to_total(42.0), 42);
    assert_eq!(score_to_total(f64::NAN), 0);
    assert_eq!(score_to_total(1e300), i64::MAX);
    assert_eq!(score_to_total(MAX_TOTAL as f64), MAX_TOTAL);
}

#[test]
fn recent_range_keeps_to_the_window_and_the_stored_slots() {
    // 4 slots of 10 ms; slots 3 ..= 9 may have a hash.
    let meta = Meta {
        window: 40,
        slot: 10,
        lo: 3,
        hi: 9,
        capacity: 0,
    };
    // At t = 95 the window is slots 6 ..= 9.
    assert_eq!(meta.recent_range(95, 4), Some((6, 9)));
    assert_eq!(meta.recent_range(95, 1), Some((9, 9)));
    assert_eq!(meta.recent_range(95, 2), Some((8, 9)));
    // More than the window never reaches a slot that has left it.
    assert_eq!(meta.recent_range(95, 40), Some((6, 9)));
    // Later, slots beyond `hi` are empty: the range stops at `hi`.
    assert_eq!(meta.recent_range(115, 4), Some((8, 9)));
    assert_eq!(meta.recent_range(135, 2), None);
    // Earlier than `lo`: starts at `lo`.
    assert_eq!(meta.recent_range(45, 4), Some((3, 4)));
    assert_eq!(meta.recent_range(95, 0), None);
    assert_eq!(Meta::new(40, 10).recent_range(95, 4), None);
}

#[test]
fn slot_names_write_the_index_in_decimal() {
    for index in [0i64, 7, 10, -1, -10, 478_617, i64::MAX, i64::MIN] {
        let mut want = b"b|slot|".to_vec();
        want.extend_from_slice(index.to_string().as_bytes());
        assert_eq!(slot_key(b"b", index).to_vec(), want, "{index}");
    }
}

#[test]
fn computed_totals_answer_score_top_and_rank() {
    let mut builder = TotalsBuilder::new();
    for (member, count) in [
        ("a", "3"),
        ("b", "5"),
        ("c", "3"),
        ("a", "2"),
        ("d", "junk"),
        ("e", "-4"),
        ("f", "0"),
    ] {
        builder.add(member.as_bytes(), count.as_bytes());
    }
    let totals = builder.finish();
    // a 5, b 5, c 3: ties by member descending.
    let order: Vec<(&[u8], i64)> = totals.top(0, 10).collect();
    assert_eq!(order, vec![(&b"b"[..], 5), (b"a", 5), (b"c", 3)]);
    assert_eq!(totals.len(), 3);
    assert_eq!(totals.get(b"a"), 5);
    assert_eq!(totals.get(b"d"), 0);
    assert_eq!(totals.rank(5, b"b"), 0);
    assert_eq!(totals.rank(5, b"a"), 1);
    assert_eq!(totals.rank(3, b"c"), 2);
    assert_eq!(totals.rank(4, b"zz"), 2);
    assert_eq!(totals.top(1, 1).collect::<Vec<_>>(), vec![(&b"a"[..], 5)]);
    assert_eq!(totals.top(5, 3).count(), 0);
    assert_eq!(totals.top(0, 0).count(), 0);
    assert_eq!(totals.top(2, usize::MAX).count(), 1);
}

#[test]
fn a_stepped_sort_equals_a_sort_at_any_step_size() {
    let mut rng = Rng(7);
    for n in [0usize, 1, 5, 127, 128, 129, 1023, 1024, 1025, 3000, 9000] {
        let keys: Vec<u64> = (0..n).map(|_| rng.next_u64() % 50).collect();
        let mut want: Vec<u32> = (0..n as u32).collect();
        // Stable: equal keys keep their positions' order.
        want.sort_by_key(|&i| keys[i as usize]);
        let cmp = |a: u32, b: u32| keys[a as usize].cmp(&keys[b as usize]);
        for work in [1usize, 7, 1000, usize::MAX] {
            let mut sort = SteppedSort::default();
            let mut steps = 0;
            while !sort.step(n, work, cmp) {
                steps += 1;
                assert!(steps < 10_000_000, "n {n} work {work}: no end");
            }
            assert_eq!(sort.into_sorted(), want, "n {n} work {work}");
        }
    }
}

#[test]
fn computed_totals_are_freed_in_steps() {
    let mut builder = TotalsBuilder::new();
    for i in 0..10_000 {
        builder.add(format!("m{i}").as_bytes(), b"1");
    }
    let mut totals = builder.finish();
    assert_eq!(totals.len(), 10_000);
    let mut steps = 0;
    while !totals.free_step(1000) {
        steps += 1;
        assert!(steps < 100, "no end");
    }
    assert!(steps >= 20, "freed in {steps} steps");
    assert!(totals.is_empty());
    assert_eq!(totals.get(b"m1"), 0);
    assert_eq!(totals.top(0, 10).count(), 0);
}

#[test]
fn freeing_computed_totals_shrinks_their_bytes_step_by_step() {
    let mut builder = TotalsBuilder::new();
    for i in 0..5_000 {
        builder.add(format!("m{i}").as_bytes(), b"2");
    }
    let mut totals = builder.finish();
    let mut last = totals.bytes();
    let mut steps = 0;
    // The index goes first, through its iterator (O(work) a step), then the entries.
    while !totals.free_step(500) {
        let now = totals.bytes();
        assert!(now <= last, "step {steps}: {now} bytes after {last}");
        last = now;
        steps += 1;
        assert!(steps < 100, "no end");
    }
    assert!(steps >= 15, "freed in {steps} steps");
    assert_eq!(totals.bytes(), 0);
    assert!(totals.is_empty());
}
