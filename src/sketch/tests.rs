//! Unit tests of the parent module.

use super::*;
use crate::testutil::Rng;

const QS: [f64; 9] = [0.0, 0.01, 0.1, 0.25, 0.5, 0.9, 0.99, 0.999, 1.0];

fn of(xs: &[f64]) -> Sketch {
    let mut s = Sketch::new();
    for &x in xs {
        s.add(x);
    }
    s
}

fn exact_quantile(sorted: &[f64], q: f64) -> f64 {
    let n = sorted.len() as u64;
    let rank = ((q * n as f64).ceil() as u64).clamp(1, n);
    sorted[(rank - 1) as usize]
}

fn datasets() -> Vec<(&'static str, Vec<f64>)> {
    let mut rng = Rng(2024);
    let n = 10_000;
    let mut mixed: Vec<f64> = (0..n).map(|_| rng.normal() * 100.0).collect();
    for i in (0..n).step_by(7) {
        mixed[i] = if i % 2 == 0 { 0.0 } else { -0.0 };
    }
    vec![
        ("lognormal", (0..n).map(|_| rng.lognormal()).collect()),
        (
            "uniform",
            (0..n).map(|_| 1.0 + 999.0 * rng.uniform()).collect(),
        ),
        ("constant", vec![42.5; n]),
        ("all-negative", (0..n).map(|_| -rng.lognormal()).collect()),
        ("mixed-sign+zeros", mixed),
        ("all-zero", vec![0.0; 100]),
        ("single", vec![-3.0]),
    ]
}

fn check_accuracy(name: &str, s: &Sketch, xs: &[f64]) {
    let mut sorted = xs.to_vec();
    sorted.sort_by(|a, b| a.total_cmp(b));
    assert_eq!(s.count(), xs.len() as u64, "{name}");
    for q in QS {
        let exact = exact_quantile(&sorted, q);
        let est = s.quantile(q);
        let Some(est) = est else {
            panic!("{name}: no quantile for q={q}");
        };
        if exact.abs() < ZERO_THRESHOLD {
            assert_eq!(est, 0.0, "{name} q={q}");
        } else {
            let err = (est - exact).abs() / exact.abs();
            assert!(
                err <= 0.01,
                "{name} q={q}: est {est} exact {exact} err {err}"
            );
            assert!(err <= ALPHA * (1.0 + 1e-9), "{name} q={q}: err {err}");
        }
    }
}

#[test]
fn quantiles_within_one_percent() {
    for (name, xs) in datasets() {
        check_accuracy(name, &of(&xs), &xs);
    }
}

#[test]
fn quantile_edge_cases() {
    let s = Sketch::new();
    assert_eq!(s.quantile(0.5), None);
    assert_eq!(s.count(), 0);
    let s = of(&[1.0, 2.0]);
    assert_eq!(s.quantile(-0.1), None);
    assert_eq!(s.quantile(1.1), None);
    assert_eq!(s.quantile(f64::NAN), None);
    // Rank 1 of 2 at q = 0.5 is the smaller value.
    let q50 = s.quantile(0.5).unwrap_or(f64::NAN);
    assert!((q50 - 1.0).abs() <= 0.01);
}

#[test]
fn every_bucket_edge_is_within_alpha() {
    // Dense sweep over several decades, including exact powers of gamma.
    let gamma = ln_gamma().exp();
    let mut vals: Vec<f64> = (-200..200).map(|i| gamma.powi(i)).collect();
    let mut v = 1e-9;
    while v < 1e12 {
        vals.push(v);
        v *= 1.0007;
    }
    for v in vals {
        let est = value_of(index_of(v));
        let err = (est - v).abs() / v;
        assert!(err <= ALPHA * (1.0 + 1e-9), "v={v} est={est} err={err}");
    }
}

