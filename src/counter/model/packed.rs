//! The packed run: the layout old slots of a counter are packed into, so that a counter
//! can keep a million samples. One hash field holds [`RUN`] consecutive slots of one
//! resolution: how many are non-zero, their total, and the counts. This file is the codec
//! (pure, no Redis) and nothing calls it yet: which runs get packed, and when, belongs to
//! the command layer.
//!
//! **Field name**: `<res>:p<first index>`, e.g. `1m:p29917440` for the 240 minutes from
//! minute 29917440. `first` is a multiple of the run's length, so the field that holds slot
//! `i` is found by arithmetic ([`run_first`]) and an `AT` into an old slot probes one
//! field. The `p` keeps the name apart from every other field: a slot field's index is
//! decimal digits (an optional `-`), so [`super::parse_slot_field`] refuses `1m:p…` and
//! [`parse_packed_field`] refuses `1m:…`; settings fields start with `_`. In a sorted
//! listing a resolution's packed fields follow its slot fields (`p` sorts after the digits).
//!
//! **Value**: a tag byte, then LEB128 numbers (7 bits a byte, low group first, the high
//! bit set on every byte but a number's last):
//! * tag: `d` dense (every slot's count, zeros included), `s` sparse (`gap, count` pairs
//!   of the non-zero slots, `gap` the slots skipped since the previous pair), `c` constant
//!   (one count that every slot holds). In a lower-case run a count or total is a plain
//!   number, and a negative one is the bytes `80 00` (a two-byte zero, which no encoder
//!   writes for 0) followed by its magnitude. An upper-case tag (`D`, `S`, `C`) writes
//!   counts and total zigzag-encoded instead (`0, -1, 1, -2, …` as `0, 1, 2, 3, …`);
//! * `run`: the number of slots the field covers ([`RUN`]);
//! * `stored`: how many of them are non-zero (the counter's `slots` without decoding);
//! * `total`: the sum of the counts (a whole field inside a window is summed from here);
//! * the body, as the tag says.
//!
//! The encoder writes the shortest of the shapes and number forms.
//!
//! **Why this layout** (measured by `packed/measured.rs`, a year of minutes, each field
//! costing its value's jemalloc class plus 50 B of field name and entry; figures in bytes a
//! sample):
//! * plain LEB128 keeps every count below 16,384 in 2 bytes: counts 16,000 .. 16,383 cost
//!   2.34 where zigzag for every run costs 3.41, as it puts 8,192 .. 16,383 in 3 bytes.
//!   Negative counts are rare (a negative increment) and pay 2 bytes more each in a plain
//!   run; a run of many (random -5,000 .. 5,000) is written zigzag, 2.34 where escapes
//!   would cost 3.41. Fixed 2-byte counts with an escape cost the same on random 1..5000
//!   (2.34), more with 2% of large or negative counts (2.88 against 2.84), twice as much
//!   on small counts, and 6.69 on signed ones;
//! * 240 slots a run: 240 counts below 16,384 and the header are at most 495 bytes with the
//!   value's sds header, inside the 512-byte class. 256 slots (the power of two) spill into
//!   the 640-byte class: 2.69 on random counts 1..5000 against 2.34 at 240. 64 slots pay
//!   the 50 B a field four times as often (3.28), 128 spill to 320 (2.89). 480 saves 0.1
//!   and doubles what an `AT` rewrites and a window's edges decode. 240 also divides a day
//!   of seconds and of minutes, so each UTC day of them begins a run;
//! * fixed, aligned runs rather than runs grown to fill a size class: a variable run fills
//!   its class better (2.26 on random 1..5000) but then the field holding a slot is found
//!   only by searching, and an `AT` into the past is no longer one field;
//! * sparse pairs for runs that are mostly zero (1 slot in 10 written: 0.58 a slot, where a
//!   dense run costs 1.54 and one field a slot 5-6), and the constant tag for runs of one
//!   repeated count (0.28, RedisTimeSeries's 0.26-0.45).
//!
//! On one run of 240 random counts (release build, a loaded 2-core machine) a whole decode
//! takes about 3 us, the sum of part of it 2 us, an `AT` (decode, change, encode) 7 us, and
//! the total from the header tens of ns: a window's whole fields cost a header each.
//!
//! Untrusted bytes (a user's `HSET` into a packed field) decode to an error, never a panic:
//! every length and number is checked, and the header must agree with the counts
//! ([`validate`]). Reads that stop early ([`total`], [`range_sum`]) check what they read.
//!
//! Owns: the packed field's name and value. May not touch: Redis (pure).

use crate::args::{parse_duration, parse_i64, push_duration_bytes, push_i64};
use crate::error::{Error, Result};

