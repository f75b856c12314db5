//! Relative-error quantile sketch (DDSketch-style log buckets).
//!
//! Why not the `sketches-ddsketch` crate: each period's sketch is stored as
//! bytes inside a Redis hash field, so we need a small, stable, compact binary
//! encoding that we control (varint/zigzag sparse buckets, a few hundred bytes
//! for typical data) and a strict decoder that never panics on garbage; and
//! we need negative values, which are kept in a second, mirrored store.
//!
//! Accuracy: a positive value `v` goes to bucket `i = ceil(ln v / ln gamma)`
//! with `gamma = (1 + ALPHA) / (1 - ALPHA)`, i.e. bucket `i` covers
//! `(gamma^(i-1), gamma^i]`. Reporting `gamma^i * (1 - ALPHA)` for the bucket
//! is within `ALPHA` relative of every value in it. Ranks are counted exactly,
//! so `quantile(q)` is within `ALPHA` (0.99%) relative of the true
//! nearest-rank quantile. `ALPHA` is a hair under 1% so float rounding in
//! `ln`/`exp` at bucket edges cannot push the error past 1%.
//!
//! Zero: values with `|v| < ZERO_THRESHOLD` (1e-9), including subnormals and
//! `-0.0`, are counted as exactly zero and reported as `0.0`. The relative
//! guarantee therefore only holds for quantiles whose true value is 0 or has
//! magnitude `>= 1e-9`.
//!
//! Size: the number of buckets grows with the log of the data's dynamic range
//! (about 50 buckets per factor of e), not with the count. The worst case,
//! values spread over the whole range 1e-9..f64::MAX, is bounded by
//! `MAX_INDEX - MIN_INDEX + 1` (~37k) buckets per sign.

/// One sign's buckets: `(index, count)` sorted by index, counts non-zero.
/// A sorted `Vec` rather than a `BTreeMap`: a sketch is decoded, updated and
/// re-encoded on every STATS.ADD, and building a map node by node costs
/// several times more than filling one vector (a few hundred buckets).
type Store = Vec<(i32, u64)>;

/// Relative accuracy of reported quantiles.
pub const ALPHA: f64 = 0.0099;
/// Magnitudes below this are counted as zero.
pub const ZERO_THRESHOLD: f64 = 1e-9;

/// Encoding format version (first byte of [`Sketch::encode`]).
const VERSION: u8 = 1;
/// Bucket index bounds. `index_of(ZERO_THRESHOLD)` is -1046 and
/// `index_of(f64::MAX)` is 35847 for ALPHA = 0.0099 (checked by a test), so
/// every index fits comfortably; decode rejects anything outside.
const MIN_INDEX: i32 = -1100;
const MAX_INDEX: i32 = 35900;
/// Maximum number of buckets one store can legitimately hold.
const MAX_BUCKETS: u64 = (MAX_INDEX as i64 - MIN_INDEX as i64 + 1) as u64;

/// A mergeable quantile sketch over finite `f64` values.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sketch {
    /// Count of values with `|v| < ZERO_THRESHOLD`.
    zero: u64,
    /// Positive values: bucket index -> count (only non-zero counts).
    pos: Store,
    /// Negative values, indexed by `|v|` (mirrored): index -> count.
    neg: Store,
}

/// `ln(gamma)`; a function rather than a const because `ln` is not const.
fn ln_gamma() -> f64 {
    ((1.0 + ALPHA) / (1.0 - ALPHA)).ln()
}

/// Bucket index of a magnitude `m >= ZERO_THRESHOLD`.
fn index_of(m: f64) -> i32 {
    let raw = (m.ln() / ln_gamma()).ceil();
    // `as` saturates (and maps NaN to 0), so this cannot panic; the clamp
    // keeps the invariant that stored indices are inside the decodable range.
    (raw as i32).clamp(MIN_INDEX, MAX_INDEX)
}

