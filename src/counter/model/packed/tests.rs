//! Unit and property tests of the packed run: the worked example of the design text, the
//! field names beside the other fields, round trips, sums, edits and trims against a model
//! of every slot's count, overflow, and untrusted bytes.

use super::*;
use crate::counter::model::{parse_slot_field, slot_field};
use proptest::collection::vec;
use proptest::prelude::*;

fn hex(bytes: &[u8]) -> String {
    let parts: Vec<String> = bytes.iter().map(|b| format!("{b:02x}")).collect();
    parts.join(" ")
}

/// The non-zero slots of every-slot `counts` of the run starting at `first`.
fn pairs(first: i64, counts: &[i64]) -> Vec<(i64, i64)> {
    (counts.iter().enumerate())
        .filter(|(_, &c)| c != 0)
        .map(|(offset, &c)| (first + offset as i64, c))
        .collect()
}

fn sum(counts: &[i64]) -> i128 {
    counts.iter().map(|&c| i128::from(c)).sum()
}

fn fits(sum: i128) -> bool {
    i64::try_from(sum).is_ok()
}

#[test]
fn the_worked_example_of_the_design_text() {
    // 1m:p29917440: the run of minutes from 2026-11-19 00:00 UTC.
    assert_eq!(packed_field(60_000, 29_917_440), b"1m:p29917440");
    let value = encode(
        29_917_440,
        RUN,
        &[(29_917_440, 3), (29_917_441, 5000), (29_917_447, -2)],
    );
    let value = value.unwrap();
    assert_eq!(hex(&value), "53 f0 01 03 92 4e 00 06 00 90 4e 05 03");
    assert_eq!(total(&value), Ok(5001));
    let plain = encode(29_917_440, RUN, &[(29_917_440, 10_000), (29_917_441, -1)]);
    assert_eq!(
        hex(&plain.unwrap()),
        "73 f0 01 02 8f 4e 00 90 4e 00 80 00 01"
    );
    let dense = encode(
        29_917_440,
        RUN,
        &(0..RUN).map(|i| (29_917_440 + i, 300)).collect::<Vec<_>>(),
    );
    assert_eq!(hex(&dense.unwrap()), "63 f0 01 f0 01 c0 b2 04 ac 02");
    let mut counts = vec![5000i64; RUN as usize];
    counts[1] = 7;
    let dense = encode_counts(&counts).unwrap();
    assert_eq!(hex(&dense[..11]), "64 f0 01 f0 01 ff f7 48 88 27 07");
    assert_eq!(dense.len(), 11 + 2 * (RUN as usize - 2));
}

#[test]
fn field_names_stay_apart_from_slot_and_settings_fields() {
    assert_eq!(
        parse_packed_field(b"1m:p29917440"),
        Some((60_000, 29_917_440))
    );
    assert_eq!(parse_packed_field(b"1h:p-240"), Some((3_600_000, -240)));
    for other in [
        &b"1m:29917440"[..],
        b"_tally",
        b"_state",
        b"1m:p",
        b"1m:px",
        b"p1",
        b"1m:pp1",
    ] {
        assert_eq!(parse_packed_field(other), None, "{other:?}");
    }
    assert_eq!(parse_slot_field(b"1m:p29917440"), None);
    assert!(slot_field(60_000, 29_917_440).as_bytes() < &b"1m:p0"[..]);
    assert_eq!(run_first(29_917_441), Some(29_917_440));
    assert_eq!(run_first(-1), Some(-RUN));
    assert_eq!(run_first(i64::MIN), None);
    assert_eq!(run_first(i64::MAX), Some(i64::MAX - i64::MAX % RUN));
}

