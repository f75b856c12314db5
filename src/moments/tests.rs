//! Unit tests of the parent module.

use super::*;
use crate::testutil::Rng;

/// Reference: compensated mean, then corrected two-pass variance.
fn two_pass(xs: &[f64]) -> (f64, f64, f64) {
    let mut r = Moments::new();
    for &x in xs {
        r.add_to_sum(x);
    }
    let sum = r.sum();
    let n = xs.len() as f64;
    let mean = sum / n;
    let (mut s2, mut s1) = (0.0, 0.0);
    for &x in xs {
        let d = x - mean;
        s2 += d * d;
        s1 += d;
    }
    let var = if xs.len() > 1 {
        (s2 - s1 * s1 / n) / (n - 1.0)
    } else {
        0.0
    };
    (sum, mean, var)
}

fn of(xs: &[f64]) -> Moments {
    let mut m = Moments::new();
    for &x in xs {
        m.add(x);
    }
    m
}

fn rel(a: f64, b: f64) -> f64 {
    if a == b {
        0.0
    } else {
        (a - b).abs() / a.abs().max(b.abs())
    }
}

fn datasets() -> Vec<(&'static str, Vec<f64>)> {
    let mut rng = Rng(42);
    let n = 10_000;
    vec![
        (
            "lognormal",
            (0..n).map(|_| (3.0 + rng.normal()).exp()).collect(),
        ),
        ("uniform", (0..n).map(|_| rng.uniform() * 100.0).collect()),
        ("constant", vec![7.25; n]),
        (
            "negative",
            (0..n).map(|_| -1.0 - rng.uniform() * 50.0).collect(),
        ),
        ("mixed", (0..n).map(|_| rng.normal() * 1000.0).collect()),
        ("1e9+spread", (0..n).map(|_| 1e9 + rng.uniform()).collect()),
    ]
}

fn check_against_reference(name: &str, m: &Moments, xs: &[f64], tol: f64) {
    let (sum, mean, var) = two_pass(xs);
    assert_eq!(m.count, xs.len() as u64, "{name}");
    let min = xs.iter().copied().fold(f64::INFINITY, f64::min);
    let max = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    assert_eq!(m.min, min, "{name}");
    assert_eq!(m.max, max, "{name}");
    assert!(
        rel(m.sum(), sum) <= 1e-12,
        "{name}: sum {} vs {sum}",
        m.sum()
    );
    assert!(
        rel(m.mean, mean) <= 1e-12,
        "{name}: mean {} vs {mean}",
        m.mean
    );
    let (sd, sd_ref) = (m.stddev(), var.sqrt());
    assert!(rel(sd, sd_ref) <= tol, "{name}: stddev {sd} vs {sd_ref}");
}

#[test]
fn exact_vs_two_pass() {
    for (name, xs) in datasets() {
        check_against_reference(name, &of(&xs), &xs, 1e-12);
    }
}

#[test]
fn constant_has_zero_variance() {
    let m = of(&[7.25; 1000]);
    assert_eq!(m.variance(), 0.0);
    assert_eq!(m.mean, 7.25);
    assert_eq!(m.sum(), 7250.0);
}

#[test]
fn small_counts() {
    let m = Moments::new();
    assert_eq!(
        (m.count, m.sum(), m.variance(), m.stddev()),
        (0, 0.0, 0.0, 0.0)
    );
    let m = of(&[-3.5]);
    assert_eq!(
        (m.min, m.max, m.mean, m.variance()),
        (-3.5, -3.5, -3.5, 0.0)
    );
    let m = of(&[1.0, 3.0]);
    assert_eq!((m.mean, m.variance(), m.sum()), (2.0, 2.0, 4.0));
}

#[test]
fn near_1e9_chunked_merge_any_order() {
    let mut rng = Rng(7);
    let xs: Vec<f64> = (0..10_000).map(|_| 1e9 + rng.uniform()).collect();
    let (_, _, var) = two_pass(&xs);
    let sd_ref = var.sqrt();
    let chunks: Vec<Moments> = xs.chunks(xs.len().div_ceil(24)).map(of).collect();
    assert_eq!(chunks.len(), 24);
    for round in 0..20 {
        // Random permutation (Fisher-Yates) of the merge order.
        let mut order: Vec<usize> = (0..chunks.len()).collect();
        for i in (1..order.len()).rev() {
            order.swap(i, rng.below(i as i64 + 1) as usize);
        }
        let mut m = Moments::new();
        for &i in &order {
            m.merge(&chunks[i]);
        }
        // The requirement is 1e-6; the reference check below is much
        // tighter (measured error is ~5e-14).
        assert!(rel(m.stddev(), sd_ref) <= 1e-6, "round {round}");
        check_against_reference("chunked", &m, &xs, 1e-12);
    }
    // Pairwise tree merge, as a multi-level window would do.
    let mut level = chunks.clone();
    while level.len() > 1 {
        level = level
            .chunks(2)
            .map(|pair| {
                let mut m = pair[0].clone();
                for p in &pair[1..] {
                    m.merge(p);
                }
                m
            })
            .collect();
    }
    check_against_reference("tree", &level[0], &xs, 1e-12);
}

