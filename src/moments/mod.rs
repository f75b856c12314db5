//! Mergeable running moments for windowed statistics.
//!
//! One [`Moments`] is kept per time period; multi-period windows merge them.
//! The mean/M2 update is Welford's algorithm and the merge is the parallel
//! formula of Chan et al., so the variance stays exact even when the values sit
//! far from zero (e.g. 1e9 + small spread), where the naive
//! `sum(x^2) - sum(x)^2 / n` formula would cancel catastrophically.
//! The sum is kept separately with Neumaier compensation, because
//! `mean * count` would lose low-order digits. The mean is re-derived from
//! that compensated sum, and deviations use its low-order part too, so the
//! variance stays accurate to ~1e-13 relative even for 1e9 + [0, 1) data.
//! (Plain Welford accumulates mean rounding and lands near 1e-7 there.)
//!
//! Overflow note: values are assumed finite, but intermediate quantities can
//! still overflow for huge magnitudes (`m2` squares deviations, so values
//! beyond roughly 1e150 in magnitude can make it infinite). A state with
//! non-finite fields is rejected by [`Moments::decode`], so callers that must
//! round-trip through storage should bound their input values.
//!
//! Stored forms: the text `count sum sum_comp mean m2 min max` ([`Moments::encode_text`],
//! what STATS writes: the hash stays readable with HGET) and a fixed 57-byte binary
//! record ([`Moments::encode`]: a tag byte, then the count and the six floats as
//! little-endian bits, no float formatting). [`Moments::decode`] reads both.
//!
//! Owns: moments and their stored forms. May not touch: Redis (pure).

use std::fmt::Write as _;

use crate::args::{parse_finite_f64, parse_i64, push_f64};

/// First byte of the binary form. The text form starts with a decimal digit, so the two
/// never collide.
pub const BINARY_TAG: u8 = 0x02;
/// Length of the binary form: tag, count, sum, sum_comp, mean, m2, min, max.
pub const ENCODED_LEN: usize = 1 + 8 * 7;

/// Mergeable running moments (Welford / Chan et al. parallel merge).
///
/// An empty value has `count == 0` and every float field `0.0`; `min`/`max`
/// are only meaningful when `count > 0`.
#[derive(Clone, Debug, PartialEq)]
pub struct Moments {
    /// Number of values added.
    pub count: u64,
    /// Running mean (Welford).
    pub mean: f64,
    /// Sum of squared deviations from the mean.
    pub m2: f64,
    /// Smallest value seen (0 when empty).
    pub min: f64,
    /// Largest value seen (0 when empty).
    pub max: f64,
    /// Running sum, high-order part.
    pub sum: f64,
    /// Neumaier compensation: the rounding error lost from `sum`.
    pub sum_comp: f64,
}

impl Default for Moments {
    fn default() -> Self {
        Self::new()
    }
}

impl Moments {
    /// Number of space-separated fields in the encoded form.
    const FIELDS: usize = 7;

    /// An empty accumulator (count 0).
    pub fn new() -> Self {
        Moments {
            count: 0,
            mean: 0.0,
            m2: 0.0,
            min: 0.0,
            max: 0.0,
            sum: 0.0,
            sum_comp: 0.0,
        }
    }

    /// Adds one value. The caller guarantees `v` is finite.
    pub fn add(&mut self, v: f64) {
        if self.count == 0 {
            // Start from a clean state so min/max are not polluted by the
            // placeholder zeros of an empty accumulator.
            *self = Moments::new();
            self.min = v;
            self.max = v;
        } else {
            self.min = self.min.min(v);
            self.max = self.max.max(v);
        }
        // Deviations are taken from the mean including its low-order part,
        // see mean_lo(). Computed before count/sum change.
        let delta = (v - self.mean) - self.mean_lo();
        // Saturating: 2^64 values is unreachable in practice, but this must
        // never panic in debug builds.
        self.count = self.count.saturating_add(1);
        let n = self.count as f64;
        self.add_to_sum(v);
        self.update_mean(delta / n);
        // Welford step: deviation from the old mean times deviation from the
        // new mean.
        let delta_new = (v - self.mean) - self.mean_lo();
        self.m2 += delta * delta_new;
    }

