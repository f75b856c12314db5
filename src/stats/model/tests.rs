//! Unit tests of the parent module.

use super::*;
use crate::testutil::Rng;

const HOUR: i64 = 3_600_000;

/// The record of `xs` added one by one (the other modules' tests use it too).
pub(super) fn of(xs: &[f64]) -> Record {
    let mut r = Record::default();
    for &x in xs {
        r.add(x);
    }
    r
}

#[test]
fn marker_round_trip_and_rejects() {
    let s = Settings::new(HOUR, 24).unwrap();
    assert_eq!(s.marker(), "stats 1h 24");
    assert_eq!(Settings::from_marker(b"stats 1h 24"), Some(s));
    assert_eq!(
        Settings::from_marker(b"stats 200ms 2"),
        Some(Settings {
            period: 200,
            keep: 2
        })
    );
    for bad in [
        &b"stats"[..],
        b"stats 1h",
        b"stats 1h 0",
        b"stats 1h 10001",
        b"stats 0 2",
        b"stats 1h 24 x",
        b"statsx 1h 24",
        b"counter 1s:120",
        b"stats 1h  24",
        b"\xff",
    ] {
        assert_eq!(Settings::from_marker(bad), None, "{bad:?}");
    }
}

#[test]
fn settings_are_validated() {
    assert!(Settings::new(1, 1).is_ok());
    assert!(Settings::new(HOUR, MAX_KEEP).is_ok());
    assert_eq!(
        Settings::new(HOUR, 0).unwrap_err().to_string(),
        "ERR KEEP must be between 1 and 2000"
    );
    assert!(Settings::new(0, 1).is_err());
    assert!(Settings::new(i64::MAX / 2, 3).is_err());
    // The kept span `period * keep` is at most 10,000 years.
    let max = crate::args::MAX_DURATION_MS;
    assert!(Settings::new(max, 1).is_ok());
    assert!(Settings::new(max / 10, 10).is_ok());
    assert_eq!(
        Settings::new(max, 2),
        Err(Error::InvalidDuration("3652500d".into()))
    );
    assert_eq!(
        Settings::new(5000 * 86_400_000, MAX_KEEP),
        Err(Error::InvalidDuration("5000d".into()))
    );
    assert_eq!(Settings::from_marker(b"stats 3652500d 2"), None);
    assert_eq!(parse_keep(b"24"), Ok(24));
    assert_eq!(parse_keep(b"x"), Err(Error::NotInteger));
    assert!(matches!(parse_keep(b"0"), Err(Error::Invalid(_))));
    assert!(matches!(parse_keep(b"2001"), Err(Error::Invalid(_))));
}

/// A new object keeps at most `MAX_KEEP` periods; one stored by an earlier version with up
/// to `MAX_STORED_KEEP` still reads, and its windows merge at most `MAX_KEEP` periods.
#[test]
fn stored_objects_may_keep_more_than_new_ones() {
    assert_eq!(MAX_KEEP, 2000);
    assert!(Settings::new(1000, MAX_KEEP + 1).is_err());
    let old = Settings::from_marker(b"stats 1s 10000");
    assert_eq!(
        old,
        Some(Settings {
            period: 1000,
            keep: 10_000
        })
    );
    assert_eq!(Settings::from_marker(b"stats 1s 10001"), None);
    let Some(old) = old else { return };
    assert_eq!(old.window_periods(Some(2000 * 1000)), Ok(2000));
    assert_eq!(
        old.window_periods(Some(2001 * 1000))
            .unwrap_err()
            .to_string(),
        "ERR WINDOW must be a multiple of the period (1s) of at most 2000 periods"
    );
    let small = Settings::new(1000, 24).unwrap();
    assert_eq!(
        small.window_periods(Some(25_000)).unwrap_err().to_string(),
        "ERR WINDOW must be a multiple of the period (1s) of at most 24 periods"
    );
}

