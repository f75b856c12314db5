//! Pure STATS logic: settings, period arithmetic, per-period records and their stored
//! form. No Redis imports; the command layer (`commands::stats`) reads and writes the
//! hash and uses this module for everything else.
//!
//! Layout of one statistics object in its hash:
//! * `_tally`: `stats <period> <keep>`, e.g. `stats 1h 24` (period in its canonical
//!   duration form). The family word comes first so the start-up scan and the expiry
//!   timer recognise the hash.
//! * `<period start ms>:m`: the period's moments in their 57-byte binary form
//!   ([`Moments::encode`]: tag byte 2, then count, sum, sum_comp, mean, m2, min and max as
//!   little-endian 64-bit words): no float is formatted or parsed per ADD. Periods written
//!   by earlier versions hold the text form `count sum sum_comp mean m2 min max`
//!   ([`Moments::encode_text`]); they are read as they are and rewritten in binary by the
//!   next ADD to the period.
//! * `<period start ms>:q`: the period's quantile sketch in its compact binary form
//!   (see [`Sketch::encode`]).
//!
//! A period is stored only once it has a value; both fields are always written together.
//! A period whose fields are missing, do not decode, or disagree on the count (a user's
//! `HSET`) counts as empty and is overwritten by the next write to it.
//!
//! Owns: stats arithmetic and its stored text. May not touch: Redis (pure).

use std::rc::Rc;

use crate::args::{format_duration, parse_duration, parse_i64, push_f64, MAX_DURATION_MS};
use crate::error::{Error, Result};
use crate::layout;
use crate::moments::Moments;
use crate::sketch::{rank_of, Sketch};
use crate::window::{first_kept, leaves_at, slot_index, slot_start};

mod across;
mod field;
mod report;
pub mod window_cache;

pub use across::{distinct_names, KeysMerge};
pub use field::{field, parse_field, FieldName, Part, MOMENTS_SUFFIX, SKETCH_SUFFIX};
pub use report::ReportStat;

/// Largest `KEEP` of a new object (the config `tally.stats-keep` has the same bound), and
/// the most periods one WINDOW merges. Why 2000: a read that finds no cached merge reads
/// and merges every period of its window, about 1 µs per period of typical data on this
/// kind of machine (Redis 7.0, 8.2 and Valkey 9 alike), and no command may hold the
/// server for 10 ms; 2000 periods leave room for a loaded machine and wider sketches.
/// A merge kept in the hash instead would go stale under a user's native edit of a period
/// (or its field TTL) with no cheap way to tell.
pub const MAX_KEEP: i64 = 2_000;
/// Largest `KEEP` a stored object may have: earlier versions created objects of up to
/// 10000 periods, and those keep working (their WINDOW is still limited to [`MAX_KEEP`]).
pub const MAX_STORED_KEEP: i64 = 10_000;
/// Largest accepted magnitude of a value. The moments square deviations, so values near
/// 1e154 would overflow to infinity and the stored period would no longer decode; with
/// 1e100 every intermediate stays finite even for 2^64 values.
pub const MAX_ABS_VALUE: f64 = 1e100;
/// Parses `KEEP n` of STATS.CREATE.
pub fn parse_keep(bytes: &[u8]) -> Result<i64> {
    let keep = parse_i64(bytes)?;
    if !(1..=MAX_KEEP).contains(&keep) {
        return Err(Error::Invalid(format!(
            "KEEP must be between 1 and {MAX_KEEP}"
        )));
    }
    Ok(keep)
}

/// Checks a value already parsed as a finite double against [`MAX_ABS_VALUE`].
pub fn check_value(v: f64) -> Result<f64> {
    if v.abs() > MAX_ABS_VALUE {
        return Err(Error::Invalid(
            "value is out of range (the limit is 1e100 in magnitude)".into(),
        ));
    }
    Ok(v)
}

/// Most values one STATS.CDF may ask about.
pub const MAX_CDF_VALUES: usize = 1000;