#[test]
fn index_bounds_cover_all_magnitudes() {
    let lo = (ZERO_THRESHOLD.ln() / ln_gamma()).ceil();
    let hi = (f64::MAX.ln() / ln_gamma()).ceil();
    assert!(lo >= f64::from(MIN_INDEX), "{lo}");
    assert!(hi <= f64::from(MAX_INDEX), "{hi}");
    assert_eq!(lo, -1046.0);
    assert_eq!(hi, 35847.0);
    assert!(value_of(MAX_INDEX).is_finite());
}

#[test]
fn extreme_values_do_not_panic() {
    let extremes = [
        f64::MAX,
        -f64::MAX,
        5e-324,
        -5e-324,
        1e-300,
        -1e-300,
        f64::MIN_POSITIVE,
        ZERO_THRESHOLD,
        -ZERO_THRESHOLD,
        ZERO_THRESHOLD * 0.999,
        1e300,
        -1e300,
        0.0,
        -0.0,
    ];
    let s = of(&extremes);
    assert_eq!(s.count(), extremes.len() as u64);
    check_accuracy("extremes", &s, &extremes);
    for q in QS {
        assert!(s.quantile(q).is_some_and(f64::is_finite));
    }
    assert_eq!(Sketch::decode(&s.encode()), Some(s.clone()));
    // The threshold itself is a real value, just below it is zero.
    assert_eq!(of(&[ZERO_THRESHOLD]).bucket_count(), 1);
    assert_eq!(of(&[ZERO_THRESHOLD * 0.999]).bucket_count(), 0);

    // Non-finite input is ignored, not stored.
    let mut t = Sketch::new();
    t.add(f64::NAN);
    t.add(f64::INFINITY);
    t.add(f64::NEG_INFINITY);
    t.add_n(1.0, 0);
    assert_eq!(t, Sketch::new());

    // Counts saturate instead of overflowing.
    let mut big = Sketch::new();
    big.add_n(1.0, u64::MAX);
    big.add_n(1.0, u64::MAX);
    big.add_n(-1.0, u64::MAX);
    big.add_n(0.0, u64::MAX);
    let mut other = big.clone();
    other.merge(&big);
    assert_eq!(other.count(), u64::MAX);
    for q in QS {
        assert!(other.quantile(q).is_some());
    }
    assert_eq!(Sketch::decode(&other.encode()), Some(other));
}

#[test]
fn merge_is_associative_and_matches_single_sketch() {
    for (name, xs) in datasets() {
        let third = xs.len() / 3;
        let (pa, rest) = xs.split_at(third);
        let (pb, pc) = rest.split_at(rest.len() / 2);
        let (a, b, c) = (of(pa), of(pb), of(pc));

        let mut bc = b.clone();
        bc.merge(&c);
        let mut left = a.clone();
        left.merge(&bc);

        let mut right = a.clone();
        right.merge(&b);
        right.merge(&c);

        let mut rev = c.clone();
        rev.merge(&b);
        rev.merge(&a);

        let all = of(&xs);
        assert_eq!(left.encode(), right.encode(), "{name}");
        assert_eq!(left.encode(), rev.encode(), "{name}");
        assert_eq!(left, all, "{name}");
        check_accuracy(name, &left, &xs);
    }
}

#[test]
fn merge_all_equals_pairwise_merges() {
    let sets = datasets();
    let sketches: Vec<Sketch> = sets.iter().map(|(_, xs)| of(xs)).collect();
    let mut pairwise = Sketch::new();
    for s in &sketches {
        pairwise.merge(s);
    }
    assert_eq!(Sketch::merge_all(&sketches), pairwise);
    assert_eq!(Sketch::merge_all(&[]), Sketch::new());
    assert_eq!(Sketch::merge_all(&[Sketch::new(), of(&[0.0])]), of(&[0.0]));
    let extremes = of(&[f64::MAX, 1e-9, -f64::MAX, -1e-9]);
    assert_eq!(
        Sketch::merge_all([&extremes, &extremes]),
        of(&[
            f64::MAX,
            1e-9,
            -f64::MAX,
            -1e-9,
            f64::MAX,
            1e-9,
            -f64::MAX,
            -1e-9
        ])
    );
}