#[test]
fn field_names_round_trip() {
    assert_eq!(
        field(1_718_028_000_000, Part::Moments).as_bytes(),
        b"1718028000000:m"
    );
    assert_eq!(field(0, Part::Sketch).as_bytes(), b"0:q");
    assert_eq!(
        parse_field(b"1718028000000:m"),
        Some((1_718_028_000_000, Part::Moments))
    );
    assert_eq!(parse_field(b"-3600000:q"), Some((-HOUR, Part::Sketch)));
    for bad in [
        &b"_tally"[..],
        b":m",
        b"12:x",
        b"012:m",
        b"1h:m",
        b"12:mq",
        b"12",
    ] {
        assert_eq!(parse_field(bad), None, "{bad:?}");
    }
    let s = Settings::new(HOUR, 24).unwrap();
    assert_eq!(s.index_of_start(5 * HOUR), Some(5));
    assert_eq!(s.index_of_start(5 * HOUR + 1), None);
}

#[test]
fn period_arithmetic() {
    let s = Settings::new(HOUR, 3).unwrap();
    let now = 10 * HOUR + 5;
    assert_eq!(s.index(now), 10);
    assert_eq!(s.first_kept(now), 8);
    assert!(s.is_kept(8, now) && s.is_kept(10, now));
    assert!(!s.is_kept(7, now) && !s.is_kept(11, now));
    // Period 8 leaves exactly when period 11 starts.
    assert_eq!(s.leaves_at(8), 11 * HOUR);
    assert!(!s.is_kept(8, s.leaves_at(8)));
    assert!(s.is_kept(8, s.leaves_at(8) - 1));
    assert_eq!(s.write_index(8 * HOUR, now), Ok(8));
    assert_eq!(
        s.write_index(8 * HOUR - 1, now),
        Err(Error::OutsideKeptRange)
    );
    // Negative times floor towards minus infinity.
    assert_eq!(s.index(-1), -1);
    assert_eq!(s.start(-1), -HOUR);
}

#[test]
fn windows() {
    let s = Settings::new(HOUR, 24).unwrap();
    assert_eq!(s.window_periods(None), Ok(1));
    assert_eq!(s.window_periods(Some(HOUR)), Ok(1));
    assert_eq!(s.window_periods(Some(24 * HOUR)), Ok(24));
    let err = "ERR WINDOW must be a multiple of the period (1h) of at most 24 periods";
    for bad in [25 * HOUR, HOUR / 2, 90 * 60_000] {
        assert_eq!(s.window_periods(Some(bad)).unwrap_err().to_string(), err);
    }
    let now = 100 * HOUR + 7;
    assert_eq!(s.window_range(now, 1), (100, 100));
    assert_eq!(s.window_range(now, 24), (77, 100));
    assert_eq!(s.range_bounds(now, None, None), Some((77, 100)));
    assert_eq!(
        s.range_bounds(now, Some(90 * HOUR + 1), Some(95 * HOUR)),
        Some((90, 95))
    );
    assert_eq!(
        s.range_bounds(now, Some(0), Some(HOUR * 1000)),
        Some((77, 100))
    );
    assert_eq!(s.range_bounds(now, Some(99 * HOUR), Some(98 * HOUR)), None);
    assert_eq!(s.range_bounds(now, None, Some(10 * HOUR)), None);
}

#[test]
fn values_are_bounded() {
    assert_eq!(check_value(1e100), Ok(1e100));
    assert_eq!(check_value(-1e100), Ok(-1e100));
    assert!(check_value(1.0000001e100).is_err());
    assert!(check_value(-f64::MAX).is_err());
    assert_eq!(check_quantile(0.0), Ok(0.0));
    assert_eq!(check_quantile(1.0), Ok(1.0));
    assert!(check_quantile(1.01).is_err());
    assert!(check_quantile(-0.5).is_err());
}