/// Representative magnitude of bucket `i`: `gamma^i * (1 - ALPHA)`.
fn value_of(i: i32) -> f64 {
    // Computed in log space so the top bucket (gamma^i may exceed f64::MAX)
    // does not overflow before the (1 - ALPHA) factor is applied; the final
    // min() caps it at f64::MAX, which only moves it closer to real data.
    let v = (f64::from(i) * ln_gamma() + (1.0 - ALPHA).ln()).exp();
    v.min(f64::MAX)
}

impl Sketch {
    /// An empty sketch.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one value. The caller guarantees `v` is finite; non-finite
    /// values are ignored rather than corrupting the sketch.
    pub fn add(&mut self, v: f64) {
        self.add_n(v, 1);
    }

    /// Adds `v` with multiplicity `n` (counts saturate at `u64::MAX`).
    pub fn add_n(&mut self, v: f64, n: u64) {
        if n == 0 || !v.is_finite() {
            // n == 0 would create an empty bucket, which encode/decode treat
            // as non-canonical.
            return;
        }
        if v.abs() < ZERO_THRESHOLD {
            self.zero = self.zero.saturating_add(n);
            return;
        }
        let store = if v > 0.0 {
            &mut self.pos
        } else {
            &mut self.neg
        };
        let idx = index_of(v.abs());
        match store.binary_search_by_key(&idx, |&(i, _)| i) {
            Ok(p) => {
                if let Some((_, c)) = store.get_mut(p) {
                    *c = c.saturating_add(n);
                }
            }
            Err(p) => store.insert(p, (idx, n)),
        }
    }

    /// Merges `other` into `self`. Exact on counts, so merging is
    /// associative and commutative.
    pub fn merge(&mut self, other: &Sketch) {
        self.zero = self.zero.saturating_add(other.zero);
        for (mine, theirs) in [(&mut self.pos, &other.pos), (&mut self.neg, &other.neg)] {
            if !theirs.is_empty() {
                *mine = merge_stores(mine, theirs);
            }
        }
    }

