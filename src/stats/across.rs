//! One summary of several statistics objects (STATS.MGET, STATS.MQUANTILE): the union of
//! their windows' values, from their merged records. Moments merge exactly (Chan's
//! combination, so the variance stays exact) and sketches merge exactly on counts, so the
//! union is as accurate as one object that had every value added.
//!
//! Owns: merging the windows of several keys. May not touch: Redis (pure).

use super::Record;

/// Merges records in the order given (the keys' order fixes the rounding of the merged
/// moments, so every call over the same keys answers the same bits). Empty records add
/// nothing.
#[derive(Default)]
pub struct KeysMerge {
    merged: Record,
}

impl KeysMerge {
    /// Adds the window of the next key.
    pub fn add(&mut self, window: &Record) {
        if window.count() > 0 {
            self.merged.merge(window);
        }
    }

    /// The union of every window added.
    pub fn finish(self) -> Record {
        self.merged
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::Rng;

    fn of(xs: &[f64]) -> Record {
        let mut r = Record::default();
        for &x in xs {
            r.add(x);
        }
        r
    }

    /// Two-pass sample standard deviation.
    fn stddev(xs: &[f64]) -> f64 {
        let n = xs.len() as f64;
        let mean = xs.iter().sum::<f64>() / n;
        (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
    }

    #[test]
    fn the_merge_of_keys_is_the_record_of_every_value() {
        let mut rng = Rng(0x4d47_4554);
        let mut all = Vec::new();
        let mut merge = KeysMerge::default();
        for key in 0..20 {
            let n = rng.below(200) as usize;
            let scale = 1.0 + key as f64 * 10.0;
            let xs: Vec<f64> = (0..n).map(|_| (rng.uniform() - 0.3) * scale).collect();
            merge.add(&of(&xs));
            all.extend(xs);
        }
        let merged = merge.finish();
        let whole = of(&all);
        assert_eq!(merged.count(), all.len() as u64);
        // The sketch merges exactly on counts: the same quantiles as one object's.
        assert_eq!(merged.sketch, whole.sketch);
        let qs = [0.0, 0.01, 0.5, 0.9, 0.99, 1.0];
        assert_eq!(merged.quantiles(&qs), whole.quantiles(&qs));
        let (m, w) = (merged.summary().unwrap(), whole.summary().unwrap());
        assert_eq!((m.min, m.max), (w.min, w.max));
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0);
        assert!(close(m.sum, w.sum), "{} {}", m.sum, w.sum);
        assert!(close(m.mean, w.mean), "{} {}", m.mean, w.mean);
        assert!(
            close(m.stddev, stddev(&all)),
            "{} {}",
            m.stddev,
            stddev(&all)
        );
    }

    /// Values near 1e9 with a spread of 1, spread over keys: the merged variance stays
    /// within 1e-6 relative of a two-pass computation.
    #[test]
    fn the_merged_variance_is_exact_for_large_values() {
        let mut rng = Rng(7);
        let mut all = Vec::new();
        let mut merge = KeysMerge::default();
        for _ in 0..50 {
            let xs: Vec<f64> = (0..40).map(|_| 1e9 + rng.uniform()).collect();
            merge.add(&of(&xs));
            all.extend(xs);
        }
        let got = merge.finish().summary().unwrap().stddev;
        let want = stddev(&all);
        assert!((got - want).abs() <= 1e-6 * want, "{got} {want}");
    }

    #[test]
    fn empty_windows_add_nothing() {
        let mut merge = KeysMerge::default();
        merge.add(&Record::default());
        assert_eq!(merge.finish().summary(), None);
        let mut merge = KeysMerge::default();
        merge.add(&Record::default());
        merge.add(&of(&[2.0, 4.0]));
        merge.add(&Record::default());
        assert_eq!(merge.finish(), of(&[2.0, 4.0]));
    }
}