/// Checks the number of values of a STATS.CDF (1 to [`MAX_CDF_VALUES`]).
pub fn check_cdf_count(n: usize) -> Result<()> {
    if n > MAX_CDF_VALUES {
        return Err(Error::Invalid(format!(
            "too many values, at most {MAX_CDF_VALUES}"
        )));
    }
    if n == 0 {
        return Err(Error::NotFloat);
    }
    Ok(())
}

/// Checks a quantile argument (a finite double) is in `[0, 1]`.
pub fn check_quantile(q: f64) -> Result<f64> {
    if !(0.0..=1.0).contains(&q) {
        return Err(Error::Invalid("quantile must be between 0 and 1".into()));
    }
    Ok(q)
}

/// Period length and number of kept periods of one statistics object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settings {
    pub period: i64,
    pub keep: i64,
}

impl Settings {
    /// Validated settings of a new object: `period` positive, `keep` in `1..=MAX_KEEP`,
    /// and the kept span `period * keep` a duration (at most [`MAX_DURATION_MS`]).
    pub fn new(period: i64, keep: i64) -> Result<Settings> {
        Settings::checked(period, keep, MAX_KEEP)
    }

    /// [`Settings::new`] with `keep` up to `max_keep`.
    fn checked(period: i64, keep: i64, max_keep: i64) -> Result<Settings> {
        let span_fits = period
            .checked_mul(keep.max(1))
            .is_some_and(|span| span <= MAX_DURATION_MS);
        if period < 1 || !span_fits {
            return Err(Error::InvalidDuration(format_duration(period)));
        }
        if !(1..=max_keep).contains(&keep) {
            return Err(Error::Invalid(format!(
                "KEEP must be between 1 and {max_keep}"
            )));
        }
        Ok(Settings { period, keep })
    }

    /// The `_tally` field's value.
    pub fn marker(&self) -> String {
        let mut settings = format_duration(self.period);
        settings.push(' ');
        settings.push_str(&self.keep.to_string());
        layout::marker(layout::STATS, &settings)
    }

    /// Settings from a `_tally` value; `None` if it is not a valid stats marker. A stored
    /// object may keep up to [`MAX_STORED_KEEP`] periods.
    pub fn from_marker(marker: &[u8]) -> Option<Settings> {
        let mut words = layout::settings_of(marker, layout::STATS)?.split(' ');
        let period = parse_duration(words.next()?.as_bytes()).ok()?;
        let keep = parse_i64(words.next()?.as_bytes()).ok()?;
        if words.next().is_some() {
            return None;
        }
        Settings::checked(period, keep, MAX_STORED_KEEP).ok()
    }

    /// Index of the period containing `t`.
    pub fn index(&self, t: i64) -> i64 {
        slot_index(t, self.period)
    }

    /// Start (ms) of the period with index `index`.
    pub fn start(&self, index: i64) -> i64 {
        slot_start(index, self.period)
    }

    /// Index of the period a stored field's start designates; `None` if `start` is not
    /// the start of a period (not a field this object wrote).
    pub fn index_of_start(&self, start: i64) -> Option<i64> {
        let index = self.index(start);
        (self.start(index) == start).then_some(index)
    }

    /// Oldest kept period index at `now`: kept are `first_kept(now) ..= index(now)`.
    pub fn first_kept(&self, now: i64) -> i64 {
        first_kept(now, self.period, self.keep)
    }

    /// True if the period `index` is kept at `now` (not too old; a future period, which a
    /// primary never writes, is not kept either).
    pub fn is_kept(&self, index: i64, now: i64) -> bool {
        (self.first_kept(now)..=self.index(now)).contains(&index)
    }

    /// When period `index` stops being kept.
    pub fn leaves_at(&self, index: i64) -> i64 {
        leaves_at(index, self.period, self.keep)
    }

    /// The period a write at `ts` (already resolved against `now` and max-future) goes to.
    pub fn write_index(&self, ts: i64, now: i64) -> Result<i64> {
        let index = self.index(ts);
        if index < self.first_kept(now) {
            return Err(crate::error::outside_kept_range(ts));
        }
        Ok(index)
    }