#[test]
fn totals_beyond_i64_are_refused_as_overflow() {
    let first = 0;
    assert_eq!(
        encode(first, RUN, &[(0, i64::MAX), (1, 1)]),
        Err(Error::Overflow)
    );
    let value = encode(first, RUN, &[(0, i64::MAX), (1, -1)]).unwrap();
    assert_eq!(add(first, &value, 0, 1), Err(Error::Overflow)); // the slot itself
    assert_eq!(add(first, &value, 2, 2), Err(Error::Overflow)); // the run's total
    assert_eq!(set(first, &value, 1, 1), Err(Error::Overflow));
    assert_eq!(add(first, &value, 2, 1).map(|e| e.count), Ok(1));
    // A part of a run may not fit where the whole does.
    let value = encode(first, RUN, &[(0, i64::MAX), (1, 1), (2, -5)]).unwrap();
    assert_eq!(keep_range(first, &value, 0, 1), Err(Error::Overflow));
    assert_eq!(range_sum(first, &value, 0, 1), Ok(i128::from(i64::MAX) + 1));
    let value = encode(first, 4, &[(0, i64::MIN), (1, i64::MAX)]).unwrap();
    assert_eq!(validate(first, &value).map(|h| h.total), Ok(-1));
}

#[test]
fn an_edit_that_leaves_no_slot_removes_the_field() {
    let value = encode(240, RUN, &[(250, 4)]).unwrap();
    assert_eq!(
        add(240, &value, 250, -4),
        Ok(Edit {
            count: 0,
            value: None
        })
    );
    assert_eq!(keep_range(240, &value, 251, 1000), Ok(None));
    assert!(add(240, &value, 239, 1).is_err());
    assert!(set(240, &value, 480, 1).is_err());
    assert!(encode(240, RUN, &[(250, 1), (250, 2)]).is_err());
    assert!(encode(241, RUN, &[]).is_err());
    assert!(encode(0, 0, &[]).is_err());
    assert!(encode(0, MAX_RUN + 1, &[]).is_err());
}

#[test]
fn malformed_values_are_errors() {
    let bad: &[(&[u8], i64)] = &[
        (b"", 0),
        (b"x\x04\x00\x00", 0),
        (b"d\x00\x00\x00", 0),                                         // run 0
        (b"d\x81\x20\x00\x00", 0),                                     // run 4097
        (b"d\x04\x05\x00", 0),                                         // stored > run
        (b"d\x04\x01\x01\x01\x00\x00", 0),                             // three counts of four
        (b"d\x04\x01\x01\x01\x00\x00\x00\x00", 0),                     // a byte after them
        (b"d\x04\x01\x02\x01\x00\x00\x00", 0),                         // total disagrees
        (b"d\x04\x02\x01\x01\x00\x00\x00", 0),                         // stored disagrees
        (b"d\x04\x01\x01\x01\x00\x00\x00", 2), // first not a multiple of the run
        (b"d\x04\x00\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x00", 0), // 11-byte number
        (b"d\x04\x00\x80\x80\x80\x80\x80\x80\x80\x80\x02", 0), // beyond 64 bits
        (b"d\x01\x01\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01\x00", 0), // beyond i64
        (b"s\x04\x01\x01\x04\x01", 0),         // a slot beyond the run
        (b"s\x04\x01\x00\x00\x00", 0),         // a listed zero
        (b"s\x04\x01\x01\x00", 0),             // a gap without its count
        (b"c\x04\x00\x00\x00", 0),             // a constant zero
        (b"c\x04\x04\x04", 0),                 // a constant without its count
        (b"d\x01\x00\x80\x00\x00\x00", 0),     // a negative zero
        (b"d\x01\x01\x80\x00\x01\x80\x00", 0), // a negative without magnitude
        (
            b"d\x01\x01\x00\x80\x00\x81\x80\x80\x80\x80\x80\x80\x80\x80\x01",
            0,
        ), // < i64::MIN
        (b"d\x03\x01\x01\x01\x00\x00", i64::MAX - 1), // a run beyond the last index
    ];
    for &(bytes, first) in bad {
        assert!(validate(first, bytes).is_err(), "{bytes:?}");
        assert!(decode(first, bytes).is_err(), "{bytes:?}");
        assert!(add(first, bytes, first, 1).is_err(), "{bytes:?}");
        assert!(keep_range(first, bytes, first, first).is_err(), "{bytes:?}");
    }
    assert_eq!(
        validate(0, b"d\x04\x01\x01\x01\x00\x00\x00").map(|h| h.total),
        Ok(1)
    );
    assert_eq!(
        decode(0, b"d\x02\x01\x80\x00\x01\x80\x00\x01\x00"),
        Ok(vec![(0, -1)])
    );
    let min = b"d\x01\x01\x80\x00\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01\x80\x00\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01";
    assert_eq!(decode(0, min), Ok(vec![(0, i64::MIN)]));
}