    /// Merges `other` into `self` (Chan et al. parallel combination).
    pub fn merge(&mut self, other: &Moments) {
        if other.count == 0 {
            return;
        }
        if self.count == 0 {
            *self = other.clone();
            return;
        }
        let na = self.count as f64;
        let nb = other.count as f64;
        let n = na + nb;
        let delta = (other.mean - self.mean) + (other.mean_lo() - self.mean_lo());
        self.m2 += other.m2 + delta * delta * (na * (nb / n));
        self.count = self.count.saturating_add(other.count);
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        // Feed both halves of the other compensated sum through the
        // compensated adder so neither loses precision.
        self.add_to_sum(other.sum);
        self.add_to_sum(other.sum_comp);
        // Weighted by nb/n rather than (na*mean_a + nb*mean_b)/n to avoid
        // large intermediate products when the means are big.
        self.update_mean(delta * (nb / n));
    }

    /// Compensated sum of all values.
    pub fn sum(&self) -> f64 {
        self.sum + self.sum_comp
    }

    /// Sample variance (divides by `count - 1`); 0 when `count <= 1`.
    pub fn variance(&self) -> f64 {
        if self.count <= 1 {
            return 0.0;
        }
        // m2 is mathematically non-negative; max() guards against any
        // rounding ever producing a tiny negative.
        (self.m2 / (self.count - 1) as f64).max(0.0)
    }

    /// Sample standard deviation.
    pub fn stddev(&self) -> f64 {
        self.variance().sqrt()
    }

    /// The stored form: [`BINARY_TAG`], then `count` as u64 and `sum sum_comp mean m2
    /// min max` as f64 bits, all little-endian. Exact bits, no formatting.
    pub fn encode(&self) -> [u8; ENCODED_LEN] {
        let mut out = [0u8; ENCODED_LEN];
        let words = [
            self.count,
            self.sum.to_bits(),
            self.sum_comp.to_bits(),
            self.mean.to_bits(),
            self.m2.to_bits(),
            self.min.to_bits(),
            self.max.to_bits(),
        ];
        out[0] = BINARY_TAG;
        for (chunk, word) in out[1..].chunks_exact_mut(8).zip(words) {
            chunk.copy_from_slice(&word.to_le_bytes());
        }
        out
    }

    /// The version 1 stored form, compact readable text:
    /// `"count sum sum_comp mean m2 min max"`, space-separated. Each float is
    /// Rust's shortest round-trip form, plain or with an exponent (see
    /// `push_f64`), so decode restores exact bits.
    pub fn encode_text(&self) -> String {
        let floats = [
            self.sum,
            self.sum_comp,
            self.mean,
            self.m2,
            self.min,
            self.max,
        ];
        let mut out = String::with_capacity(160);
        let _ = write!(out, "{}", self.count);
        for f in floats {
            out.push(' ');
            push_f64(&mut out, f);
        }
        out
    }

    /// Strict inverse of [`Moments::encode`] and [`Moments::encode_text`].
    /// Returns `None` for anything that is not a consistent encoded state:
    /// a binary form of the wrong length; text with invalid UTF-8, a wrong
    /// field count or empty fields; non-finite floats, negative `m2`,
    /// `min > max`, mean outside `[min, max]`, or a count-0 record with
    /// non-zero fields.
    pub fn decode(bytes: &[u8]) -> Option<Moments> {
        match bytes.split_first() {
            Some((&BINARY_TAG, rest)) => Self::decode_binary(rest),
            _ => Self::decode_text(bytes),
        }
    }

