//! Argument cursor shared by every command: walks the argument vector, separating
//! "ran out of arguments" from "bad value", and parses the common value kinds
//! (integers, finite floats, durations, timestamps) with the contract's error texts.
//! Pure: no Redis imports, so it is unit-tested with plain `cargo test`.
//!
//! Owns: argument parsing and the one integer/float/duration text forms. May not touch:
//! Redis (pure).

use crate::error::{Error, Result};

/// A cursor over a command's arguments (without the command name).
pub struct Args<'a> {
    items: &'a [&'a [u8]],
    pos: usize,
}

impl<'a> Args<'a> {
    pub fn new(items: &'a [&'a [u8]]) -> Self {
        Args { items, pos: 0 }
    }

    pub fn remaining(&self) -> usize {
        self.items.len().saturating_sub(self.pos)
    }

    pub fn is_done(&self) -> bool {
        self.remaining() == 0
    }

    /// The next raw argument; a missing one is a syntax error (an option without its value).
    pub fn next_bytes(&mut self) -> Result<&'a [u8]> {
        let item = self.items.get(self.pos).ok_or(Error::Syntax)?;
        self.pos += 1;
        Ok(item)
    }

    /// The next argument if it equals `keyword` (ASCII case-insensitive); consumes it then.
    pub fn eat_keyword(&mut self, keyword: &str) -> bool {
        match self.items.get(self.pos) {
            Some(item) if item.eq_ignore_ascii_case(keyword.as_bytes()) => {
                self.pos += 1;
                true
            }
            _ => false,
        }
    }

    /// The next argument as an upper-cased option name, for `match`ing option keywords.
    /// Option names are short; anything longer than 32 bytes cannot be one.
    pub fn next_keyword(&mut self) -> Result<Keyword> {
        Keyword::new(self.next_bytes()?).ok_or(Error::Syntax)
    }

    /// The arguments from here up to (not including) the first that is one of `keywords`
    /// (ASCII case-insensitive), looking only after the first `at_least` of them: the
    /// "values, then options" shape (`SUM key window [window ...] [AT ts]`). Values are
    /// numbers or durations, never those words.
    pub fn values_until(&mut self, at_least: usize, keywords: &[&str]) -> &'a [&'a [u8]] {
        let rest = self.items.get(self.pos..).unwrap_or(&[]);
        let is_keyword = |item: &&[u8]| {
            keywords
                .iter()
                .any(|k| item.eq_ignore_ascii_case(k.as_bytes()))
        };
        let len = rest
            .iter()
            .skip(at_least)
            .position(is_keyword)
            .map_or(rest.len(), |p| p + at_least)
            .min(rest.len());
        self.pos += len;
        rest.get(..len).unwrap_or(&[])
    }

    pub fn next_i64(&mut self) -> Result<i64> {
        parse_i64(self.next_bytes()?)
    }

    /// The next argument as an integer in `range`; a value that is not one is
    /// [`Error::IntegerArg`] with `what` (the argument's name and range: `count is an
    /// integer >= 0`), so a swapped or forgotten argument is found at once.
    pub fn next_i64_in(
        &mut self,
        range: impl std::ops::RangeBounds<i64>,
        what: &'static str,
    ) -> Result<i64> {
        parse_i64_in(self.next_bytes()?, range, what)
    }

    pub fn next_f64(&mut self) -> Result<f64> {
        parse_finite_f64(self.next_bytes()?)
    }

    pub fn next_duration(&mut self) -> Result<i64> {
        parse_duration(self.next_bytes()?)
    }

    pub fn next_timestamp(&mut self) -> Result<i64> {
        parse_timestamp(self.next_bytes()?)
    }
}

/// Sets an option once; a repeated option is a syntax error, as the contract says.
pub fn set_once<T>(slot: &mut Option<T>, value: T) -> Result<()> {
    if slot.is_some() {
        return Err(Error::Syntax);
    }
    *slot = Some(value);
    Ok(())
}

/// Parses a signed 64-bit decimal integer the way Redis does: optional `-`, digits,
/// no spaces, no `+`, no leading zeros.
pub fn parse_i64(bytes: &[u8]) -> Result<i64> {
    let digits = bytes.strip_prefix(b"-").unwrap_or(bytes);
    let well_formed = !digits.is_empty()
        && digits.len() <= 19
        && digits.iter().all(u8::is_ascii_digit)
        && (digits.len() == 1 || digits.first() != Some(&b'0'))
        && bytes != b"-0";
    if !well_formed {
        return Err(Error::NotInteger);
    }
    // Accumulated negatively: i64::MIN has no positive counterpart.
    let mut value: i64 = 0;
    for &digit in digits {
        value = value
            .checked_mul(10)
            .and_then(|v| v.checked_sub(i64::from(digit - b'0')))
            .ok_or(Error::NotInteger)?;
    }
    if digits.len() == bytes.len() {
        value.checked_neg().ok_or(Error::NotInteger)
    } else {
        Ok(value)
    }
}