    /// Number of periods a read covers: 1 without `WINDOW`, else `window / period`, which
    /// must be a whole number between 1 and `keep` (and at most [`MAX_KEEP`]: an object
    /// stored with more by an earlier version still merges no more per read).
    pub fn window_periods(&self, window: Option<i64>) -> Result<i64> {
        let Some(window) = window else {
            return Ok(1);
        };
        let periods = window / self.period;
        let most = self.keep.min(MAX_KEEP);
        if window % self.period != 0 || !(1..=most).contains(&periods) {
            return Err(Error::Invalid(format!(
                "WINDOW must be a multiple of the period ({}) of at most {most} periods",
                format_duration(self.period),
            )));
        }
        Ok(periods)
    }

    /// Period indices `(lo, hi)` of the latest `periods` periods at `now`.
    pub fn window_range(&self, now: i64, periods: i64) -> (i64, i64) {
        let hi = self.index(now);
        (hi.saturating_sub(periods.max(1)).saturating_add(1), hi)
    }

    /// Period indices `(lo, hi)` from the period containing `from` to the one containing
    /// `to`, clamped to what is kept at `now`; `None` when that is empty.
    pub fn range_bounds(&self, now: i64, from: Option<i64>, to: Option<i64>) -> Option<(i64, i64)> {
        let lo = from
            .map_or(i64::MIN, |f| self.index(f))
            .max(self.first_kept(now));
        let hi = to.map_or(i64::MAX, |t| self.index(t)).min(self.index(now));
        (lo <= hi).then_some((lo, hi))
    }
}

/// Merges stored periods `(moments, sketch)` as they are read, oldest first, without
/// decoding each sketch into its own stores or copying the fields; periods that do not
/// decode (or whose fields disagree on the count) are skipped, as [`Record::decode`]
/// would. The order fixes the rounding of the merged moments.
#[derive(Default)]
pub struct PeriodMerge {
    moments: Moments,
    dense: crate::sketch::DenseMerge,
}

impl PeriodMerge {
    /// Adds the next period, newer than those added so far.
    pub fn add(&mut self, moments: &[u8], sketch: &[u8]) {
        let Some(pm) = Moments::decode(moments) else {
            return;
        };
        if self.dense.add_encoded_if_count(sketch, pm.count) {
            self.moments.merge(&pm);
        }
    }

    /// The merged record.
    pub fn finish(self) -> Record {
        Record {
            moments: self.moments,
            sketch: self.dense.finish(),
        }
    }
}

/// The fields of a window's periods as a scan of the hash returns them (in no order), in
/// one buffer rather than an allocation per field, then merged oldest first by
/// [`PeriodMerge`]: the same record [`Record::merge_encoded`] makes of the periods in
/// order. Where a period has two fields of one part (names that parse alike), the one
/// scanned last counts, as with a map filled in scan order.
#[derive(Default)]
pub struct ScannedPeriods {
    bytes: Vec<u8>,
    /// Per field: its period, whether it is the sketch, and its value's range in `bytes`.
    fields: Vec<(i64, bool, usize, usize)>,
}

impl ScannedPeriods {
    /// Keeps the value of one field of period `index`.
    pub fn push(&mut self, index: i64, part: Part, value: &[u8]) {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(value);
        let sketch = part == Part::Sketch;
        self.fields.push((index, sketch, start, self.bytes.len()));
    }

    /// The merge of every period that has both fields, oldest first.
    pub fn merge(mut self) -> Record {
        // Stable: within one period and part, scan order is kept, and the last wins.
        self.fields
            .sort_by_key(|&(index, sketch, _, _)| (index, sketch));
        let mut merge = PeriodMerge::default();
        let value = |(_, _, start, end): (i64, bool, usize, usize)| self.bytes.get(start..end);
        let mut rest = self.fields.as_slice();
        while let Some(&(index, ..)) = rest.first() {
            let count = rest.iter().take_while(|f| f.0 == index).count();
            let (period, next) = rest.split_at(count.min(rest.len()));
            let last = |sketch: bool| period.iter().rev().find(|f| f.1 == sketch).copied();
            if let (Some(m), Some(q)) = (last(false).and_then(value), last(true).and_then(value)) {
                merge.add(m, q);
            }
            rest = next;
        }
        merge.finish()
    }
}