    /// Merges many sketches at once (the periods of a window): per sign, the
    /// counts are summed in one dense array spanning the union of the bucket
    /// indices (at most `MAX_BUCKETS` entries), instead of re-allocating a
    /// store per pairwise merge. Same result as merging one by one.
    pub fn merge_all<'a>(sketches: impl IntoIterator<Item = &'a Sketch>) -> Sketch {
        let all: Vec<&Sketch> = sketches.into_iter().collect();
        let zero = all.iter().fold(0u64, |acc, s| acc.saturating_add(s.zero));
        let pos = sum_dense(all.iter().map(|s| s.pos.as_slice()));
        let neg = sum_dense(all.iter().map(|s| s.neg.as_slice()));
        Sketch { zero, pos, neg }
    }

    /// Total number of values (saturating).
    pub fn count(&self) -> u64 {
        self.pos
            .iter()
            .chain(self.neg.iter())
            .fold(self.zero, |acc, &(_, n)| acc.saturating_add(n))
    }

    /// Nearest-rank quantile: the value of rank `max(1, ceil(q * n))` in
    /// ascending order (negatives, then zeros, then positives), within
    /// `ALPHA` relative. `None` when empty or `q` is not in `[0, 1]`.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        if !(0.0..=1.0).contains(&q) {
            return None;
        }
        let n = self.count();
        if n == 0 {
            return None;
        }
        let rank = rank_of(q, n);
        // Bucket values (an `exp` each) are computed only for the bucket that
        // is returned.
        let mut seen: u64 = 0;
        let mut last = None;
        for bucket in self.ascending_buckets() {
            if bucket.2 == 0 {
                continue;
            }
            seen = seen.saturating_add(bucket.2);
            last = Some(bucket);
            if seen >= rank {
                return last.map(bucket_value);
            }
        }
        // Only reachable if saturation made counts inconsistent; the largest
        // value is the sensible answer.
        last.map(bucket_value)
    }

    /// [`Sketch::quantile`] of every `q` of `qs`, in their order, in one walk
    /// of the buckets: the ranks are sorted (remembering where each answer
    /// goes), so the cost is `O(qs log qs + buckets)` however many fractions
    /// are asked, instead of one walk per fraction.
    pub fn quantiles(&self, qs: &[f64]) -> Vec<Option<f64>> {
        let mut out = vec![None; qs.len()];
        let n = self.count();
        if n == 0 {
            return out;
        }
        // (rank, position in `qs`) of every valid fraction, by rank.
        let mut wanted: Vec<(u64, usize)> = qs
            .iter()
            .enumerate()
            .filter(|(_, q)| (0.0..=1.0).contains(*q))
            .map(|(at, &q)| (rank_of(q, n), at))
            .collect();
        wanted.sort_unstable();
        let mut pending = wanted.into_iter().peekable();
        let mut seen: u64 = 0;
        let mut last = None;
        for bucket in self.ascending_buckets() {
            if bucket.2 == 0 {
                continue;
            }
            seen = seen.saturating_add(bucket.2);
            last = Some(bucket);
            let value = bucket_value(bucket);
            while let Some((_, at)) = pending.next_if(|&(rank, _)| rank <= seen) {
                if let Some(slot) = out.get_mut(at) {
                    *slot = Some(value);
                }
            }
            if pending.peek().is_none() {
                return out;
            }
        }
        // Only reachable if saturation made counts inconsistent (as in
        // `quantile`): the largest value answers the rest.
        if let Some(value) = last.map(bucket_value) {
            for (_, at) in pending {
                if let Some(slot) = out.get_mut(at) {
                    *slot = Some(value);
                }
            }
        }
        out
    }

    /// Every bucket in ascending value order as `(sign, index, count)`:
    /// negatives (largest magnitude first), the zero count, positives.
    fn ascending_buckets(&self) -> impl Iterator<Item = (f64, i32, u64)> + '_ {
        self.neg
            .iter()
            .rev()
            .map(|&(i, c)| (-1.0, i, c))
            .chain(std::iter::once((0.0, 0, self.zero)))
            .chain(self.pos.iter().map(|&(i, c)| (1.0, i, c)))
    }

    /// Compact binary form: version byte, zero count (varint), then the
    /// negative and the positive store, each as the number of non-empty
    /// buckets (varint) followed by, per bucket in ascending index order,
    /// the index delta from the previous index (zigzag varint; the first is
    /// relative to 0) and the count (varint).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(8 + 2 * self.bucket_count());
        out.push(VERSION);
        put_varint(&mut out, self.zero);
        for store in [&self.neg, &self.pos] {
            put_varint(&mut out, store.len() as u64);
            let mut prev: i64 = 0;
            for &(i, c) in store {
                put_varint(&mut out, zigzag(i64::from(i) - prev));
                put_varint(&mut out, c);
                prev = i64::from(i);
            }
        }
        out
    }

    /// Strict inverse of [`Sketch::encode`]; never panics. Returns `None` on
    /// an unknown version, truncated input, trailing bytes, overlong or
    /// non-minimal varints, bucket counts above the possible index range,
    /// indices out of range or not strictly increasing, or empty buckets.
    /// Anything accepted re-encodes to exactly the same bytes.
    pub fn decode(bytes: &[u8]) -> Option<Sketch> {
        let mut r = Reader { bytes, pos: 0 };
        if r.byte()? != VERSION {
            return None;
        }
        let zero = r.varint()?;
        let neg = r.store()?;
        let pos = r.store()?;
        if r.pos != bytes.len() {
            return None;
        }
        Some(Sketch { zero, pos, neg })
    }

    /// Number of non-empty log buckets (both signs; the zero count is not a
    /// bucket). Useful for size accounting.
    pub fn bucket_count(&self) -> usize {
        self.pos.len() + self.neg.len()
    }
}

/// Nearest rank of fraction `q` (in `[0, 1]`) among `n > 0` values:
/// `max(1, ceil(q * n))`. `as u64` saturates; the clamp handles `q * n`
/// rounding past `n`.
pub fn rank_of(q: f64, n: u64) -> u64 {
    ((q * n as f64).ceil() as u64).clamp(1, n.max(1))
}

/// Representative value of a bucket from [`Sketch::ascending_buckets`].
fn bucket_value((sign, i, _): (f64, i32, u64)) -> f64 {
    if sign == 0.0 {
        0.0
    } else {
        sign * value_of(i)
    }
}

