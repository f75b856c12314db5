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
//!
//! Owns: the sketch and its binary form. May not touch: Redis (pure).

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
            // The value (an `exp`) only for buckets that answer a fraction.
            if pending.peek().is_some_and(|&(rank, _)| rank > seen) {
                continue;
            }
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

    /// For each of `xs` (any order), how many values are at or below it, in one walk of
    /// the buckets (`O(xs log xs + buckets)`).
    ///
    /// Each bucket counts as one point: bucket `i` (magnitudes in `(gamma^(i-1), gamma^i]`)
    /// at `gamma^i / (1 + ALPHA)`, negated for the negative store, and the zero count at
    /// 0. A value `x` with `|x| >= ZERO_THRESHOLD` then gets a count between the true
    /// counts at `x * (1 - 0.01)` and at `x * (1 + 0.01)` (swapped for a negative `x`): the
    /// buckets wholly below `x` count, those wholly above do not, and the bucket holding
    /// `x` counts exactly when `x` is at or above its point, which is when every value in
    /// it is at most `x * 1.01` (for a positive `x`; at most `x * 0.99` in magnitude
    /// otherwise). The point sits strictly inside the range where either choice keeps that
    /// bound (`gamma^i / 1.01 ..= gamma^i / 1.0098`), so rounding in `exp` cannot matter.
    pub fn counts_at_or_below(&self, xs: &[f64]) -> Vec<u64> {
        let mut out = vec![0; xs.len()];
        let mut order: Vec<(f64, usize)> = xs.iter().copied().zip(0..).collect();
        order.sort_unstable_by(|a, b| a.0.total_cmp(&b.0));
        let point = |sign: f64, i: i32| sign * (f64::from(i) * ln_gamma() - ALPHA.ln_1p()).exp();
        let mut points = self
            .ascending_buckets()
            .filter(|b| b.2 > 0)
            .map(|(sign, i, c)| (if sign == 0.0 { 0.0 } else { point(sign, i) }, c))
            .peekable();
        let mut below: u64 = 0;
        for (x, at) in order {
            while let Some((_, c)) = points.next_if(|&(p, _)| p <= x) {
                below = below.saturating_add(c);
            }
            if let Some(slot) = out.get_mut(at) {
                *slot = below;
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
        // Each bucket takes at least two bytes, so the input bounds the size.
        let cap = usize::try_from(len.min(MAX_BUCKETS))
            .ok()?
            .min(self.bytes.len() / 2);
        let mut map = Vec::with_capacity(cap);
        walk_store(self, len, |index, count, _, _, _, _| {
            // walk_store checked the index is in MIN_INDEX..=MAX_INDEX.
            map.push((index as i32, count));
        })?;
        Some(map)
    }
}

mod encoded;
use encoded::walk_store;
pub use encoded::{add_to_encoded, DenseMerge};

#[cfg(test)]
mod tests;