#[test]
fn encode_decode_round_trip() {
    let mut cases = vec![Sketch::new(), of(&[0.0]), of(&[-1.0]), of(&[1.0])];
    for (_, xs) in datasets() {
        cases.push(of(&xs));
    }
    for s in cases {
        let bytes = s.encode();
        assert_eq!(Sketch::decode(&bytes).as_ref(), Some(&s));
    }
    assert_eq!(Sketch::new().encode(), vec![VERSION, 0, 0, 0]);
}

#[test]
fn lognormal_encoded_size() {
    let mut rng = Rng(3);
    let xs: Vec<f64> = (0..10_000).map(|_| rng.lognormal()).collect();
    let s = of(&xs);
    let len = s.encode().len();
    println!(
        "lognormal(mu=3, sigma=1) x 10000: {} buckets, {} bytes encoded",
        s.bucket_count(),
        len
    );
    assert!(len < 1000, "encoded size {len}");
    // 24 periods must fit well inside 64 KB.
    assert!(24 * len < 64 * 1024 / 2);
}

#[test]
fn decode_rejects_malformed() {
    let good = of(&[1.0, 2.0, -3.0, 0.0]).encode();
    assert!(Sketch::decode(&good).is_some());
    let mut trailing = good.clone();
    trailing.push(0);
    let bad: Vec<Vec<u8>> = vec![
        vec![],
        vec![VERSION],
        vec![VERSION, 0, 0],
        vec![2, 0, 0, 0],                // unknown version
        trailing,                        // trailing byte
        vec![VERSION, 0x80, 0x00, 0, 0], // non-minimal varint
        vec![
            VERSION, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0, 0,
        ], // > u64
        vec![
            VERSION, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0, 0,
        ], // 11 bytes
        vec![VERSION, 0, 0, 1, 2, 0],    // empty bucket (count 0)
        vec![VERSION, 0, 0, 2, 2, 1, 0, 1], // repeated index (delta 0)
        vec![VERSION, 0, 0, 2, 4, 1, 1, 1], // decreasing index (delta -1)
        vec![VERSION, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f], // absurd bucket count
    ];
    for b in &bad {
        assert_eq!(Sketch::decode(b), None, "{b:?}");
    }
    // Index just outside the allowed range.
    for idx in [i64::from(MAX_INDEX) + 1, i64::from(MIN_INDEX) - 1, 1 << 40] {
        let mut b = vec![VERSION, 0, 0, 1];
        put_varint(&mut b, zigzag(idx));
        b.push(1);
        assert_eq!(Sketch::decode(&b), None, "{idx}");
    }
    // Maximum index is accepted.
    let mut b = vec![VERSION, 0, 0, 1];
    put_varint(&mut b, zigzag(i64::from(MAX_INDEX)));
    b.push(1);
    assert!(Sketch::decode(&b).is_some());
}

#[test]
fn decode_never_panics_on_garbage() {
    let mut rng = Rng(77);
    let samples: Vec<Vec<u8>> = datasets()
        .into_iter()
        .map(|(_, xs)| of(&xs).encode())
        .collect();
    let mut tried = 0;
    let mut check = |bytes: &[u8]| {
        tried += 1;
        if let Some(s) = Sketch::decode(bytes) {
            // Whatever is accepted is canonical and usable.
            assert_eq!(s.encode(), bytes);
            let _ = s.quantile(0.5);
        }
    };
    // Random byte strings, half with a valid version byte.
    for i in 0..5000 {
        let len = rng.below(48);
        let mut bytes: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
        if i % 2 == 0 && !bytes.is_empty() {
            bytes[0] = VERSION;
        }
        check(&bytes);
    }
    for sample in &samples {
        // Every truncation of a valid encoding.
        for cut in 0..sample.len() {
            check(&sample[..cut]);
        }
        // Random single-byte mutations and insertions.
        for _ in 0..500 {
            let mut m = sample.clone();
            let p = rng.below(m.len() as i64) as usize;
            m[p] = rng.next_u64() as u8;
            check(&m);
            m.insert(rng.below(m.len() as i64 + 1) as usize, rng.next_u64() as u8);
            check(&m);
        }
    }
    assert!(tried > 5000);
}