/// Parses an integer in `range`, else [`Error::IntegerArg`] naming it (see
/// [`Args::next_i64_in`]).
pub fn parse_i64_in(
    bytes: &[u8],
    range: impl std::ops::RangeBounds<i64>,
    what: &'static str,
) -> Result<i64> {
    parse_i64(bytes)
        .ok()
        .filter(|v| range.contains(v))
        .ok_or(Error::IntegerArg(what))
}

/// Most keys one read over several keys (MSUM, MGET, MQUANTILE) takes: its work is this
/// many keys' own reads, like a pipeline of that many.
pub const MAX_READ_KEYS: usize = 1000;

/// Parses `numkeys` of a command over a counted list of keys: an integer (else
/// `ERR value is not an integer or out of range`) from 1 to `max` (else `ERR syntax
/// error`, as MLIMIT answers).
pub fn parse_key_count(bytes: &[u8], max: usize) -> Result<usize> {
    usize::try_from(parse_i64(bytes)?)
        .ok()
        .filter(|n| (1..=max).contains(n))
        .ok_or(Error::Syntax)
}

/// Timestamps are integers below this (2^53 ms, year ~287,000): exact in a double, and with
/// any duration added still far from `i64::MAX`.
pub const TIMESTAMP_LIMIT: i64 = 1 << 53;

/// The longest duration: 10,000 years of 365.25 days. A timestamp plus or minus any span
/// built from it (a resolution's `ms * samples`, a board's window, `period * keep`) stays
/// far inside `i64`, so slot arithmetic never saturates or wraps.
pub const MAX_DURATION_MS: i64 = 315_576_000_000_000;

/// Parses a timestamp: an integer (Redis rules) in `[0, 2^53)`; any other integer is
/// outside the kept range.
pub fn parse_timestamp(bytes: &[u8]) -> Result<i64> {
    let t = parse_i64(bytes)?;
    if !(0..TIMESTAMP_LIMIT).contains(&t) {
        return Err(Error::OutsideKeptRange);
    }
    Ok(t)
}

/// Parses a finite double; `inf`, `nan` and anything that is not a number are refused.
pub fn parse_finite_f64(bytes: &[u8]) -> Result<f64> {
    let text = std::str::from_utf8(bytes).map_err(|_| Error::NotFloat)?;
    // Rust accepts "inf", "infinity" and "nan" in any case; Redis users expect numbers only.
    if text.is_empty() || text.len() > 64 || text.trim() != text {
        return Err(Error::NotFloat);
    }
    match text.parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        _ => Err(Error::NotFloat),
    }
}

/// Duration units and their length in milliseconds, longest suffix first so that
/// `ms` is tried before `m` and `s`.
const UNITS: [(&str, i64); 6] = [
    ("ms", 1),
    ("s", 1_000),
    ("m", 60_000),
    ("h", 3_600_000),
    ("d", 86_400_000),
    ("w", 604_800_000),
];

/// The length of the one-letter unit `letter` in [`UNITS`], by a `match` (a unit test keeps
/// the two equal). Units are lower case only: `M` would read as a month to some and a
/// minute to others, so no upper-case letter is a unit.
fn letter_unit_ms(letter: u8) -> Option<i64> {
    match letter {
        b's' => Some(1_000),
        b'm' => Some(60_000),
        b'h' => Some(3_600_000),
        b'd' => Some(86_400_000),
        b'w' => Some(604_800_000),
        _ => None,
    }
}

/// An option name, upper-cased into a stack buffer: every option of every command is
/// read through one, so it allocates nothing (it was a `String`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Keyword {
    upper: [u8; Keyword::MAX_LEN],
    len: usize,
}

impl Keyword {
    /// Option names are short; anything longer cannot be one.
    const MAX_LEN: usize = 32;

    /// `None` for an argument longer than any option name.
    fn new(item: &[u8]) -> Option<Keyword> {
        let mut upper = [0u8; Keyword::MAX_LEN];
        upper.get_mut(..item.len())?.copy_from_slice(item);
        upper.make_ascii_uppercase();
        Some(Keyword {
            upper,
            len: item.len(),
        })
    }

    /// The upper-cased name; an argument that is not UTF-8 (never an option name) reads
    /// as the replacement character, which matches no option.
    pub fn as_str(&self) -> &str {
        self.upper
            .get(..self.len)
            .and_then(|bytes| std::str::from_utf8(bytes).ok())
            .unwrap_or("\u{FFFD}")
    }
}

/// Parses a positive duration: bare milliseconds (`1500`) or an integer with a unit
/// (`500ms`, `5s`, `5m`, `24h`, `180d`, `2w`), at most [`MAX_DURATION_MS`]. Units are lower
/// case (`5M` is refused, not read as minutes or months).
pub fn parse_duration(bytes: &[u8]) -> Result<i64> {
    duration_ms(bytes).ok_or_else(|| invalid_duration(bytes))
}