#[test]
fn record_encode_decode_round_trip() {
    let mut rng = Rng(5);
    let cases = vec![
        vec![],
        vec![0.0],
        vec![-2.5],
        vec![1e100, -1e100, 0.0, 1e-300],
        (0..5000)
            .map(|_| (3.0 + rng.normal()).exp())
            .collect::<Vec<_>>(),
        (0..5000).map(|_| rng.normal() * 1e6).collect(),
    ];
    for xs in cases {
        let r = of(&xs);
        let (m, q) = r.encode();
        let back = Record::decode(m.as_slice(), &q).unwrap();
        assert_eq!(back, r);
        assert_eq!(back.encode(), (m, q));
    }
    // Extreme accepted values still leave a storable, decodable record.
    let mut r = Record::default();
    for _ in 0..1000 {
        r.add(MAX_ABS_VALUE);
        r.add(-MAX_ABS_VALUE);
    }
    let (m, q) = r.encode();
    assert!(Record::decode(m.as_slice(), &q).is_some(), "{m:?}");
}

#[test]
fn record_decode_rejects_mismatch_and_garbage() {
    let a = of(&[1.0, 2.0, 3.0]);
    let b = of(&[1.0, 2.0]);
    let (am, _) = a.encode();
    let (_, bq) = b.encode();
    assert_eq!(Record::decode(am.as_slice(), &bq), None);
    assert_eq!(Record::decode(b"garbage", &bq), None);
    assert_eq!(Record::decode(am.as_slice(), b"garbage"), None);
    assert_eq!(Record::decode(b"", b""), None);
}

#[test]
fn record_merge_is_associative() {
    let mut rng = Rng(11);
    let parts: Vec<Vec<f64>> = (0..6)
        .map(|i| (0..(300 + 50 * i)).map(|_| 1e9 + rng.uniform()).collect())
        .collect();
    let recs: Vec<Record> = parts.iter().map(|p| of(p)).collect();
    // ((a+b)+c) vs (a+(b+c)) for every consecutive triple.
    for w in recs.windows(3) {
        let mut left = w[0].clone();
        left.merge(&w[1]);
        left.merge(&w[2]);
        let mut bc = w[1].clone();
        bc.merge(&w[2]);
        let mut right = w[0].clone();
        right.merge(&bc);
        assert_eq!(left.sketch, right.sketch);
        assert_eq!(left.count(), right.count());
        let (l, r) = (left.summary().unwrap(), right.summary().unwrap());
        assert_eq!(
            (l.min, l.max, l.p50, l.p90, l.p99),
            (r.min, r.max, r.p50, r.p90, r.p99)
        );
        assert!((l.sum - r.sum).abs() <= 1e-15 * l.sum.abs());
        assert!((l.mean - r.mean).abs() <= 1e-15 * l.mean.abs());
        assert!((l.stddev - r.stddev).abs() <= 1e-9 * l.stddev);
    }
    // merge_all equals pairwise merges in the same order.
    let all_at_once = Record::merge_all(&recs);
    let mut pairwise = Record::default();
    for r in &recs {
        pairwise.merge(r);
    }
    assert_eq!(all_at_once, pairwise);
    assert_eq!(Record::merge_all(&[]), Record::default());
    // Merging everything equals adding everything to one record.
    let all: Vec<f64> = parts.concat();
    let single = of(&all);
    let mut merged = Record::default();
    for r in &recs {
        merged.merge(r);
    }
    assert_eq!(merged.sketch, single.sketch);
    let (m, s) = (merged.summary().unwrap(), single.summary().unwrap());
    assert_eq!(m.count, s.count);
    assert!(
        (m.stddev - s.stddev).abs() <= 1e-9 * s.stddev,
        "{} {}",
        m.stddev,
        s.stddev
    );
    // Merging an empty record changes nothing.
    let mut e = merged.clone();
    e.merge(&Record::default());
    assert_eq!(e, merged);
}

