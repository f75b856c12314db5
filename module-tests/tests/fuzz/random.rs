//! Random arguments: the seed, the families' keywords, numbers, durations, resolution
//! specs, timestamps near now and absurd ones, junk (empty, binary, NUL, very long).

use super::*;

pub(super) fn seed() -> u64 {
    std::env::var("TALLY_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x7A11_F022)
}

pub(super) const KEYWORDS: &[&str] = &[
    "AT",
    "QUANTITY",
    "FROM",
    "TO",
    "EMPTY",
    "RESOLUTIONS",
    "WINDOW",
    "SLOT",
    "OFFSET",
    "WITHSCORES",
    "PERIOD",
    "KEEP",
    "REPORT",
];

pub(super) const NUMBERS: &[&str] = &[
    "0",
    "1",
    "-1",
    "2",
    "7",
    "100",
    "100000",
    "100001",
    "10000",
    "10001",
    "9223372036854775807",
    "-9223372036854775808",
    "9223372036854775808",
    "-9223372036854775809",
    "4611686018427387904",
    "9007199254740993",
    "-0",
    "01",
    "+1",
    " 1",
    "1 ",
    "1e3",
    "0x10",
    "1.5",
    "-2.5",
    "0.0",
    "-0.0",
    "1e308",
    "-1e308",
    "1e309",
    "4.9e-324",
    "1e-9",
    "1e100",
    "1.0000001e100",
    "inf",
    "-inf",
    "+inf",
    "nan",
    "NaN",
    "infinity",
    "0.5",
    "0.99",
    "1.0000000001",
];

pub(super) const DURATIONS: &[&str] = &[
    "1",
    "1ms",
    "100ms",
    "500ms",
    "1s",
    "5s",
    "1m",
    "5m",
    "1h",
    "24h",
    "1d",
    "180d",
    "2w",
    "0",
    "0s",
    "-5s",
    "1S",
    "1H",
    "1x",
    "s",
    "ms",
    "1.5s",
    "1e3ms",
    "999999999999999999",
    "9999999999999999999",
    "99999999999999d",
    "106751991167w",
    "1000000000000000000ms",
    // The longest duration (10,000 years) and just beyond it.
    "3652500d",
    "3652501d",
    "315576000000000",
    "315576000000001ms",
    "3s ",
    "5 s",
];

pub(super) const RESOLUTIONS: &[&str] = &[
    "1s:10",
    "1ms:100000",
    "100ms:5",
    "1s:1",
    "5s:120",
    "1m:60",
    "1h:24",
    "1d:365",
    "1s:0",
    "1s:-1",
    "1s:100001",
    "1s",
    ":",
    "0:0",
    "1s:10:10",
    "1s:1e3",
    ":10",
    "1x:10",
    "1w:100000",
    "9223372036854775807:1",
    "1s:9223372036854775807",
    // Spans (resolution x samples) at and beyond 10,000 years; the saturating one.
    "3652500d:1",
    "3652500d:2",
    "3155760000ms:100000",
    "3155760001ms:100000",
    "1d:100000",
    "106751991167d:100000",
];

/// A random timestamp: near now (past, future within and beyond max-future), epoch,
/// negative, extremes, the bounds of the timestamp range `[0, 2^53)`.
pub(super) fn timestamp(rng: &mut Rng) -> String {
    let now = local_ms();
    match rng.below(11) {
        0 => "0".into(),
        10 => rng
            .pick(&[(1i64 << 53) - 1, 1 << 53, -100_000_000_000_000, -86_400_000])
            .to_string(),
        1 => "-1".into(),
        2 => i64::MAX.to_string(),
        3 => i64::MIN.to_string(),
        4 => (now + 30_000).to_string(),
        5 => (now + 120_000).to_string(),
        6 => (now - rng.below(1000) * 86_400_000).to_string(),
        _ => (now - rng.below(200_000)).to_string(),
    }
}

pub(super) fn junk(rng: &mut Rng) -> Vec<u8> {
    match rng.below(8) {
        0 => Vec::new(),
        1 => b"\x00".to_vec(),
        2 => (0..rng.below(40)).map(|_| rng.next_u64() as u8).collect(),
        3 => vec![b'x'; 10_000 + rng.below(90_000) as usize],
        4 => "\u{1F600}\u{e9}{}|:".as_bytes().to_vec(),
        5 => b"1\x002".to_vec(),
        6 => format!("m{}", rng.below(20)).into_bytes(),
        _ => {
            let mut k = rng.pick(KEYWORDS).as_bytes().to_vec();
            k.push(b'X');
            k
        }
    }
}

/// One random argument.
pub(super) fn arg(rng: &mut Rng) -> Vec<u8> {
    match rng.below(14) {
        0..=2 => {
            let k = rng.pick(KEYWORDS);
            match rng.below(3) {
                0 => k.to_lowercase().into_bytes(),
                _ => k.as_bytes().to_vec(),
            }
        }
        3..=5 => rng.pick(NUMBERS).as_bytes().to_vec(),
        6 | 7 => rng.pick(DURATIONS).as_bytes().to_vec(),
        8 => rng.pick(RESOLUTIONS).as_bytes().to_vec(),
        9 | 10 => timestamp(rng).into_bytes(),
        11 => (rng.next_u64() as i64 >> rng.below(63))
            .to_string()
            .into_bytes(),
        _ => junk(rng),
    }
}