/// What a duration is, said by every error about one's form.
pub const DURATION_FORM: &str = "a duration is a positive integer of milliseconds or with \
     a unit ms, s, m, h, d or w in lower case (500ms, 5s, 5m, 24h, 7d, 2w)";

/// What a duration at most is, said when one is too long.
pub const DURATION_MOST: &str = "a duration is at most 10000 years (315576000000000ms)";

/// A duration's error, with the accepted form, or the limit when only the length is wrong.
#[cold]
pub fn invalid_duration(bytes: &[u8]) -> Error {
    let text = String::from_utf8_lossy(bytes).into_owned();
    let digits = bytes.strip_suffix(b"ms").unwrap_or(bytes);
    let digits = match digits {
        [digits @ .., unit] if letter_unit_ms(*unit).is_some() => digits,
        _ => digits,
    };
    let too_long = !digits.is_empty()
        && digits.iter().all(u8::is_ascii_digit)
        && digits.iter().any(|&d| d != b'0');
    Error::DurationHint(
        text,
        if too_long {
            DURATION_MOST
        } else {
            DURATION_FORM
        },
    )
}

/// [`parse_duration`] without the error (kept apart: this runs for every window of every
/// read, and the error's text costs the usual path registers and stack).
fn duration_ms(bytes: &[u8]) -> Option<i64> {
    // The unit is the last letter (or `ms`): picked without a search.
    let (digits, unit_ms) = match bytes {
        [digits @ .., b'm', b's'] => (digits, 1),
        [digits @ .., unit] if !unit.is_ascii_digit() => (digits, letter_unit_ms(*unit)?),
        _ => (bytes, 1),
    };
    if digits.is_empty() || digits.len() > 18 {
        return None;
    }
    let mut count = 0i64;
    for &digit in digits {
        if !digit.is_ascii_digit() {
            return None;
        }
        // At most 18 digits: no overflow.
        count = count * 10 + i64::from(digit - b'0');
    }
    count
        .checked_mul(unit_ms)
        .filter(|ms| (1..=MAX_DURATION_MS).contains(ms))
}

/// Appends the shortest readable form of a duration (see [`format_duration`]).
/// Appends exact text for a finite float: the one float formatter. `{}` never uses an
/// exponent (1e300 would be 301 characters) and `{:e}` always does; both are shortest
/// round-trip. The magnitude picks one, so each value is formatted once (this runs on
/// every STATS.ADD).
pub fn push_f64(out: &mut String, x: f64) {
    use std::fmt::Write;
    let a = x.abs();
    let _ = if a != 0.0 && !(1e-5..1e16).contains(&a) {
        write!(out, "{x:e}")
    } else {
        write!(out, "{x}")
    };
}

/// The decimal digits of `value` (with its sign), written into `buf` without `core::fmt`.
fn decimal(value: i64, buf: &mut [u8; 20]) -> &[u8] {
    let mut n = value.unsigned_abs();
    let mut at = buf.len();
    loop {
        at -= 1;
        // `at` stays in bounds: a u64 has at most 20 digits.
        if let Some(d) = buf.get_mut(at) {
            *d = b'0' + (n % 10) as u8;
        }
        n /= 10;
        if n == 0 || at == 0 {
            break;
        }
    }
    if value < 0 && at > 0 {
        at -= 1;
        if let Some(d) = buf.get_mut(at) {
            *d = b'-';
        }
    }
    buf.get(at..).unwrap_or(&[])
}

/// Appends `value` in decimal, as Redis writes integers (no `core::fmt` on hot paths).
pub fn push_i64(out: &mut Vec<u8>, value: i64) {
    out.extend_from_slice(decimal(value, &mut [0; 20]));
}

/// Appends a duration label (`5m`, `1500ms`, see [`format_duration`]) to a byte buffer.
pub fn push_duration_bytes(out: &mut Vec<u8>, ms: i64) {
    let (count, suffix) = duration_parts(ms);
    push_i64(out, count);
    out.extend_from_slice(suffix.as_bytes());
}

/// The largest unit that divides `ms` evenly, and the count of it.
fn duration_parts(ms: i64) -> (i64, &'static str) {
    UNITS
        .iter()
        .rev()
        .find(|(_, unit_ms)| *unit_ms > 1 && ms % unit_ms == 0)
        .map_or((ms, "ms"), |(suffix, unit_ms)| (ms / unit_ms, *suffix))
}

pub fn push_duration(out: &mut String, ms: i64) {
    let (count, suffix) = duration_parts(ms);
    out.push_str(std::str::from_utf8(decimal(count, &mut [0; 20])).unwrap_or("0"));
    out.push_str(suffix);
}

/// The shortest readable form of a duration: the largest unit that divides it exactly.
/// `format_duration(parse_duration(x)) ` is canonical: `60s` becomes `1m`.
pub fn format_duration(ms: i64) -> String {
    let mut out = String::new();
    push_duration(&mut out, ms);
    out
}

#[cfg(test)]
mod tests;