#[test]
fn quantiles_at_once_equal_one_at_a_time() {
    let mut rng = Rng(8);
    let datasets: Vec<Vec<f64>> = vec![
        vec![],
        vec![4.0],
        (0..3000).map(|_| rng.normal() * 50.0).collect(),
        (0..3000).map(|_| rng.lognormal()).collect(),
        (0..500)
            .map(|i| if i % 3 == 0 { 0.0 } else { -rng.lognormal() })
            .collect(),
    ];
    for xs in &datasets {
        let r = of(xs);
        // Random fractions in random order, with repeats, the ends, and invalid ones
        // (answered None, as one at a time).
        let mut qs: Vec<f64> = (0..400).map(|_| rng.uniform()).collect();
        qs.extend([1.0, 0.0, 0.5, 0.5, 1.0, -0.1, 1.5, f64::NAN, 0.0]);
        for _ in 0..qs.len() {
            let a = rng.below(qs.len() as i64) as usize;
            let b = rng.below(qs.len() as i64) as usize;
            qs.swap(a, b);
        }
        let one_by_one: Vec<Option<f64>> = qs.iter().map(|&q| r.quantile(q)).collect();
        let sketch_one_by_one: Vec<Option<f64>> =
            qs.iter().map(|&q| r.sketch.quantile(q)).collect();
        assert_eq!(r.quantiles(&qs), one_by_one, "{} values", xs.len());
        assert_eq!(r.sketch.quantiles(&qs), sketch_one_by_one);
        assert_eq!(r.quantiles(&[]), Vec::<Option<f64>>::new());
    }
}

#[test]
fn summary_of_small_records() {
    assert_eq!(Record::default().summary(), None);
    let s = of(&[5.0]).summary().unwrap();
    assert_eq!(
        (s.count, s.sum, s.min, s.max, s.mean, s.stddev),
        (1, 5.0, 5.0, 5.0, 5.0, 0.0)
    );
    // Quantiles are clamped to the exact extremes: a single value is reported exactly.
    assert_eq!((s.p50, s.p90, s.p99), (5.0, 5.0, 5.0));
    // Rank 1 and rank n are the exact min and max.
    let r = of(&[1.234, 5.678, 1000.001]);
    assert_eq!(r.quantile(0.0), Some(1.234));
    assert_eq!(r.quantile(0.3), Some(1.234));
    assert_eq!(r.quantile(0.9), Some(1000.001));
    assert_eq!(r.quantile(1.0), Some(1000.001));
    assert!((r.quantile(0.5).unwrap() - 5.678).abs() <= 0.01 * 5.678);
    assert_eq!(Record::default().quantile(0.5), None);
    let s = of(&[1.0, 3.0]).summary().unwrap();
    assert_eq!((s.mean, s.stddev), (2.0, 2f64.sqrt()));
}

#[test]
fn field_names_are_decimal_start_and_suffix() {
    for start in [0, 1, 1_718_028_000_000, -3_600_000, i64::MAX, i64::MIN] {
        assert_eq!(
            field(start, Part::Moments).as_bytes(),
            format!("{start}:m").as_bytes()
        );
        assert_eq!(
            field(start, Part::Sketch).as_bytes(),
            format!("{start}:q").as_bytes()
        );
        assert_eq!(
            parse_field(field(start, Part::Sketch).as_bytes()),
            Some((start, Part::Sketch))
        );
    }
}

/// The write path (values spliced into the stored fields) stores the same bytes as
/// decoding, adding and encoding; a stored version 1 (text) period migrates to binary.
#[test]
fn add_encoded_equals_decode_add_encode() {
    let mut rng = Rng(5);
    for round in 0..300 {
        let n = rng.below(60);
        let xs: Vec<f64> = (0..n)
            .map(|_| rng.normal() * 10f64.powi(rng.below(6) as i32))
            .collect();
        let r = of(&xs);
        let (m, q) = r.encode();
        let k = rng.below(12) as usize;
        let values: Vec<f64> = (0..k)
            .map(|_| {
                if rng.below(5) == 0 {
                    0.0
                } else {
                    rng.normal() * 100.0
                }
            })
            .collect();
        let mut expected = r.clone();
        for &v in &values {
            expected.add(v);
        }
        let mut out = Vec::new();
        let got = Record::add_encoded(m.as_slice(), &q, &values, &mut out);
        assert_eq!(got.as_ref(), Some(&expected.moments), "round {round}");
        assert_eq!(out, expected.sketch.encode(), "round {round}");
        // From the old text form of the moments: same result.
        let text = r.moments.encode_text();
        let mut out = Vec::new();
        let got = Record::add_encoded(text.as_bytes(), &q, &values, &mut out);
        assert_eq!(got.map(|m| m.encode()), Some(expected.moments.encode()));
        assert_eq!(out, expected.sketch.encode());
    }
    // Fields that disagree on the count, or garbage, are refused.
    let (am, _) = of(&[1.0, 2.0, 3.0]).encode();
    let (_, bq) = of(&[1.0, 2.0]).encode();
    let mut out = Vec::new();
    assert_eq!(
        Record::add_encoded(am.as_slice(), &bq, &[4.0], &mut out),
        None
    );
    assert_eq!(
        Record::add_encoded(am.as_slice(), b"garbage", &[4.0], &mut out),
        None
    );
    assert_eq!(Record::add_encoded(b"garbage", &bq, &[4.0], &mut out), None);
    assert_eq!(Record::add_encoded(am.as_slice(), &bq, &[], &mut out), None);
}

