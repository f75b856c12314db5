//! One summary of several statistics objects (STATS.MGET, STATS.MQUANTILE): the union of
//! their windows' values, from their merged records. Moments merge exactly (Chan's
//! combination, so the variance stays exact) and sketches merge exactly on counts, so the
//! union is as accurate as one object that had every value added.
//!
//! Owns: merging the windows of several keys. May not touch: Redis (pure).

use std::collections::HashMap;

use super::window_cache::PackedRecord;
use super::Record;
use crate::moments::Moments;
use crate::sketch::DenseMerge;

/// The distinct names of `names` in the order they first appear, and for each name of
/// `names` the position of its distinct name: a read across keys opens and reads each
/// key once, then merges its window at every place it is named.
pub fn distinct_names<'a>(names: &[&'a [u8]]) -> (Vec<&'a [u8]>, Vec<usize>) {
    let mut distinct: Vec<&'a [u8]> = Vec::with_capacity(names.len());
    let mut seen: HashMap<&'a [u8], usize> = HashMap::with_capacity(names.len());
    let at = names
        .iter()
        .map(|&name| {
            *seen.entry(name).or_insert_with(|| {
                distinct.push(name);
                distinct.len() - 1
            })
        })
        .collect();
    (distinct, at)
}

/// Merges the windows of keys in the order given: the moments one after another (the
/// keys' order fixes their rounding, so every call over the same keys answers the same
/// bits), the sketches summed from their encodings into one dense store of bucket counts,
/// as a window's periods are merged, rather than a new store per key. Empty windows add
/// nothing.
#[derive(Default)]
pub struct KeysMerge {
    moments: Moments,
    dense: DenseMerge,
}

impl KeysMerge {
    /// Adds the window of the next key.
    pub fn add(&mut self, window: &PackedRecord) {
        if self.add_sketch(window, 1) {
            self.add_moments(window);
        }
    }

    /// Adds the sketch of a key's window `times` times (a key named that often), in one
    /// walk; false if it is empty or does not decode (never expected of a packed window),
    /// and then its moments must not be added either.
    pub fn add_sketch(&mut self, window: &PackedRecord, times: u64) -> bool {
        window.count() > 0
            && self
                .dense
                .add_encoded_times(&window.sketch, window.count(), times)
    }

    /// Adds the moments of the next key's window, whose sketch [`KeysMerge::add_sketch`]
    /// added: the moments merge in the order the keys are named (it fixes their rounding),
    /// the sketches in any order (their counts add exactly).
    pub fn add_moments(&mut self, window: &PackedRecord) {
        self.moments.merge(&window.moments);
    }

    /// The union of every window added.
    pub fn finish(self) -> Record {
        Record {
            moments: self.moments,
            sketch: self.dense.finish(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::model::tests::of;
    use crate::testutil::Rng;

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
        let mut windows = Vec::new();
        for key in 0..20 {
            let n = rng.below(200) as usize;
            let scale = 1.0 + key as f64 * 10.0;
            let xs: Vec<f64> = (0..n).map(|_| (rng.uniform() - 0.3) * scale).collect();
            windows.push(of(&xs));
            all.extend(xs);
        }
        let mut merge = KeysMerge::default();
        windows
            .iter()
            .for_each(|w| merge.add(&PackedRecord::pack(w)));
        let merged = merge.finish();
        // The same as merging the records one by one.
        let mut one_by_one = Record::default();
        windows.iter().for_each(|w| one_by_one.merge(w));
        assert_eq!(merged, one_by_one);
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
        let mut windows = Vec::new();
        for _ in 0..50 {
            let xs: Vec<f64> = (0..40).map(|_| 1e9 + rng.uniform()).collect();
            windows.push(of(&xs));
            all.extend(xs);
        }
        let mut merge = KeysMerge::default();
        windows
            .iter()
            .for_each(|w| merge.add(&PackedRecord::pack(w)));
        let got = merge.finish().summary().unwrap().stddev;
        let want = stddev(&all);
        assert!((got - want).abs() <= 1e-6 * want, "{got} {want}");
    }

    #[test]
    fn distinct_names_keep_the_first_order_and_map_every_name() {
        let names: [&[u8]; 6] = [b"b", b"a", b"b", b"c", b"a", b"b"];
        let (distinct, at) = distinct_names(&names);
        assert_eq!(distinct, vec![b"b".as_slice(), b"a", b"c"]);
        assert_eq!(at, vec![0, 1, 0, 2, 1, 0]);
        for (name, i) in names.iter().zip(&at) {
            assert_eq!(distinct[*i], *name);
        }
        assert_eq!(distinct_names(&[]), (Vec::<&[u8]>::new(), vec![]));
    }

    /// A key named twice counts twice: the merge over the distinct windows placed at
    /// every name is the merge of every name's window read on its own.
    #[test]
    fn a_repeated_window_counts_again() {
        let (a, b) = (of(&[1.0, 2.0, 3.0]), of(&[10.0, 20.0]));
        let names: [&[u8]; 4] = [b"a", b"b", b"a", b"a"];
        let (distinct, at) = distinct_names(&names);
        let windows = [&a, &b];
        assert_eq!(distinct.len(), 2);
        let mut once = KeysMerge::default();
        at.iter()
            .for_each(|&i| once.add(&PackedRecord::pack(windows[i])));
        let mut each = KeysMerge::default();
        [&a, &b, &a, &a]
            .into_iter()
            .for_each(|w| each.add(&PackedRecord::pack(w)));
        // Each distinct sketch once with its multiplicity, the moments at every name.
        let mut times = KeysMerge::default();
        let packed = [PackedRecord::pack(&a), PackedRecord::pack(&b)];
        assert!(times.add_sketch(&packed[0], 3) && times.add_sketch(&packed[1], 1));
        at.iter().for_each(|&i| times.add_moments(&packed[i]));
        let (once, each, times) = (once.finish(), each.finish(), times.finish());
        assert_eq!(once, each);
        assert_eq!(times, each);
        assert_eq!(once.count(), 11);
    }

    #[test]
    fn empty_windows_add_nothing() {
        let (empty, some) = (Record::default(), of(&[2.0, 4.0]));
        let (empty, some) = (PackedRecord::pack(&empty), PackedRecord::pack(&some));
        let mut merge = KeysMerge::default();
        merge.add(&empty);
        assert_eq!(merge.finish().summary(), None);
        let mut merge = KeysMerge::default();
        merge.add(&empty);
        merge.add(&some);
        merge.add(&empty);
        assert_eq!(PackedRecord::pack(&merge.finish()), some);
    }
}