/// Slots a packed field covers (see the module comment for why 240).
pub const RUN: i64 = 240;

/// The longest run a stored header may claim: a decoder allocates at most this many counts
/// for untrusted bytes.
pub const MAX_RUN: i64 = 4096;

/// The shape of a packed value's body, from its tag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// Every slot's count, zeros included.
    Dense,
    /// `gap, count` pairs of the non-zero slots.
    Sparse,
    /// One count every slot holds.
    Constant,
}

/// A packed value's header: what can be known without reading the counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub shape: Shape,
    /// Total and counts are zigzag-encoded (an upper-case tag).
    pub zigzag: bool,
    /// Slots the field covers.
    pub run: i64,
    /// Non-zero slots among them.
    pub stored: i64,
    /// Sum of the counts.
    pub total: i64,
    /// Where the body starts.
    body: usize,
}

/// The result of changing one slot of a packed run.
#[derive(Debug, PartialEq, Eq)]
pub struct Edit {
    /// The slot's new count.
    pub count: i64,
    /// The field's new value; `None` when no slot of the run is left non-zero (the field is
    /// removed, as a slot whose count becomes 0 is).
    pub value: Option<Vec<u8>>,
}

/// The first index of the [`RUN`] that holds slot `index`; `None` below the first whole run
/// of `i64` (no slot is ever there).
pub fn run_first(index: i64) -> Option<i64> {
    index.div_euclid(RUN).checked_mul(RUN)
}

/// Name of the packed field of resolution `res_ms` whose run starts at slot `first`.
pub fn packed_field(res_ms: i64, first: i64) -> Vec<u8> {
    let mut field = Vec::with_capacity(24);
    push_packed_field(&mut field, res_ms, first);
    field
}

/// Appends the name of a packed field (see [`packed_field`]).
pub fn push_packed_field(out: &mut Vec<u8>, res_ms: i64, first: i64) {
    push_duration_bytes(out, res_ms);
    out.extend_from_slice(b":p");
    push_i64(out, first);
}

/// Inverse of [`packed_field`]: `(res_ms, first index)`, or `None` for any other field.
pub fn parse_packed_field(field: &[u8]) -> Option<(i64, i64)> {
    let colon = field.iter().position(|&b| b == b':')?;
    let (res, rest) = field.split_at(colon);
    let first = rest.strip_prefix(b":p")?;
    Some((parse_duration(res).ok()?, parse_i64(first).ok()?))
}

#[cold]
fn corrupt(what: &str) -> Error {
    Error::Invalid(format!("packed slot field is not valid: {what}"))
}

#[cold]
fn outside_run() -> Error {
    Error::Invalid("slot index outside the packed run".to_string())
}

fn zigzag(n: i64) -> u64 {
    ((n << 1) ^ (n >> 63)) as u64
}

fn unzigzag(u: u64) -> i64 {
    ((u >> 1) as i64) ^ -((u & 1) as i64)
}

/// Bytes of `u` as LEB128.
fn varint_len(u: u64) -> usize {
    let bits = 64 - u.leading_zeros() as usize;
    bits.div_ceil(7).max(1)
}

fn push_varint(out: &mut Vec<u8>, mut u: u64) {
    while u >= 0x80 {
        out.push((u as u8 & 0x7f) | 0x80);
        u >>= 7;
    }
    out.push(u as u8);
}

/// The two bytes that open a negative number in a plain run: LEB128's two-byte zero, which
/// no encoder writes for 0.
const NEGATIVE: [u8; 2] = [0x80, 0x00];

/// Bytes of a count or total as a run writes it: zigzag, or plain with a negative number
/// written as [`NEGATIVE`] and its magnitude.
fn number_len(zigzag_run: bool, n: i64) -> usize {
    match (zigzag_run, n < 0) {
        (true, _) => varint_len(zigzag(n)),
        (false, false) => varint_len(n as u64),
        (false, true) => NEGATIVE.len() + varint_len(n.unsigned_abs()),
    }
}

fn push_number(out: &mut Vec<u8>, zigzag_run: bool, n: i64) {
    match (zigzag_run, n < 0) {
        (true, _) => push_varint(out, zigzag(n)),
        (false, false) => push_varint(out, n as u64),
        (false, true) => {
            out.extend_from_slice(&NEGATIVE);
            push_varint(out, n.unsigned_abs());
        }
    }
}

struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    fn varint(&mut self) -> Result<u64> {
        // Most numbers of a run are one byte (zeros, small counts, gaps).
        if let Some(&byte) = self.bytes.get(self.at) {
            if byte < 0x80 {
                self.at += 1;
                return Ok(u64::from(byte));
            }
        }
        let mut value = 0u64;
        let mut shift = 0u32;
        while shift < 64 {
            let byte = *self
                .bytes
                .get(self.at)
                .ok_or_else(|| corrupt("it ends inside a number"))?;
            self.at += 1;
            let low = u64::from(byte & 0x7f);
            // The tenth byte holds bit 63 alone.
            if shift == 63 && low > 1 {
                return Err(corrupt("a number exceeds 64 bits"));
            }
            value |= low << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
            shift += 7;
        }
        Err(corrupt("a number exceeds 64 bits"))
    }

    fn number(&mut self, zigzag_run: bool) -> Result<i64> {
        if zigzag_run {
            return Ok(unzigzag(self.varint()?));
        }
        let negative = self.bytes.get(self.at..self.at + 2) == Some(&NEGATIVE[..]);
        if negative {
            self.at += NEGATIVE.len();
            let magnitude = self.varint()?;
            // 1 ..= 2^63: down to i64::MIN; "negative zero" is refused.
            return (magnitude.checked_sub(1))
                .and_then(|below| i64::try_from(below).ok())
                .map(|below| -below - 1)
                .ok_or_else(|| corrupt("a negative number out of range"));
        }
        i64::try_from(self.varint()?).map_err(|_| corrupt("a number exceeds 64-bit signed"))
    }

    fn at_end(&self) -> bool {
        self.at >= self.bytes.len()
    }
}

/// Reads the header of a packed value (the counts are not read: see [`validate`]).
pub fn header(bytes: &[u8]) -> Result<Header> {
    let tag = *bytes.first().ok_or_else(|| corrupt("it is empty"))?;
    let (shape, zigzag) = match tag {
        b'd' => (Shape::Dense, false),
        b'D' => (Shape::Dense, true),
        b's' => (Shape::Sparse, false),
        b'S' => (Shape::Sparse, true),
        b'c' => (Shape::Constant, false),
        b'C' => (Shape::Constant, true),
        _ => return Err(corrupt("unknown tag")),
    };
    let mut cursor = Cursor { bytes, at: 1 };
    let run = cursor.varint()?;
    if run == 0 || run > MAX_RUN as u64 {
        return Err(corrupt("run length out of range"));
    }
    let stored = cursor.varint()?;
    if stored > run {
        return Err(corrupt("more stored slots than the run has"));
    }
    let total = cursor.number(zigzag)?;
    Ok(Header {
        shape,
        zigzag,
        run: run as i64,
        stored: stored as i64,
        total,
        body: cursor.at,
    })
}

/// The run's total from its header alone.
pub fn total(bytes: &[u8]) -> Result<i64> {
    header(bytes).map(|h| h.total)
}

/// Calls `f(offset, count)` for each non-zero slot at offsets `0 ..= last`, in order. When
/// `last` reaches the end of the run it reads the whole body and checks nothing follows.
fn walk(bytes: &[u8], h: &Header, last: i64, mut f: impl FnMut(i64, i64)) -> Result<()> {
    let mut cursor = Cursor { bytes, at: h.body };
    let whole = last >= h.run - 1;
    let last = last.min(h.run - 1);
    match h.shape {
        Shape::Dense => {
            for offset in 0..=last {
                let count = cursor.number(h.zigzag)?;
                if count != 0 {
                    f(offset, count);
                }
            }
        }
        Shape::Sparse => {
            let mut next = 0i64;
            while !cursor.at_end() {
                let gap = cursor.varint()?;
                let offset = i64::try_from(gap)
                    .ok()
                    .and_then(|gap| next.checked_add(gap))
                    .filter(|&offset| offset < h.run)
                    .ok_or_else(|| corrupt("a slot beyond the run"))?;
                let count = cursor.number(h.zigzag)?;
                if count == 0 {
                    return Err(corrupt("a sparse run lists a zero count"));
                }
                if offset > last {
                    break;
                }
                f(offset, count);
                next = offset + 1;
            }
        }
        Shape::Constant => {
            let count = cursor.number(h.zigzag)?;
            if count == 0 {
                return Err(corrupt("a constant run of zeros"));
            }
            for offset in 0..=last {
                f(offset, count);
            }
        }
    }
    if whole && !cursor.at_end() {
        return Err(corrupt("bytes after the counts"));
    }
    Ok(())
}

/// Checks a whole packed value of the run starting at `first`: its header, every count,
/// nothing after them, the header's `stored` and `total` against the counts, and `first`
/// aligned to the run. Everything else here that reads every count validates first.
pub fn validate(first: i64, bytes: &[u8]) -> Result<Header> {
    checked(first, bytes, |_, _| {})
}