/// A window merged from the encodings equals the merge of the decoded records, and
/// skips periods whose fields are damaged or disagree.
#[test]
fn merge_encoded_equals_merge_all() {
    let mut rng = Rng(11);
    let records: Vec<Record> = (0..24)
        .map(|p| {
            let n = rng.below(300);
            of(&(0..n)
                .map(|_| {
                    if p % 5 == 0 {
                        -rng.lognormal()
                    } else {
                        rng.lognormal() * 10.0
                    }
                })
                .collect::<Vec<_>>())
        })
        .collect();
    let encoded: Vec<_> = records.iter().map(Record::encode).collect();
    let merged = Record::merge_encoded(encoded.iter().map(|(m, q)| (m.as_slice(), q.as_slice())));
    let expected = Record::merge_all(&records);
    assert_eq!(merged, expected);
    assert_eq!(merged.moments.encode(), expected.moments.encode());
    let (_, bad_q) = of(&[1.0]).encode();
    let with_damage = encoded
        .iter()
        .map(|(m, q)| (m.as_slice(), q.as_slice()))
        .chain([
            (encoded[0].0.as_slice(), &bad_q[..]),
            (&b"junk"[..], &bad_q[..]),
            (encoded[1].0.as_slice(), &b"\x01"[..]),
        ]);
    assert_eq!(Record::merge_encoded(with_damage), expected);
}

/// A window built on the merge of its closed periods plus its newest period equals the
/// merge of all of them, to the bit, whichever period is damaged.
#[test]
fn merge_encoded_period_extends_a_merge() {
    let mut rng = Rng(12);
    let mut encoded: Vec<(Vec<u8>, Vec<u8>)> = (0..6)
        .map(|p| {
            let n = rng.below(200) + 1;
            of(&(0..n)
                .map(|_| {
                    if p % 3 == 0 {
                        -rng.lognormal()
                    } else {
                        rng.lognormal() * 7.0
                    }
                })
                .collect::<Vec<_>>())
            .encode()
        })
        .collect();
    let (_, bad_q) = of(&[1.0]).encode();
    encoded.push((encoded[1].0.clone(), bad_q));
    encoded.push((b"junk".to_vec(), encoded[2].1.clone()));
    encoded.push((encoded[3].0.clone(), b"\x01".to_vec()));
    encoded.push(of(&[3.5, -2.0, 0.0]).encode());
    for newest in 0..encoded.len() {
        let window: Vec<(&[u8], &[u8])> = encoded
            .iter()
            .take(newest + 1)
            .map(|(m, q)| (m.as_slice(), q.as_slice()))
            .collect();
        let expected = Record::merge_encoded(window.iter().copied());
        let mut extended = Record::merge_encoded(window.iter().take(newest).copied());
        if let Some(&(m, q)) = window.last() {
            extended.merge_encoded_period(m, q);
        }
        assert_eq!(extended, expected, "newest {newest}");
        assert_eq!(extended.moments.encode(), expected.moments.encode());
    }
}