/// Sum of several sorted stores, through a dense array over their index span.
fn sum_dense<'a>(stores: impl Iterator<Item = &'a [(i32, u64)]> + Clone) -> Store {
    let bounds = stores
        .clone()
        .filter_map(|s| Some((s.first()?.0, s.last()?.0)))
        .reduce(|(a, b), (c, d)| (a.min(c), b.max(d)));
    let Some((lo, hi)) = bounds else {
        return Store::new();
    };
    // Stored indices lie in MIN_INDEX..=MAX_INDEX, so the span is at most
    // MAX_BUCKETS (about 37k) and never negative.
    let span = usize::try_from(i64::from(hi) - i64::from(lo) + 1).unwrap_or(0);
    let mut dense = vec![0u64; span];
    for store in stores {
        for &(i, c) in store {
            let offset = usize::try_from(i64::from(i) - i64::from(lo)).unwrap_or(usize::MAX);
            if let Some(slot) = dense.get_mut(offset) {
                *slot = slot.saturating_add(c);
            }
        }
    }
    dense
        .into_iter()
        .zip(lo..)
        .filter(|&(c, _)| c > 0)
        .map(|(c, i)| (i, c))
        .collect()
}

/// Union of two sorted stores, adding the counts of equal indices (saturating).
fn merge_stores(a: &[(i32, u64)], b: &[(i32, u64)]) -> Store {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut x, mut y) = (a.iter().peekable(), b.iter().peekable());
    loop {
        let next = match (x.peek(), y.peek()) {
            (Some(&&(i, c)), Some(&&(j, d))) => {
                if i < j {
                    x.next();
                    (i, c)
                } else if j < i {
                    y.next();
                    (j, d)
                } else {
                    x.next();
                    y.next();
                    (i, c.saturating_add(d))
                }
            }
            (Some(&&e), None) => {
                x.next();
                e
            }
            (None, Some(&&e)) => {
                y.next();
                e
            }
            (None, None) => break,
        };
        out.push(next);
    }
    out
}

/// LEB128 unsigned varint.
fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Bounds-checked cursor over the encoded bytes.
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn byte(&mut self) -> Option<u8> {
        let b = *self.bytes.get(self.pos)?;
        self.pos += 1;
        Some(b)
    }

    /// Reads a minimal LEB128 varint of at most 10 bytes that fits in u64.
    fn varint(&mut self) -> Option<u64> {
        // Fast path: most deltas and many counts fit in one byte.
        let first = self.byte()?;
        if first < 0x80 {
            return Some(u64::from(first));
        }
        let mut result = u64::from(first & 0x7f);
        for shift in (7..64).step_by(7) {
            let b = self.byte()?;
            let payload = u64::from(b & 0x7f);
            // The 10th byte (shift 63) may only carry the top bit.
            if shift == 63 && payload > 1 {
                return None;
            }
            result |= payload << shift;
            if b & 0x80 == 0 {
                // A trailing zero group means a non-minimal encoding; reject
                // so every sketch has exactly one byte representation.
                if b == 0 && shift > 0 {
                    return None;
                }
                return Some(result);
            }
        }
        None
    }

    fn store(&mut self) -> Option<Store> {
        let len = self.varint()?;
        if len > MAX_BUCKETS {
            return None;
        }
        // Each bucket takes at least two bytes, so the input bounds the size.
        let cap = usize::try_from(len).ok()?.min(self.bytes.len() / 2);
        let mut map = Vec::with_capacity(cap);
        let mut prev: i64 = 0;
        for k in 0..len {
            let delta = unzigzag(self.varint()?);
            // Strictly increasing indices: no duplicates, canonical order.
            if k > 0 && delta < 1 {
                return None;
            }
            let idx = prev.checked_add(delta)?;
            let idx32 = i32::try_from(idx).ok()?;
            if !(MIN_INDEX..=MAX_INDEX).contains(&idx32) {
                return None;
            }
            let count = self.varint()?;
            if count == 0 {
                return None;
            }
            map.push((idx32, count));
            prev = idx;
        }
        Some(map)
    }
}

#[cfg(test)]
mod tests {
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
}