/// Splicing one value into the encoding gives the bytes of decode, add, encode.
#[test]
fn add_to_encoded_equals_decode_add_encode() {
    let mut rng = Rng(77);
    let mut out = Vec::new();
    for round in 0..2000 {
        let n = rng.below(40);
        let xs: Vec<f64> = (0..n)
            .map(|_| match rng.below(4) {
                0 => 0.0,
                1 => -rng.lognormal(),
                _ => rng.lognormal() * 10f64.powi(rng.below(5) as i32),
            })
            .collect();
        let s = of(&xs);
        let bytes = s.encode();
        let v = match rng.below(5) {
            0 => 0.0,
            1 => -rng.lognormal(),
            2 => xs.first().copied().unwrap_or(1.0),
            3 => 1e300,
            _ => rng.lognormal() * 1e3,
        };
        let mut expected = s.clone();
        expected.add(v);
        assert_eq!(
            add_to_encoded(&bytes, v, 1, &mut out),
            Some(s.count()),
            "round {round}"
        );
        assert_eq!(out, expected.encode(), "round {round}: {xs:?} + {v}");
    }
    assert_eq!(
        add_to_encoded(&Sketch::new().encode(), f64::NAN, 1, &mut out),
        None
    );
    assert_eq!(
        add_to_encoded(&Sketch::new().encode(), 1.0, 0, &mut out),
        None
    );
}

#[test]
fn add_to_encoded_rejects_garbage_without_panic() {
    let mut rng = Rng(78);
    let valid = of(&[1.0, -2.0, 0.0, 5.0, 1e9]).encode();
    let mut out = Vec::new();
    for cut in 0..valid.len() {
        assert_eq!(add_to_encoded(&valid[..cut], 3.0, 1, &mut out), None);
    }
    assert_eq!(
        add_to_encoded(&[&valid[..], &[0]].concat(), 3.0, 1, &mut out),
        None
    );
    for _ in 0..20_000 {
        let len = rng.below(24) as usize;
        let mut bytes: Vec<u8> = (0..len).map(|_| rng.below(256) as u8).collect();
        if let Some(b) = bytes.first_mut() {
            *b = VERSION;
        }
        let v = rng.normal() * 100.0;
        match add_to_encoded(&bytes, v, 1, &mut out) {
            // Whatever it accepts, decode accepts too, with the same result.
            Some(count) => {
                let mut s = Sketch::decode(&bytes).expect("accepted bytes decode");
                assert_eq!(s.count(), count);
                s.add(v);
                assert_eq!(out, s.encode());
            }
            None => assert!(Sketch::decode(&bytes).is_none()),
        }
    }
}

/// Summing encodings in a growing dense range equals merging the decoded sketches.
#[test]
fn dense_merge_equals_merge_all() {
    let mut rng = Rng(79);
    for _ in 0..50 {
        let sketches: Vec<Sketch> = (0..rng.below(30))
            .map(|_| {
                let scale = 10f64.powi(rng.below(8) as i32 - 3);
                of(&(0..rng.below(200))
                    .map(|_| {
                        if rng.below(3) == 0 {
                            -rng.lognormal() * scale
                        } else {
                            rng.lognormal() * scale
                        }
                    })
                    .collect::<Vec<_>>())
            })
            .collect();
        let mut dense = DenseMerge::default();
        for s in &sketches {
            assert!(dense.add_encoded_if_count(&s.encode(), s.count()));
            // Damaged or disagreeing input adds nothing.
            assert!(!dense.add_encoded_if_count(&s.encode(), s.count() + 1));
            assert!(!dense.add_encoded_if_count(&[VERSION, 0, 1], 0));
        }
        assert_eq!(dense.finish(), Sketch::merge_all(&sketches));
    }
}