/// The statistics of one period (or of a merged window): exact moments plus the sketch.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Record {
    pub moments: Moments,
    pub sketch: Sketch,
}

pub use crate::shown::ShownSummary;

impl ShownSummary {
    /// A [`Summary`] as GET sends it: the count, then its doubles in reply order, each
    /// with its shortest text ([`push_f64`]). The read cache keeps it, so a repeated GET
    /// over RESP2 (doubles as text) does not format them again.
    pub fn new(s: &Summary) -> ShownSummary {
        ShownSummary {
            count: s.count,
            doubles: s.doubles().map(|(name, v)| {
                let mut text = String::new();
                push_f64(&mut text, v);
                (name, v, Rc::from(text))
            }),
        }
    }
}

/// What GET and RANGE report for a non-empty record.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Summary {
    pub count: u64,
    pub sum: f64,
    pub min: f64,
    pub max: f64,
    pub mean: f64,
    pub stddev: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
}

impl Summary {
    /// The doubles of the reply, named, in reply order (after the count).
    pub fn doubles(&self) -> [(&'static str, f64); 8] {
        [
            ("sum", self.sum),
            ("min", self.min),
            ("max", self.max),
            ("mean", self.mean),
            ("stddev", self.stddev),
            ("p50", self.p50),
            ("p90", self.p90),
            ("p99", self.p99),
        ]
    }
}

impl Record {
    /// Adds one finite value.
    pub fn add(&mut self, v: f64) {
        self.moments.add(v);
        self.sketch.add(v);
    }

    /// Merges another record (another period) into this one.
    pub fn merge(&mut self, other: &Record) {
        self.moments.merge(&other.moments);
        self.sketch.merge(&other.sketch);
    }

    /// Merges the records of a window, oldest first (the order fixes the rounding of
    /// the merged moments, so every reader gets the same bits).
    pub fn merge_all(records: &[Record]) -> Record {
        let mut moments = Moments::new();
        for r in records {
            moments.merge(&r.moments);
        }
        let sketch = Sketch::merge_all(records.iter().map(|r| &r.sketch));
        Record { moments, sketch }
    }

    pub fn count(&self) -> u64 {
        self.moments.count
    }

    /// The values of the `:m` and `:q` fields.
    pub fn encode(&self) -> (Vec<u8>, Vec<u8>) {
        (self.moments.encode().to_vec(), self.sketch.encode())
    }

    /// Adds `values` to the stored period `(moments, sketch)` and returns the new
    /// moments and writes the new sketch encoding to `sketch_out`, without decoding the
    /// sketch when there are few values (each is spliced into the encoded buckets).
    /// `None` when the stored fields do not form a valid record (same rule as
    /// [`Record::decode`]).
    pub fn add_encoded(
        moments: &[u8],
        sketch: &[u8],
        values: &[f64],
        sketch_out: &mut Vec<u8>,
    ) -> Option<Moments> {
        /// Beyond this many values, one decode and encode is cheaper than splicing each.
        const SPLICE_MAX: usize = 8;
        let mut m = Moments::decode(moments)?;
        if values.len() > SPLICE_MAX {
            let mut record = Record::decode(moments, sketch)?;
            for &v in values {
                record.add(v);
            }
            *sketch_out = record.sketch.encode();
            return Some(record.moments);
        }
        let mut scratch = Vec::new();
        let mut current: &[u8] = sketch;
        let mut first = true;
        for &v in values {
            let before = crate::sketch::add_to_encoded(current, v, 1, sketch_out)?;
            if first && before != m.count {
                return None;
            }
            first = false;
            m.add(v);
            std::mem::swap(&mut scratch, sketch_out);
            current = &scratch;
        }
        if first {
            // No values: only validate.
            Record::decode(moments, sketch)?;
            *sketch_out = sketch.to_vec();
        } else {
            std::mem::swap(&mut scratch, sketch_out);
        }
        Some(m)
    }

