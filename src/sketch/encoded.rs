//! Work on a sketch in its encoded form, without building its stores: adding a value by
//! editing the bytes of one bucket ([`add_to_encoded`]), and summing many encoded
//! sketches into one dense array ([`DenseMerge`]) for a window of periods.
//!
//! Owns: byte-level edits and merges of the encoding defined in the parent module. May
//! not touch: Redis (pure).

use super::*;

/// Where [`add_to_encoded`] puts a value, found by one validating walk.
enum Spot {
    /// The zero count, ending at this byte.
    Zero { end: usize },
    /// An existing bucket whose count varint spans `start..end`.
    Bucket {
        count: u64,
        start: usize,
        end: usize,
    },
    /// A new bucket in a store of `len` buckets whose length varint spans
    /// `len_start..len_end`, inserted at byte `at` after index `prev`; `next` is the
    /// index and the end of the delta varint of the bucket that follows, if any.
    New {
        len: u64,
        len_start: usize,
        len_end: usize,
        at: usize,
        prev: i64,
        next: Option<(i64, usize)>,
    },
}

/// Adds `v` (finite) with multiplicity `n > 0` to the encoded sketch `bytes`, writing
/// the new encoding to `out` (cleared first): the same bytes as decode, `add_n`,
/// encode, without building the stores (a STATS.ADD of one value touches one bucket).
/// Returns the count of the sketch *before* the add; `None` (and `out` unspecified) if
/// `bytes` is not a valid encoding.
pub fn add_to_encoded(bytes: &[u8], v: f64, n: u64, out: &mut Vec<u8>) -> Option<u64> {
    if n == 0 || !v.is_finite() {
        return None;
    }
    let target = (v.abs() >= ZERO_THRESHOLD).then(|| (v < 0.0, index_of(v.abs())));
    let mut r = Reader { bytes, pos: 0 };
    if r.byte()? != VERSION {
        return None;
    }
    let zero = r.varint()?;
    let mut spot = Spot::Zero { end: r.pos };
    let mut total = zero;
    for negative in [true, false] {
        let len_start = r.pos;
        let len = r.varint()?;
        let len_end = r.pos;
        let wanted = target
            .filter(|&(neg, _)| neg == negative)
            .map(|(_, i)| i64::from(i));
        let mut found = false;
        let mut last = 0i64;
        total = total.saturating_add(walk_store(
            &mut r,
            len,
            |index, count, delta_start, delta_end, count_start, count_end| {
                if let (Some(want), false) = (wanted, found) {
                    if index == want {
                        spot = Spot::Bucket {
                            count,
                            start: count_start,
                            end: count_end,
                        };
                        found = true;
                    } else if index > want {
                        spot = Spot::New {
                            len,
                            len_start,
                            len_end,
                            at: delta_start,
                            prev: last,
                            next: Some((index, delta_end)),
                        };
                        found = true;
                    }
                }
                last = index;
            },
        )?);
        if let (Some(_), false) = (wanted, found) {
            spot = Spot::New {
                len,
                len_start,
                len_end,
                at: r.pos,
                prev: last,
                next: None,
            };
        }
    }
    if r.pos != bytes.len() {
        return None;
    }
    out.clear();
    match (spot, target) {
        (Spot::Zero { end }, None) => {
            out.push(VERSION);
            put_varint(out, zero.saturating_add(n));
            out.extend_from_slice(bytes.get(end..)?);
        }
        (Spot::Bucket { count, start, end }, Some(_)) => {
            out.extend_from_slice(bytes.get(..start)?);
            put_varint(out, count.saturating_add(n));
            out.extend_from_slice(bytes.get(end..)?);
        }
        (
            Spot::New {
                len,
                len_start,
                len_end,
                at,
                prev,
                next,
            },
            Some((_, index)),
        ) => {
            let index = i64::from(index);
            out.extend_from_slice(bytes.get(..len_start)?);
            put_varint(out, len.checked_add(1)?);
            out.extend_from_slice(bytes.get(len_end..at)?);
            put_varint(out, zigzag(index - prev));
            put_varint(out, n);
            match next {
                Some((next_index, delta_end)) => {
                    put_varint(out, zigzag(next_index - index));
                    out.extend_from_slice(bytes.get(delta_end..)?);
                }
                None => out.extend_from_slice(bytes.get(at..)?),
            }
        }
        _ => return None,
    }
    Some(total)
}