/// [`validate`], calling `f(offset, count)` for each non-zero slot on the way (what it
/// gathers is used only when the value validates).
fn checked(first: i64, bytes: &[u8], mut f: impl FnMut(i64, i64)) -> Result<Header> {
    let h = header(bytes)?;
    if first.rem_euclid(h.run) != 0 || first.checked_add(h.run - 1).is_none() {
        return Err(corrupt("the field's first index does not start a run"));
    }
    // At most MAX_RUN counts: their sum cannot leave i128.
    let (mut stored, mut total) = (0i64, 0i128);
    walk(bytes, &h, h.run - 1, |offset, count| {
        stored += 1;
        total += i128::from(count);
        f(offset, count);
    })?;
    if total != i128::from(h.total) {
        return Err(corrupt("the total disagrees with the counts"));
    }
    if stored != h.stored {
        return Err(corrupt("the stored slots disagree with the counts"));
    }
    Ok(h)
}

/// Every slot's count, zeros included, of a validated value.
fn counts(first: i64, bytes: &[u8]) -> Result<Vec<i64>> {
    let run = header(bytes)?.run;
    let mut counts = vec![0i64; run as usize];
    checked(first, bytes, |offset, count| {
        if let Some(slot) = counts.get_mut(offset as usize) {
            *slot = count;
        }
    })?;
    Ok(counts)
}

/// The non-zero slots of the run starting at `first`, as `(index, count)`, oldest first.
pub fn decode(first: i64, bytes: &[u8]) -> Result<Vec<(i64, i64)>> {
    let stored = header(bytes)?.stored;
    let mut out = Vec::with_capacity(stored as usize);
    // `checked` refuses a run that ends past i64::MAX before `out` is used.
    checked(first, bytes, |offset, count| {
        out.push((first.wrapping_add(offset), count))
    })?;
    Ok(out)
}

/// The sum of the slots `lo ..= hi` of the run starting at `first`: the header's total when
/// the range covers the whole run, otherwise the counts read up to `hi` (and no further).
pub fn range_sum(first: i64, bytes: &[u8], lo: i64, hi: i64) -> Result<i128> {
    let h = header(bytes)?;
    if first.rem_euclid(h.run) != 0 || first.checked_add(h.run - 1).is_none() {
        return Err(corrupt("the field's first index does not start a run"));
    }
    let from = i128::from(lo).max(i128::from(first)) - i128::from(first);
    let to = i128::from(hi).min(i128::from(first) + i128::from(h.run) - 1) - i128::from(first);
    if from > to {
        return Ok(0);
    }
    if from == 0 && to == i128::from(h.run) - 1 {
        return Ok(i128::from(h.total));
    }
    // Both lie in 0 .. run here.
    let (from, to) = (from as i64, to as i64);
    let mut sum = 0i128;
    walk(bytes, &h, to, |offset, count| {
        if offset >= from {
            sum += i128::from(count);
        }
    })?;
    Ok(sum)
}

/// Encodes the run of `run` slots starting at `first` from its non-zero `(index, count)`
/// slots, in any order (zero counts are skipped). Refuses an index outside the run or
/// listed twice, and a total beyond `i64` ([`Error::Overflow`]).
pub fn encode(first: i64, run: i64, slots: &[(i64, i64)]) -> Result<Vec<u8>> {
    if !(1..=MAX_RUN).contains(&run) {
        return Err(Error::Invalid("packed run length out of range".to_string()));
    }
    if first.rem_euclid(run) != 0 || first.checked_add(run - 1).is_none() {
        return Err(outside_run());
    }
    let mut counts = vec![0i64; run as usize];
    for &(index, count) in slots {
        let offset = index
            .checked_sub(first)
            .filter(|offset| (0..run).contains(offset))
            .ok_or_else(outside_run)?;
        let slot = counts.get_mut(offset as usize).ok_or_else(outside_run)?;
        if *slot != 0 {
            return Err(Error::Invalid("a slot listed twice".to_string()));
        }
        *slot = count;
    }
    encode_counts(&counts)
}