/// A slot's count: mostly zero or a small count, sometimes near 16,383, negative or huge.
fn count() -> impl Strategy<Value = i64> {
    prop_oneof![
        4 => Just(0i64),
        4 => 1i64..5000,
        1 => 16_000i64..16_500,
        1 => -5000i64..0,
        1 => any::<i64>(),
        1 => prop_oneof![Just(i64::MAX), Just(i64::MIN)],
    ]
}

/// `(first, every slot's count)` of a run: random, constant or sparse.
fn run() -> impl Strategy<Value = (i64, Vec<i64>)> {
    (1i64..=300, -1_000_000i64..1_000_000).prop_flat_map(|(run, k)| {
        let n = run as usize;
        let counts = prop_oneof![
            vec(count(), n),
            count().prop_map(move |c| vec![c; n]),
            vec(prop_oneof![9 => Just(0i64), 1 => 1i64..5000], n),
        ];
        (Just(k * run), counts)
    })
}

/// An edit of one slot: `(offset, set?, number)`.
fn edits(run: usize) -> impl Strategy<Value = Vec<(usize, bool, i64)>> {
    vec((0..run, any::<bool>(), count()), 1..20)
}

/// Bytes a packed value might hold: arbitrary, or a valid value cut, grown or changed.
fn untrusted() -> impl Strategy<Value = (i64, Vec<u8>)> {
    prop_oneof![
        (
            prop_oneof![Just(0i64), any::<i64>()],
            vec(any::<u8>(), 0..40)
        ),
        (run(), any::<prop::sample::Index>(), any::<u8>(), 0u8..3).prop_filter_map(
            "a run that fits",
            |((first, counts), at, byte, how)| {
                let mut bytes = encode_counts(&counts).ok()?;
                let at = at.index(bytes.len());
                match how {
                    0 => bytes[at] = byte,
                    1 => bytes.truncate(at),
                    _ => bytes.insert(at, byte),
                }
                Some((first, bytes))
            }
        ),
    ]
}