/// Walks the `len` buckets of an encoded store with the same checks as decoding,
/// calling `f(index, count, delta_start, delta_end, count_start, count_end)` for each
/// (byte offsets into the encoding). Returns the sum of the counts (saturating).
pub(super) fn walk_store(
    r: &mut Reader,
    len: u64,
    mut f: impl FnMut(i64, u64, usize, usize, usize, usize),
) -> Option<u64> {
    if len > MAX_BUCKETS {
        return None;
    }
    let mut prev: i64 = 0;
    let mut total: u64 = 0;
    for k in 0..len {
        let delta_start = r.pos;
        let delta = unzigzag(r.varint()?);
        // Strictly increasing indices: no duplicates, canonical order.
        if k > 0 && delta < 1 {
            return None;
        }
        let index = prev.checked_add(delta)?;
        if !(i64::from(MIN_INDEX)..=i64::from(MAX_INDEX)).contains(&index) {
            return None;
        }
        let delta_end = r.pos;
        let count = r.varint()?;
        if count == 0 {
            return None;
        }
        f(index, count, delta_start, delta_end, delta_end, r.pos);
        total = total.saturating_add(count);
        prev = index;
    }
    Some(total)
}

/// Summed counts of many encoded sketches over a dense index range that grows as
/// needed, so the periods of a window merge without building a store per period.
#[derive(Default)]
pub struct DenseMerge {
    zero: u64,
    /// Per sign (negative, positive): lowest index held and the counts from it.
    stores: [(i32, Vec<u64>); 2],
}

impl DenseMerge {
    /// Adds an encoded sketch if it is valid and holds `count` values (the period's
    /// moments say how many); true if it was added, false (adding nothing) otherwise.
    pub fn add_encoded_if_count(&mut self, bytes: &[u8], count: u64) -> bool {
        self.try_add(bytes, count, 1).is_some()
    }

    /// [`DenseMerge::add_encoded_if_count`] of the same sketch `times` times, in one walk
    /// (each count multiplied): a key named several times in a read across keys.
    pub fn add_encoded_times(&mut self, bytes: &[u8], count: u64, times: u64) -> bool {
        self.try_add(bytes, count, times).is_some()
    }

    fn try_add(&mut self, bytes: &[u8], count: u64, times: u64) -> Option<()> {
        // Validate first, so a damaged sketch adds nothing.
        let mut r = Reader { bytes, pos: 0 };
        if r.byte()? != VERSION {
            return None;
        }
        let zero = r.varint()?;
        let mut spans = [(0i64, 0i64, 0u64); 2];
        let mut total = zero;
        for span in &mut spans {
            let len = r.varint()?;
            let (mut lo, mut hi) = (i64::MAX, i64::MIN);
            total = total.saturating_add(walk_store(&mut r, len, |i, _, _, _, _, _| {
                lo = lo.min(i);
                hi = hi.max(i);
            })?);
            *span = (lo, hi, len);
        }
        if r.pos != bytes.len() || total != count {
            return None;
        }
        self.zero = self.zero.saturating_add(zero.saturating_mul(times));
        // Second pass: the encoding is valid, so only the counts are read.
        let mut r = Reader { bytes, pos: 1 };
        r.varint()?;
        for (store, &(lo, hi, len)) in self.stores.iter_mut().zip(&spans) {
            r.varint()?;
            if len > 0 {
                grow(store, lo, hi);
            }
            let (base, counts) = store;
            walk_store(&mut r, len, |i, c, _, _, _, _| {
                let offset = usize::try_from(i - i64::from(*base)).unwrap_or(usize::MAX);
                if let Some(slot) = counts.get_mut(offset) {
                    *slot = slot.saturating_add(c.saturating_mul(times));
                }
            })?;
        }
        Some(())
    }

    /// The merged sketch.
    pub fn finish(self) -> Sketch {
        let [neg, pos] = self.stores.map(|(base, counts)| {
            counts
                .into_iter()
                .zip(base..)
                .filter(|&(c, _)| c > 0)
                .map(|(c, i)| (i, c))
                .collect()
        });
        Sketch {
            zero: self.zero,
            pos,
            neg,
        }
    }
}

/// Makes `store` span at least `lo..=hi` (indices already validated to be in range).
fn grow(store: &mut (i32, Vec<u64>), lo: i64, hi: i64) {
    let (Ok(lo), Ok(hi)) = (i32::try_from(lo), i32::try_from(hi)) else {
        return;
    };
    let (base, counts) = store;
    if counts.is_empty() {
        *base = lo;
        counts.resize(
            usize::try_from(i64::from(hi) - i64::from(lo) + 1).unwrap_or(0),
            0,
        );
        return;
    }
    if lo < *base {
        let extra = usize::try_from(i64::from(*base) - i64::from(lo)).unwrap_or(0);
        counts.splice(0..0, std::iter::repeat_n(0, extra));
        *base = lo;
    }
    let top = i64::from(*base) + counts.len() as i64 - 1;
    if i64::from(hi) > top {
        let extra = usize::try_from(i64::from(hi) - top).unwrap_or(0);
        counts.resize(counts.len() + extra, 0);
    }
}