/// Number of `sorted` values at or below `x`.
fn exact_at_or_below(sorted: &[f64], x: f64) -> u64 {
    sorted.partition_point(|&v| v <= x) as u64
}

/// Points to ask about for `xs`: every value, each nudged by 0.1%, 0.5%, 0.9% and 1.5%
/// either way (inside and across bucket edges), zero, and values beyond both ends.
fn probes(xs: &[f64], rng: &mut Rng) -> Vec<f64> {
    let mut out = vec![0.0, -0.0, 1e-12, -1e-12, 1e100, -1e100];
    for &x in xs.iter().take(400) {
        for f in [1.0, 0.999, 1.001, 0.995, 1.005, 0.991, 1.009, 0.985, 1.015] {
            out.push(x * f);
        }
    }
    for _ in 0..200 {
        out.push((rng.uniform() - 0.5) * 2000.0);
        out.push(rng.lognormal() * if rng.uniform() < 0.5 { -1.0 } else { 1.0 });
    }
    out
}

/// The count at or below `x` is between the true counts at `x * (1 - 0.01)` and
/// `x * (1 + 0.01)` (the other way round for a negative `x`), for every `|x| >= 1e-9`;
/// exact at 0 when no value is in the zero band but zero itself.
#[test]
fn counts_at_or_below_are_within_one_percent_of_the_value() {
    let mut rng = Rng(7);
    for (name, xs) in datasets() {
        let s = of(&xs);
        let mut sorted = xs.clone();
        sorted.sort_by(|a, b| a.total_cmp(b));
        let asked = probes(&xs, &mut rng);
        let got = s.counts_at_or_below(&asked);
        assert_eq!(got.len(), asked.len());
        for (&x, &c) in asked.iter().zip(&got) {
            if x.abs() < ZERO_THRESHOLD {
                continue;
            }
            let (a, b) = (x * 0.99, x * 1.01);
            let (lo, hi) = (
                exact_at_or_below(&sorted, a.min(b)),
                exact_at_or_below(&sorted, a.max(b)),
            );
            assert!(lo <= c && c <= hi, "{name}: x={x}: {c} not in {lo}..={hi}");
        }
    }
}

/// Counts follow the order of the values asked, rise with the value, and reach the
/// total; an empty sketch counts nothing.
#[test]
fn counts_at_or_below_are_in_order_and_monotone() {
    let mut rng = Rng(11);
    let xs: Vec<f64> = (0..5000).map(|_| rng.normal() * 50.0).collect();
    let s = of(&xs);
    let mut asked: Vec<f64> = (0..2000).map(|_| rng.normal() * 80.0).collect();
    asked.push(f64::MAX);
    asked.push(-f64::MAX);
    let got = s.counts_at_or_below(&asked);
    let mut pairs: Vec<(f64, u64)> = asked.iter().copied().zip(got.iter().copied()).collect();
    pairs.sort_by(|a, b| a.0.total_cmp(&b.0));
    assert!(pairs.windows(2).all(|w| w[0].1 <= w[1].1));
    assert_eq!(pairs.first().map(|p| p.1), Some(0));
    assert_eq!(pairs.last().map(|p| p.1), Some(5000));
    // Asking one value at a time gives the same counts.
    for (x, c) in asked.iter().zip(&got).take(50) {
        assert_eq!(s.counts_at_or_below(&[*x]), vec![*c]);
    }
    assert_eq!(Sketch::new().counts_at_or_below(&[1.0, -1.0]), vec![0, 0]);
    assert_eq!(s.counts_at_or_below(&[]), Vec::<u64>::new());
    // Zeros count at 0 and above, not below.
    let z = of(&[0.0, 0.0, -5.0, 5.0]);
    assert_eq!(
        z.counts_at_or_below(&[-1.0, 0.0, 1.0, -0.0]),
        vec![1, 3, 3, 3]
    );
}