/// Cases per property: 512, or 20,000 for the soak run (TALLY_LONG=1), as in the crate's
/// other property tests.
fn cases() -> u32 {
    match std::env::var("TALLY_LONG") {
        Ok(v) if !v.is_empty() && v != "0" => 20_000,
        _ => 512,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn runs_round_trip((first, counts) in run()) {
        let run = counts.len() as i64;
        let slots = pairs(first, &counts);
        match encode(first, run, &slots) {
            Err(e) => {
                prop_assert_eq!(e, Error::Overflow);
                prop_assert!(!fits(sum(&counts)));
            }
            Ok(value) => {
                prop_assert!(fits(sum(&counts)));
                let h = validate(first, &value).unwrap();
                prop_assert_eq!(i128::from(h.total), sum(&counts));
                prop_assert_eq!(total(&value), Ok(h.total));
                prop_assert_eq!(h.stored, slots.len() as i64);
                prop_assert_eq!(h.run, run);
                prop_assert!(!h.zigzag || counts.iter().any(|&c| c < 0));
                prop_assert_eq!(decode(first, &value), Ok(slots));
            }
        }
    }

    #[test]
    fn range_sums_match_a_brute_force_sum(
        (first, counts) in run(),
        lo in -20i64..320,
        len in -5i64..330,
    ) {
        let Ok(value) = encode_counts(&counts) else { return Ok(()) };
        let (lo, hi) = (first + lo, first + lo + len);
        let brute: i128 = pairs(first, &counts)
            .iter()
            .filter(|(i, _)| (lo..=hi).contains(i))
            .map(|&(_, c)| i128::from(c))
            .sum();
        prop_assert_eq!(range_sum(first, &value, lo, hi), Ok(brute));
        prop_assert_eq!(range_sum(first, &value, i64::MIN, i64::MAX), Ok(sum(&counts)));
    }

    #[test]
    fn edits_match_a_model((first, mut model) in run(), ops in edits(300)) {
        let Ok(mut value) = encode_counts(&model) else { return Ok(()) };
        for (offset, set_it, number) in ops {
            let offset = offset % model.len();
            let index = first + offset as i64;
            let old = model[offset];
            let new = if set_it { Some(number) } else { old.checked_add(number) };
            let total = new.map(|new| sum(&model) - i128::from(old) + i128::from(new));
            let got = if set_it {
                set(first, &value, index, number)
            } else {
                add(first, &value, index, number)
            };
            match new.zip(total.filter(|&t| fits(t))) {
                None => prop_assert_eq!(got, Err(Error::Overflow)),
                Some((new, _)) => {
                    model[offset] = new;
                    let edit = got.unwrap();
                    prop_assert_eq!(edit.count, new);
                    prop_assert_eq!(edit.value.is_none(), model.iter().all(|&c| c == 0));
                    value = match edit.value {
                        Some(value) => value,
                        None => encode(first, model.len() as i64, &[]).unwrap(),
                    };
                    prop_assert_eq!(decode(first, &value), Ok(pairs(first, &model)));
                }
            }
        }
    }

    #[test]
    fn keeping_a_range_matches_a_model(
        (first, counts) in run(),
        lo in -20i64..320,
        len in -5i64..330,
    ) {
        let Ok(value) = encode_counts(&counts) else { return Ok(()) };
        let (lo, hi) = (first + lo, first + lo + len);
        let kept: Vec<(i64, i64)> = pairs(first, &counts)
            .into_iter()
            .filter(|(i, _)| (lo..=hi).contains(i))
            .collect();
        let kept_sum: i128 = kept.iter().map(|&(_, c)| i128::from(c)).sum();
        match keep_range(first, &value, lo, hi) {
            Err(e) => {
                prop_assert_eq!(e, Error::Overflow);
                prop_assert!(!fits(kept_sum));
            }
            Ok(None) => prop_assert!(kept.is_empty()),
            Ok(Some(part)) => {
                prop_assert_eq!(decode(first, &part), Ok(kept));
                prop_assert_eq!(total(&part).map(i128::from), Ok(kept_sum));
            }
        }
    }

    #[test]
    fn untrusted_bytes_decode_to_an_error_never_a_panic(
        (first, bytes) in untrusted(),
        index in any::<i64>(),
        number in count(),
    ) {
        let _ = (header(&bytes), total(&bytes));
        let _ = range_sum(first, &bytes, index, index.saturating_add(100));
        let _ = (add(first, &bytes, index, number), set(first, &bytes, first, number));
        let _ = keep_range(first, &bytes, index, index.saturating_add(100));
        // What validates behaves like any other run.
        if let Ok(h) = validate(first, &bytes) {
            let slots = decode(first, &bytes).unwrap();
            let whole: i128 = slots.iter().map(|&(_, c)| i128::from(c)).sum();
            prop_assert_eq!(i128::from(h.total), whole);
            prop_assert_eq!(slots.len() as i64, h.stored);
            prop_assert_eq!(range_sum(first, &bytes, first, first + h.run - 1), Ok(whole));
            prop_assert!(slots.iter().all(|&(i, _)| (first..first + h.run).contains(&i)));
        }
    }

    #[test]
    fn field_names_round_trip_and_never_panic(
        res_ms in 1i64..1_000_000_000,
        first in any::<i64>(),
        bytes in vec(any::<u8>(), 0..24),
    ) {
        prop_assert_eq!(parse_packed_field(&packed_field(res_ms, first)), Some((res_ms, first)));
        prop_assert_eq!(parse_slot_field(&packed_field(res_ms, first)), None);
        prop_assert_eq!(parse_packed_field(slot_field(res_ms, first).as_bytes()), None);
        let _ = parse_packed_field(&bytes);
    }
}