/// CDF of a window merged from periods: exactly 0 below the min and 1 at or above the
/// max, otherwise within 1% of the value (a brute-force reference over every value);
/// empty records have none; the count of values asked is checked.
#[test]
fn cdf_is_exact_at_the_ends_and_within_one_percent_between() {
    let mut rng = Rng(31);
    let periods: Vec<Vec<f64>> = (0..6)
        .map(|p| {
            (0..300 + p * 50)
                .map(|_| match p % 3 {
                    0 => rng.lognormal() * 10.0,
                    1 => -rng.lognormal(),
                    _ => rng.normal() * 30.0,
                })
                .collect()
        })
        .collect();
    let records: Vec<Record> = periods.iter().map(|xs| of(xs)).collect();
    let merged = Record::merge_all(&records);
    let mut all: Vec<f64> = periods.concat();
    all.sort_by(f64::total_cmp);
    let (min, max) = (all[0], all[all.len() - 1]);
    let n = all.len() as f64;
    let share = |x: f64| all.partition_point(|&v| v <= x) as f64 / n;
    let mut asked = vec![
        min,
        max,
        min - 1e-9,
        max * 2.0,
        0.0,
        min.next_down(),
        max.next_down(),
    ];
    for &v in all.iter().step_by(7) {
        asked.extend([v, v * 1.004, v * 0.996]);
    }
    let Some(got) = merged.cdf(&asked) else {
        panic!("no cdf")
    };
    assert_eq!(got.len(), asked.len());
    for (&x, &c) in asked.iter().zip(&got) {
        assert!((0.0..=1.0).contains(&c), "x={x}: {c}");
        if x < min {
            assert_eq!(c, 0.0, "x={x}");
        } else if x >= max {
            assert_eq!(c, 1.0, "x={x}");
        } else if x.abs() >= 1e-9 {
            let (a, b) = (
                share((x * 0.99).min(x * 1.01)),
                share((x * 0.99).max(x * 1.01)),
            );
            assert!(a <= c && c <= b, "x={x}: {c} not in {a}..={b}");
        }
    }
    assert_eq!(got[1], 1.0);
    assert_eq!(Record::default().cdf(&[1.0]), None);
    assert_eq!(check_cdf_count(1), Ok(()));
    assert_eq!(check_cdf_count(MAX_CDF_VALUES), Ok(()));
    assert_eq!(check_cdf_count(0), Err(Error::NotFloat));
    assert_eq!(
        check_cdf_count(MAX_CDF_VALUES + 1).unwrap_err().to_string(),
        "ERR too many values, at most 1000"
    );
}

/// Fields scanned in any order, with periods lacking a field and a damaged one, merge
/// to the same record as the periods merged oldest first.
#[test]
fn scanned_periods_merge_as_the_periods_in_order() {
    let periods: Vec<Record> = (0..12)
        .map(|p| of(&[p as f64 * 1.5 + 1e9, 3.0 - p as f64, 0.25 * p as f64]))
        .collect();
    let encoded: Vec<(Vec<u8>, Vec<u8>)> = periods.iter().map(Record::encode).collect();
    // Period 3 has no sketch, period 7 a damaged one; both are skipped either way.
    let kept = |i: usize| i != 3 && i != 7;
    let want = Record::merge_encoded(
        encoded
            .iter()
            .enumerate()
            .filter(|(i, _)| kept(*i))
            .map(|(_, (m, q))| (m.as_slice(), q.as_slice())),
    );
    let mut scanned = ScannedPeriods::default();
    for i in [5usize, 0, 11, 3, 7, 2, 9, 1, 10, 4, 6, 8] {
        let (m, q) = &encoded[i];
        let index = 100 + i as i64;
        scanned.push(index, Part::Moments, m);
        match i {
            3 => {}
            7 => scanned.push(index, Part::Sketch, b"junk"),
            _ => scanned.push(index, Part::Sketch, q),
        }
    }
    assert_eq!(scanned.merge(), want);
    // Two fields of one part in one period: the one scanned last counts.
    let mut scanned = ScannedPeriods::default();
    scanned.push(1, Part::Sketch, b"junk");
    scanned.push(1, Part::Moments, &encoded[0].0);
    scanned.push(1, Part::Sketch, &encoded[0].1);
    assert_eq!(scanned.merge(), periods[0]);
    assert_eq!(ScannedPeriods::default().merge(), Record::default());
}
