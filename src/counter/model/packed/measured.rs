//! The measurements behind the packed layout (the reasons at the top of `packed.rs`): bytes
//! a sample over a year of minutes for several streams of counts, run lengths and count
//! encodings, each field costing its value's jemalloc size class plus [`FIELD_OVERHEAD`].
//! Sizes are exact, so the targets are checked by a plain test; the tables and the timing
//! of the codec are left to
//!
//! ```text
//! cargo test --release -p tally --lib packed::measured -- --ignored --nocapture
//! ```

use super::*;
use crate::testutil::Rng;
use std::time::Instant;

/// A year of minutes, a whole number of runs of every length measured.
const SLOTS: usize = 7680 * 69;

/// What a hashtable-encoded hash spends on a field besides its value's allocation: the
/// field name's sds and the entry (53-61 B a field measured with integer values, whose
/// value costs a few bytes of it).
const FIELD_OVERHEAD: usize = 50;

/// jemalloc's size classes up to 64 KiB: 8, 16, 32, 48, ... four to each doubling.
fn size_class(bytes: usize) -> usize {
    let mut classes = vec![8usize, 16, 32, 48, 64, 80, 96, 112, 128];
    let mut step = 32;
    while *classes.last().unwrap_or(&0) < 65_536 {
        for _ in 0..4 {
            let next = classes.last().unwrap_or(&0) + step;
            classes.push(next);
        }
        step *= 2;
    }
    classes.into_iter().find(|&c| c >= bytes).unwrap_or(bytes)
}

/// The allocation of a hash value of `len` bytes: an sds, its header and terminator.
fn value_allocation(len: usize) -> usize {
    let header = match len {
        0..=31 => 1,
        32..=255 => 3,
        256..=65_535 => 5,
        _ => 9,
    };
    size_class(len + header + 1)
}

fn leb(u: u64) -> usize {
    varint_len(u)
}

/// The streams of counts a minute at a time.
fn streams() -> Vec<(&'static str, Vec<i64>)> {
    let mut rng = Rng(7);
    let mut stream = |f: &mut dyn FnMut(&mut Rng) -> i64| -> Vec<i64> {
        (0..SLOTS).map(|_| f(&mut rng)).collect()
    };
    vec![
        ("(a) random 1..5000", stream(&mut |r| 1 + r.below(5000))),
        ("(b) constant 1000", stream(&mut |_| 1000)),
        (
            "(c) 1 slot in 10, 1..5000",
            stream(&mut |r| {
                if r.below(10) == 0 {
                    1 + r.below(5000)
                } else {
                    0
                }
            }),
        ),
        ("(d) 16000..16383", stream(&mut |r| 16_000 + r.below(384))),
        (
            "(d') same, 2% -1..-100",
            stream(&mut |r| match r.below(50) {
                0 => -1 - r.below(100),
                _ => 16_000 + r.below(384),
            }),
        ),
        (
            "(d'') same, 2% 1e12, 2% <0",
            stream(&mut |r| match r.below(50) {
                0 => 1_000_000_000_000,
                1 => -1 - r.below(5000),
                _ => 16_000 + r.below(384),
            }),
        ),
        (
            "(e) random -5000..5000",
            stream(&mut |r| r.below(10_001) - 5000),
        ),
    ]
}

/// A count encoding: the value length of one run of counts.
type Encoding = fn(&[i64]) -> usize;

/// Tag, run, stored and a total of `total_len` bytes.
fn header_len(counts: &[i64], total_len: usize) -> usize {
    let stored = counts.iter().filter(|&&c| c != 0).count();
    1 + leb(counts.len() as u64) + leb(stored as u64) + total_len
}

/// The layout of `packed.rs`: the shortest of dense, sparse and constant, plain or zigzag.
fn chosen(counts: &[i64]) -> usize {
    encode_counts(counts).map(|v| v.len()).unwrap_or(usize::MAX)
}

/// Dense zigzag LEB128 counts, whatever their sign.
fn zigzag_dense(counts: &[i64]) -> usize {
    let total: i64 = counts.iter().sum();
    header_len(counts, leb(zigzag(total))) + counts.iter().map(|&c| leb(zigzag(c))).sum::<usize>()
}

/// Dense 2-byte counts; anything outside `0 .. 0xffff` is the escape 0xffff and 8 bytes.
fn fixed_two(counts: &[i64]) -> usize {
    let total: i64 = counts.iter().sum();
    let body: usize = (counts.iter())
        .map(|&c| if (0..0xffff).contains(&c) { 2 } else { 10 })
        .sum();
    header_len(counts, leb(zigzag(total))) + body
}

/// Dense plain LEB128 only (negatives escaped; no zigzag, sparse or constant runs).
fn plain_dense(counts: &[i64]) -> usize {
    let total: i64 = counts.iter().sum();
    header_len(counts, number_len(false, total))
        + counts.iter().map(|&c| number_len(false, c)).sum::<usize>()
}

