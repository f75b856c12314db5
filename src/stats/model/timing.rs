//! Timing of the pure STATS paths, printed (not a check: run by hand).

use super::*;
use std::time::Instant;

/// Cost of the pure part of one STATS.ADD (decode, add, encode), printed; run with
/// `cargo test --release -p tally --lib stats::model::timing -- --ignored --nocapture`.
#[test]
#[ignore]
fn add_cycle_cost() {
    let mut seed = 1u64;
    let mut next = || {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((seed >> 11) as f64 / (1u64 << 53) as f64 * 6.0).exp()
    };
    for n in [1usize, 10_000] {
        let mut r = Record::default();
        for _ in 0..n {
            r.add(next());
        }
        let (mut m, mut q) = r.encode();
        let rounds = 200_000;
        let t = Instant::now();
        for _ in 0..rounds {
            let Some(mut rec) = Record::decode(m.as_slice(), &q) else {
                panic!()
            };
            rec.add(12.5);
            (m, q) = rec.encode();
        }
        let per = t.elapsed().as_nanos() as f64 / rounds as f64;
        let t = Instant::now();
        for _ in 0..rounds {
            let _ = Moments::decode(m.as_slice());
        }
        let md = t.elapsed().as_nanos() as f64 / rounds as f64;
        let t = Instant::now();
        for _ in 0..rounds {
            let _ = Sketch::decode(&q);
        }
        let sd = t.elapsed().as_nanos() as f64 / rounds as f64;
        let rec = Record::decode(m.as_slice(), &q).unwrap();
        let t = Instant::now();
        for _ in 0..rounds {
            let _ = rec.moments.encode();
        }
        let me = t.elapsed().as_nanos() as f64 / rounds as f64;
        let t = Instant::now();
        for _ in 0..rounds {
            let _ = rec.sketch.encode();
        }
        let se = t.elapsed().as_nanos() as f64 / rounds as f64;
        println!("{n} values: cycle {per:.0} ns; moments decode {md:.0} encode {me:.0}; sketch decode {sd:.0} encode {se:.0} ({} bytes)", q.len());
    }
    // A 24-period window of 10k values each: decode every period, merge, summarize.
    let stored: Vec<(Vec<u8>, Vec<u8>)> = (0..24)
        .map(|_| {
            let mut r = Record::default();
            for _ in 0..10_000 {
                r.add(next());
            }
            r.encode()
        })
        .collect();
    let rounds = 2000;
    let t = Instant::now();
    let mut decode_ns = 0u128;
    for _ in 0..rounds {
        let d = Instant::now();
        let recs: Vec<Record> = stored
            .iter()
            .map(|(m, q)| Record::decode(m.as_slice(), q).unwrap())
            .collect();
        decode_ns += d.elapsed().as_nanos();
        let merged = Record::merge_all(&recs);
        let _ = merged.summary();
    }
    let per = t.elapsed().as_nanos() as f64 / rounds as f64;
    println!(
        "24 x 10k window: {per:.0} ns (decoding {:.0} ns)",
        decode_ns as f64 / rounds as f64
    );
}