/// Encodes every slot's count (zeros included) in the shortest of the three shapes.
fn encode_counts(counts: &[i64]) -> Result<Vec<u8>> {
    // The counts may pass beyond i64 on the way to a total that fits.
    let total = counts.iter().map(|&count| i128::from(count)).sum::<i128>();
    let total = i64::try_from(total).map_err(|_| Error::Overflow)?;
    let stored = counts.iter().filter(|&&count| count != 0).count();
    let run = counts.len();
    let first = counts.first().copied().unwrap_or(0);
    let constant = first != 0 && counts.iter().all(|&count| count == first);
    // Zigzag is shorter only for some runs with a negative count (see the module comment).
    let modes: &[bool] = if counts.iter().any(|&count| count < 0) {
        &[false, true]
    } else {
        &[false]
    };
    let mut best = (usize::MAX, Shape::Dense, false);
    for &zigzag_run in modes {
        let head =
            1 + varint_len(run as u64) + varint_len(stored as u64) + number_len(zigzag_run, total);
        let dense = counts.iter().map(|&c| number_len(zigzag_run, c)).sum();
        let mut sparse = 0usize;
        each_pair(counts, |gap, count| {
            sparse += varint_len(gap) + number_len(zigzag_run, count)
        });
        let constant = constant.then(|| number_len(zigzag_run, first));
        for (shape, body) in [
            (Shape::Dense, Some(dense)),
            (Shape::Sparse, Some(sparse)),
            (Shape::Constant, constant),
        ] {
            match body {
                Some(body) if head + body < best.0 => best = (head + body, shape, zigzag_run),
                _ => {}
            }
        }
    }
    let (len, shape, zigzag_run) = best;
    let tag = match shape {
        Shape::Dense => b'd',
        Shape::Sparse => b's',
        Shape::Constant => b'c',
    };
    let mut out = Vec::with_capacity(len);
    out.push(if zigzag_run {
        tag.to_ascii_uppercase()
    } else {
        tag
    });
    push_varint(&mut out, run as u64);
    push_varint(&mut out, stored as u64);
    push_number(&mut out, zigzag_run, total);
    match shape {
        Shape::Dense => (counts.iter()).for_each(|&count| push_number(&mut out, zigzag_run, count)),
        Shape::Sparse => each_pair(counts, |gap, count| {
            push_varint(&mut out, gap);
            push_number(&mut out, zigzag_run, count);
        }),
        Shape::Constant => push_number(&mut out, zigzag_run, first),
    }
    Ok(out)
}

/// Calls `f(gap, count)` for each non-zero count, `gap` the slots since the previous one.
fn each_pair(counts: &[i64], mut f: impl FnMut(u64, i64)) {
    let mut next = 0usize;
    for (offset, &count) in counts.iter().enumerate() {
        if count != 0 {
            f((offset - next) as u64, count);
            next = offset + 1;
        }
    }
}

/// Changes one slot of a validated run with `change(old count) -> new count`, and encodes
/// the run again.
fn edit(
    first: i64,
    bytes: &[u8],
    index: i64,
    change: impl FnOnce(i64) -> Result<i64>,
) -> Result<Edit> {
    let mut counts = counts(first, bytes)?;
    let offset = index.checked_sub(first).ok_or_else(outside_run)?;
    let slot = usize::try_from(offset)
        .ok()
        .and_then(|offset| counts.get_mut(offset))
        .ok_or_else(outside_run)?;
    let count = change(*slot)?;
    *slot = count;
    let value = if counts.iter().all(|&c| c == 0) {
        None
    } else {
        Some(encode_counts(&counts)?)
    };
    Ok(Edit { count, value })
}

/// Adds `delta` to slot `index` of the run starting at `first` (an `AT` into an old slot).
/// Refuses with [`Error::Overflow`] when the slot or the run's total would leave `i64`.
pub fn add(first: i64, bytes: &[u8], index: i64, delta: i64) -> Result<Edit> {
    edit(first, bytes, index, |old| {
        old.checked_add(delta).ok_or(Error::Overflow)
    })
}

/// Sets slot `index` of the run starting at `first` to `count`. Refuses with
/// [`Error::Overflow`] when the run's total would leave `i64`.
pub fn set(first: i64, bytes: &[u8], index: i64, count: i64) -> Result<Edit> {
    edit(first, bytes, index, |_| Ok(count))
}

/// Keeps the slots `lo ..= hi` of the run starting at `first` and drops the others (expiry
/// drops the slots before a bound; two calls split a run). `None` when none is left
/// non-zero. A kept part whose total leaves `i64` is refused with [`Error::Overflow`].
pub fn keep_range(first: i64, bytes: &[u8], lo: i64, hi: i64) -> Result<Option<Vec<u8>>> {
    let mut counts = counts(first, bytes)?;
    let mut index = first;
    for count in counts.iter_mut() {
        if index < lo || index > hi {
            *count = 0;
        }
        index = index.saturating_add(1);
    }
    if counts.iter().all(|&c| c == 0) {
        return Ok(None);
    }
    encode_counts(&counts).map(Some)
}

#[cfg(test)]
mod measured;
#[cfg(test)]
mod tests;