    /// The binary form after its tag byte.
    fn decode_binary(rest: &[u8]) -> Option<Moments> {
        if rest.len() != ENCODED_LEN - 1 {
            return None;
        }
        let mut words = [0u64; 7];
        for (word, chunk) in words.iter_mut().zip(rest.chunks_exact(8)) {
            *word = u64::from_le_bytes(chunk.try_into().ok()?);
        }
        let [count, floats @ ..] = words;
        let floats = floats.map(f64::from_bits);
        if floats.iter().any(|f| !f.is_finite()) {
            return None;
        }
        Self::checked(count, floats)
    }

    /// The version 1 text form.
    fn decode_text(bytes: &[u8]) -> Option<Moments> {
        let text = std::str::from_utf8(bytes).ok()?;
        let mut parts = text.split(' ');
        let count = u64::try_from(parse_i64(parts.next()?.as_bytes()).ok()?).ok()?;
        let mut floats = [0.0f64; Self::FIELDS - 1];
        for slot in floats.iter_mut() {
            *slot = parse_finite_f64(parts.next()?.as_bytes()).ok()?;
        }
        if parts.next().is_some() {
            return None;
        }
        Self::checked(count, floats)
    }

    /// The state of decoded fields (all finite), if consistent.
    fn checked(count: u64, floats: [f64; Self::FIELDS - 1]) -> Option<Moments> {
        let [sum, sum_comp, mean, m2, min, max] = floats;
        let m = Moments {
            count,
            mean,
            m2,
            min,
            max,
            sum,
            sum_comp,
        };
        if count == 0 {
            // An empty accumulator has exactly one valid encoding.
            return if floats.iter().all(|&f| f == 0.0) {
                Some(m)
            } else {
                None
            };
        }
        // add/merge keep these invariants, so violating them means garbage.
        if m2 < 0.0 || min > max || mean < min || mean > max {
            return None;
        }
        if count == 1 && (m2 != 0.0 || min != max) {
            return None;
        }
        Some(m)
    }

    /// Neumaier's improved Kahan summation step.
    fn add_to_sum(&mut self, x: f64) {
        let t = self.sum + x;
        if self.sum.abs() >= x.abs() {
            self.sum_comp += (self.sum - t) + x;
        } else {
            self.sum_comp += (x - t) + self.sum;
        }
        self.sum = t;
    }

    /// The part of the true mean (compensated sum / count) that `mean`
    /// cannot represent: `true_mean - mean`. Together `mean + mean_lo()` is a
    /// double-double mean, so deviations like `v - mean` stay exact to
    /// ~1e-16 relative even when the values are ~1e9 and the spread is ~1.
    /// It is derived from the stored fields, so nothing extra is stored.
    fn mean_lo(&self) -> f64 {
        if self.count == 0 {
            return 0.0;
        }
        let n = self.count as f64;
        // The fused multiply-add gives the division residual sum - mean*n
        // exactly, since mean is (about) the rounded quotient sum / n.
        let lo = ((-self.mean).mul_add(n, self.sum) + self.sum_comp) / n;
        if lo.is_finite() {
            lo
        } else {
            0.0
        }
    }

    /// Sets the mean for the current count/sum. `step` is the classic
    /// incremental update, used only if the sum has overflowed.
    ///
    /// Why not just `mean += step`: each incremental update rounds to the
    /// ulp of the mean, and those errors accumulate like a random walk. With
    /// data like 1e9 + [0, 1) that walk reaches ~1e-6 absolute, enough to
    /// cost ~1e-7 relative in the variance. The compensated sum divided by
    /// the count is always within about one ulp of the true mean, and
    /// mean_lo() recovers the rest; measured stddev error on that data drops
    /// from ~1e-7 to ~1e-13 relative.
    fn update_mean(&mut self, step: f64) {
        let s = self.sum();
        self.mean = if s.is_finite() {
            s / self.count as f64
        } else {
            self.mean + step
        };
        self.clamp_mean();
    }

    /// The true mean always lies in [min, max]; rounding could nudge the
    /// computed one a hair outside, which decode would then reject.
    fn clamp_mean(&mut self) {
        if self.mean < self.min {
            self.mean = self.min;
        } else if self.mean > self.max {
            self.mean = self.max;
        }
    }
}

#[cfg(test)]
mod tests;