#[test]
fn chunked_merge_matches_on_all_datasets() {
    for (name, xs) in datasets() {
        let mut m = Moments::new();
        for c in xs.chunks(417) {
            m.merge(&of(c));
        }
        check_against_reference(name, &m, &xs, 1e-12);
    }
}

fn assert_close(a: &Moments, b: &Moments) {
    assert_eq!(a.count, b.count);
    assert_eq!(a.min, b.min);
    assert_eq!(a.max, b.max);
    assert!(rel(a.mean, b.mean) <= 1e-14, "{} vs {}", a.mean, b.mean);
    assert!(rel(a.m2, b.m2) <= 1e-13, "{} vs {}", a.m2, b.m2);
    assert!(rel(a.sum(), b.sum()) <= 1e-14, "{} vs {}", a.sum(), b.sum());
}

#[test]
fn merge_associative_and_commutative() {
    for (_, xs) in datasets() {
        let third = xs.len() / 3;
        let a = of(&xs[..third]);
        let b = of(&xs[third..third + 1234]);
        let c = of(&xs[third + 1234..]);

        let mut bc = b.clone();
        bc.merge(&c);
        let mut left = a.clone();
        left.merge(&bc); // a + (b + c)

        let mut right = a.clone();
        right.merge(&b);
        right.merge(&c); // (a + b) + c
        assert_close(&left, &right);

        let mut ba = b.clone();
        ba.merge(&a);
        let mut ab = a.clone();
        ab.merge(&b);
        assert_close(&ab, &ba);
    }
}

#[test]
fn merge_with_empty_is_identity() {
    let a = of(&[1.0, 2.0, 4.0]);
    let mut x = a.clone();
    x.merge(&Moments::new());
    assert_eq!(x, a);
    let mut e = Moments::new();
    e.merge(&a);
    assert_eq!(e, a);
    let mut e = Moments::new();
    e.merge(&Moments::new());
    assert_eq!(e, Moments::new());
}

#[test]
fn encode_decode_round_trip_exact() {
    let mut rng = Rng(99);
    let mut cases = vec![
        Moments::new(),
        of(&[-0.0]),
        of(&[5e-324]),
        of(&[1e150, -1e150]),
        of(&[0.1, 0.2, 0.3]),
        of(&[f64::MIN_POSITIVE, 1e-300]),
    ];
    for (_, xs) in datasets() {
        cases.push(of(&xs));
    }
    for _ in 0..200 {
        let n = rng.below(50);
        let xs: Vec<f64> = (0..n).map(|_| rng.normal() * 1e6).collect();
        cases.push(of(&xs));
    }
    for m in cases {
        let binary = m.encode();
        let back = Moments::decode(&binary);
        assert_eq!(back.as_ref(), Some(&m), "{binary:?}");
        if let Some(b) = back {
            assert_eq!(b.encode(), binary, "binary round trip is bit-exact");
        }
        // The version 1 text form still decodes to the same bits.
        let text = m.encode_text();
        let back = Moments::decode(text.as_bytes());
        assert_eq!(back.as_ref(), Some(&m), "{text}");
        // Bit-exact too (PartialEq treats -0.0 == 0.0).
        if let Some(b) = back {
            assert_eq!(b.sum.to_bits(), m.sum.to_bits(), "{text}");
            assert_eq!(b.mean.to_bits(), m.mean.to_bits(), "{text}");
            assert_eq!(b.m2.to_bits(), m.m2.to_bits(), "{text}");
        }
    }
    assert_eq!(Moments::new().encode_text(), "0 0 0 0 0 0 0");
    assert_eq!(of(&[1.0, 3.0]).encode_text(), "2 4 0 2 2 1 3");
    assert!(of(&[1e300]).encode_text().len() < 40);
    let two = of(&[1.0, 3.0]).encode();
    assert_eq!(two.len(), ENCODED_LEN);
    assert_eq!(two[0], BINARY_TAG);
    assert_eq!(two[1..9], 2u64.to_le_bytes());
}