    /// Merges the stored periods `(moments, sketch)` of a window, oldest first (see
    /// [`PeriodMerge`]).
    pub fn merge_encoded<'a>(periods: impl IntoIterator<Item = (&'a [u8], &'a [u8])>) -> Record {
        let mut merge = PeriodMerge::default();
        for (m, q) in periods {
            merge.add(m, q);
        }
        merge.finish()
    }

    /// Merges one more stored period, newer than those merged so far: the result is
    /// the same as [`Record::merge_encoded`] of them all (same validity rule, same
    /// order of the moments), so a window can be built on a merge of its closed periods.
    pub fn merge_encoded_period(&mut self, moments: &[u8], sketch: &[u8]) {
        let Some(pm) = Moments::decode(moments) else {
            return;
        };
        let mut dense = crate::sketch::DenseMerge::default();
        if !dense.add_encoded_if_count(sketch, pm.count) {
            return;
        }
        self.moments.merge(&pm);
        self.sketch.merge(&dense.finish());
    }

    /// Rebuilds a record from its two fields; `None` unless both decode and agree on the
    /// number of values.
    pub fn decode(moments: &[u8], sketch: &[u8]) -> Option<Record> {
        let moments = Moments::decode(moments)?;
        let sketch = Sketch::decode(sketch)?;
        (moments.count == sketch.count()).then_some(Record { moments, sketch })
    }

    /// Quantile `q` in `[0, 1]` (nearest rank, within 1% relative); `None` when empty.
    /// The exact min and max are known, so rank 1 and rank n are reported exactly and
    /// every other estimate is clamped to `[min, max]` (which only moves it closer).
    pub fn quantile(&self, q: f64) -> Option<f64> {
        let estimate = self.sketch.quantile(q)?;
        Some(self.refine(q, estimate))
    }

    /// [`Record::quantile`] of every fraction of `qs`, in their order, with one walk
    /// of the sketch (STATS.QUANTILE may ask thousands).
    pub fn quantiles(&self, qs: &[f64]) -> Vec<Option<f64>> {
        self.sketch
            .quantiles(qs)
            .into_iter()
            .zip(qs)
            .map(|(estimate, &q)| estimate.map(|e| self.refine(q, e)))
            .collect()
    }

    /// The share of the values at or below each of `xs`, in their order (one walk of the
    /// sketch): exactly 0 below the exact min and 1 at or above the exact max, otherwise
    /// the sketch's count (within 1% of the value, see `Sketch::counts_at_or_below`) over
    /// the total. `None` when empty.
    pub fn cdf(&self, xs: &[f64]) -> Option<Vec<f64>> {
        let n = self.sketch.count();
        if n == 0 || self.moments.count == 0 {
            return None;
        }
        let (min, max) = (self.moments.min, self.moments.max);
        let counts = self.sketch.counts_at_or_below(xs);
        Some(
            xs.iter()
                .zip(counts)
                .map(|(&x, below)| {
                    if x < min {
                        0.0
                    } else if x >= max {
                        1.0
                    } else {
                        (below as f64 / n as f64).clamp(0.0, 1.0)
                    }
                })
                .collect(),
        )
    }

    /// The sketch's estimate for `q`, made exact at rank 1 and rank n and clamped to
    /// the exact extremes.
    fn refine(&self, q: f64, estimate: f64) -> f64 {
        let (min, max) = (self.moments.min, self.moments.max);
        let n = self.moments.count;
        let rank = rank_of(q, n);
        if rank == 1 {
            min
        } else if rank == n {
            max
        } else {
            estimate.clamp(min, max)
        }
    }

    /// The reported statistics; `None` for an empty record.
    pub fn summary(&self) -> Option<Summary> {
        let m = &self.moments;
        if m.count == 0 {
            return None;
        }
        // One walk of the sketch for the three fractions.
        let [p50, p90, p99] = match self.quantiles(&[0.5, 0.9, 0.99])[..] {
            [a, b, c] => [a, b, c],
            _ => return None,
        };
        Some(Summary {
            count: m.count,
            sum: m.sum(),
            min: m.min,
            max: m.max,
            mean: m.mean,
            stddev: m.stddev(),
            p50: p50?,
            p90: p90?,
            p99: p99?,
        })
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod timing;