/// Bytes a sample of `stream` cut into runs of `run`, and the largest value and its class.
fn cost(stream: &[i64], run: usize, encoding: Encoding) -> (f64, usize, usize) {
    let (mut bytes, mut largest) = (0usize, 0usize);
    for counts in stream.chunks(run) {
        if counts.iter().all(|&c| c == 0) {
            continue;
        }
        let len = encoding(counts);
        largest = largest.max(len);
        bytes += value_allocation(len) + FIELD_OVERHEAD;
    }
    (
        bytes as f64 / stream.len() as f64,
        largest,
        value_allocation(largest),
    )
}

/// Runs grown while their value (dense plain LEB128) stays within the 512-byte class.
fn variable_cost(stream: &[i64]) -> f64 {
    let (mut bytes, mut at) = (0usize, 0usize);
    while at < stream.len() {
        let mut end = at;
        let mut body = 0usize;
        while end < stream.len() {
            let next = body + number_len(false, stream[end]);
            // Header at most 1 + 2 + 2 + 10 bytes, sds 5 + 1.
            if 15 + next + 6 > 512 {
                break;
            }
            body = next;
            end += 1;
        }
        bytes += 512 + FIELD_OVERHEAD;
        at = end.max(at + 1);
    }
    bytes as f64 / stream.len() as f64
}

const RUNS: [usize; 6] = [64, 128, 240, 256, 480, 512];

#[test]
#[ignore = "a table to read: run with --ignored (see the module doc)"]
fn measured_bytes_a_sample_by_run_length_and_count_encoding() {
    let encodings: [(&str, Encoding); 4] = [
        ("chosen", chosen),
        ("zigzag", zigzag_dense),
        ("2-byte+esc", fixed_two),
        ("plain dense", plain_dense),
    ];
    println!(
        "bytes a sample, a year of minutes, value's jemalloc class + {FIELD_OVERHEAD} B a field \
         (one field a slot: 53-61 B a non-zero slot)"
    );
    print!("{:<28} {:<12}", "stream", "encoding");
    RUNS.iter().for_each(|r| print!(" {r:>6}"));
    println!(" {:>6}", "var512");
    for (name, stream) in streams() {
        for (encoding_name, encoding) in encodings {
            print!("{name:<28} {encoding_name:<12}");
            for run in RUNS {
                print!(" {:>6.2}", cost(&stream, run, encoding).0);
            }
            if encoding_name == "plain dense" {
                println!(" {:>6.2}", variable_cost(&stream));
            } else {
                println!();
            }
        }
    }
    println!("\nlargest value of the chosen layout (bytes) -> its allocation (sds + class)");
    print!("{:<28}", "stream");
    RUNS.iter().for_each(|r| print!(" {r:>11}"));
    println!();
    for (name, stream) in streams() {
        print!("{name:<28}");
        for run in RUNS {
            let (_, largest, class) = cost(&stream, run, chosen);
            print!(" {:>11}", format!("{largest}->{class}"));
        }
        println!();
    }
}

#[test]
fn packed_runs_meet_their_targets() {
    let streams = streams();
    let at_run = |at: usize| cost(&streams[at].1[..SLOTS / 4], RUN as usize, chosen).0;
    // The targets: at most 3 B a sample for counts below 16,384, and no more than
    // RedisTimeSeries's 2.5 B on random counts 1..5000; a constant stream near its
    // 0.26-0.45; a sparse one far below one field a slot.
    assert!(at_run(0) <= 2.5, "random 1..5000: {}", at_run(0));
    assert!(at_run(1) <= 0.45, "constant: {}", at_run(1));
    assert!(at_run(2) <= 1.0, "sparse: {}", at_run(2));
    assert!(at_run(3) <= 3.0, "near 16,383: {}", at_run(3));
    // Every run of counts below 16,384 fits the 512-byte class.
    let (_, _, class) = cost(&streams[3].1[..SLOTS / 4], RUN as usize, chosen);
    assert_eq!(class, 512);
}

/// Time of the codec over one run of random counts 1..5000: a whole decode, the sum of
/// half a run (a window's edge), an `AT` into it, and the header's total.
#[test]
#[ignore = "timing: run with --ignored (see the module doc)"]
fn measured_codec_time_of_one_run() {
    let mut rng = Rng(11);
    let counts: Vec<i64> = (0..RUN).map(|_| 1 + rng.below(5000)).collect();
    let value = encode_counts(&counts).unwrap_or_default();
    let rounds = 100_000u32;
    let time = |f: &mut dyn FnMut(u32) -> i128| {
        let (start, mut sink) = (Instant::now(), 0i128);
        for i in 0..rounds {
            sink = sink.wrapping_add(f(i));
        }
        (start.elapsed() / rounds, sink)
    };
    let decoded = time(&mut |_| decode(0, &value).map(|v| v.len() as i128).unwrap_or(0));
    let edge = time(&mut |i| range_sum(0, &value, i64::from(i % 120), 200).unwrap_or(0));
    let at = time(&mut |i| {
        add(0, &value, i64::from(i) % RUN, 1)
            .map(|e| i128::from(e.count))
            .unwrap_or(0)
    });
    let whole = time(&mut |_| range_sum(0, &value, 0, RUN).unwrap_or(0));
    println!(
        "run of {RUN} random counts ({} bytes): decode {:?}, sum of part {:?}, AT (add and \
         re-encode) {:?}, whole-run sum from the header {:?}",
        value.len(),
        decoded.0,
        edge.0,
        at.0,
        whole.0
    );
}