/// A version 1 period (text, as stored before the binary form) decodes to the
/// moments that wrote it, and re-encodes in binary.
#[test]
fn old_text_form_still_reads() {
    let m = Moments::decode(b"2 4 0 2 2 1 3");
    assert_eq!(m, Some(of(&[1.0, 3.0])));
    let migrated = m.map(|m| m.encode());
    assert_eq!(migrated.map(|b| b[0]), Some(BINARY_TAG));
    assert_eq!(
        migrated.and_then(|b| Moments::decode(&b)),
        Some(of(&[1.0, 3.0]))
    );
}

#[test]
fn binary_garbage_is_none() {
    let valid = of(&[1.0, 3.0]).encode();
    let set = |at: usize, word: u64| {
        let mut b = valid;
        b[at..at + 8].copy_from_slice(&word.to_le_bytes());
        b
    };
    let bad: Vec<Vec<u8>> = vec![
        vec![BINARY_TAG],
        valid[..ENCODED_LEN - 1].to_vec(),
        [&valid[..], &[0]].concat(),
        set(1 + 8, f64::NAN.to_bits()).to_vec(), // sum NaN
        set(1 + 8 * 5, f64::INFINITY.to_bits()).to_vec(), // min inf
        set(1 + 8 * 4, (-1.0f64).to_bits()).to_vec(), // negative m2
        set(1 + 8 * 6, 0.5f64.to_bits()).to_vec(), // max < min
        set(1 + 8 * 3, 9.0f64.to_bits()).to_vec(), // mean outside [min, max]
        set(1, 0).to_vec(),                      // count 0 with values
    ];
    for b in bad {
        assert_eq!(Moments::decode(&b), None, "{b:?}");
    }
    assert_eq!(
        Moments::decode(&Moments::new().encode()),
        Some(Moments::new())
    );
}

#[test]
fn decode_garbage_is_none() {
    let bad: &[&[u8]] = &[
        b"",
        b" ",
        b"0",
        b"0 0 0 0 0 0",
        b"0 0 0 0 0 0 0 0",
        b"0 0 0 0 0 0 0 ",
        b" 0 0 0 0 0 0 0",
        b"0  0 0 0 0 0 0",
        b"0 1 0 0 0 0 0", // count 0 with a sum
        b"0 0 0 0 0 0 5", // count 0 with a max
        b"-1 0 0 0 0 0 0",
        b"x 0 0 0 0 0 0",
        b"18446744073709551616 0 0 0 0 0 0", // u64 overflow
        b"2 4 0 2 2 NaN 3",
        b"2 4 0 2 2 1 inf",
        b"2 inf 0 2 2 1 3",
        b"2 4 0 2 -1 1 3", // negative m2
        b"2 4 0 2 2 3 1",  // min > max
        b"2 4 0 9 2 1 3",  // mean outside [min, max]
        b"1 4 0 4 1 4 4",  // single value with m2 != 0
        b"1 4 0 4 0 4 5",  // single value with min != max
        b"2 4 0 2 2 1 3\n",
        b"2\t4 0 2 2 1 3",
        b"2 4 0 2 2 1 0x3",
        &[0xff, 0xfe, 0x20],
    ];
    for b in bad {
        assert_eq!(Moments::decode(b), None, "{:?}", String::from_utf8_lossy(b));
    }
    assert_eq!(Moments::decode(b"0 0 0 0 0 0 0"), Some(Moments::new()));
}

#[test]
fn decode_random_bytes_never_panics() {
    let mut rng = Rng(1);
    let alphabet = b"0123456789 .-+eEinfNa\x00\xff";
    let valid = of(&[1.5, -2.0, 1e9]).encode_text().into_bytes();
    let binary = of(&[1.5, -2.0, 1e9]).encode();
    for _ in 0..5000 {
        let mut mutated = binary;
        let pos = rng.below(ENCODED_LEN as i64) as usize;
        mutated[pos] = rng.below(256) as u8;
        if let Some(m) = Moments::decode(&mutated) {
            assert!(m.sum.is_finite() && m.m2 >= 0.0 && m.min <= m.max);
        }
        let _ = Moments::decode(&binary[..rng.below(ENCODED_LEN as i64) as usize]);
        let len = rng.below(40);
        let bytes: Vec<u8> = (0..len)
            .map(|_| alphabet[rng.below(alphabet.len() as i64) as usize])
            .collect();
        if let Some(m) = Moments::decode(&bytes) {
            assert!(m.sum.is_finite() && m.m2 >= 0.0 && m.min <= m.max);
        }
        let mut mutated = valid.clone();
        let pos = rng.below(mutated.len() as i64) as usize;
        mutated[pos] = alphabet[rng.below(alphabet.len() as i64) as usize];
        let _ = Moments::decode(&mutated);
        let _ = Moments::decode(&valid[..rng.below(valid.len() as i64) as usize]);
    }
}
