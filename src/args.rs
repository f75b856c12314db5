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

/// The length of the one-letter unit `letter` (any case) in [`UNITS`], by a `match` (a
/// unit test keeps the two equal).
fn letter_unit_ms(letter: u8) -> Option<i64> {
    match letter.to_ascii_lowercase() {
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
/// (`500ms`, `5s`, `5m`, `24h`, `180d`, `2w`), at most [`MAX_DURATION_MS`]. Units are
/// case-insensitive.
pub fn parse_duration(bytes: &[u8]) -> Result<i64> {
    duration_ms(bytes).ok_or_else(|| invalid_duration(bytes))
}

#[cold]
fn invalid_duration(bytes: &[u8]) -> Error {
    Error::InvalidDuration(String::from_utf8_lossy(bytes).into_owned())
}

/// [`parse_duration`] without the error (kept apart: this runs for every window of every
/// read, and the error's text costs the usual path registers and stack).
fn duration_ms(bytes: &[u8]) -> Option<i64> {
    // The unit is the last letter (or `ms`): picked without a search.
    let (digits, unit_ms) = match bytes {
        [digits @ .., m, s] if m.eq_ignore_ascii_case(&b'm') && s.eq_ignore_ascii_case(&b's') => {
            (digits, 1)
        }
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
mod tests {
    #[test]
    fn key_counts_are_one_to_max() {
        use super::parse_key_count;
        assert_eq!(parse_key_count(b"1", 1000), Ok(1));
        assert_eq!(parse_key_count(b"1000", 1000), Ok(1000));
        assert_eq!(parse_key_count(b"1001", 1000), Err(Error::Syntax));
        assert_eq!(parse_key_count(b"0", 1000), Err(Error::Syntax));
        assert_eq!(parse_key_count(b"-1", 1000), Err(Error::Syntax));
        assert_eq!(parse_key_count(b"x", 1000), Err(Error::NotInteger));
    }

    use super::*;

    /// Keywords read as the old `String` did: upper-cased ASCII, at most 32 bytes, and
    /// an argument that is not UTF-8 matching no option.
    #[test]
    fn keywords_upper_case_on_the_stack() {
        let keyword = |item: &[u8]| {
            let items = [item];
            Args::new(&items)
                .next_keyword()
                .map(|k| k.as_str().to_string())
        };
        assert_eq!(keyword(b"withScores"), Ok("WITHSCORES".to_string()));
        assert_eq!(keyword(b"at"), Ok("AT".to_string()));
        assert_eq!(keyword(b""), Ok(String::new()));
        assert_eq!(
            keyword(b"\xc3\xa9t\xc3\xa9"),
            Ok("\u{e9}T\u{e9}".to_string())
        );
        assert_eq!(keyword(&[b'a'; 32]), Ok("A".repeat(32)));
        assert_eq!(keyword(&[b'a'; 33]), Err(Error::Syntax));
        assert_eq!(keyword(b"\xff\xfeAT"), Ok("\u{FFFD}".to_string()));
        assert_eq!(Args::new(&[]).next_keyword(), Err(Error::Syntax));
    }

    #[test]
    fn integers_print_as_redis_writes_them() {
        for v in [0, 1, -1, 9, 10, -10, 1234567, i64::MAX, i64::MIN] {
            let mut out = b"x".to_vec();
            push_i64(&mut out, v);
            assert_eq!(out, format!("x{v}").into_bytes());
            assert_eq!(parse_i64(out.get(1..).unwrap_or(&[])), Ok(v));
        }
    }

    #[test]
    fn integers_follow_redis_rules() {
        assert_eq!(parse_i64(b"0"), Ok(0));
        assert_eq!(parse_i64(b"-42"), Ok(-42));
        assert_eq!(parse_i64(b"9223372036854775807"), Ok(i64::MAX));
        assert_eq!(parse_i64(b"-9223372036854775808"), Ok(i64::MIN));
        for bad in [
            &b""[..],
            b"-",
            b"+1",
            b"01",
            b"1.5",
            b" 1",
            b"9223372036854775808",
            b"1e3",
            b"-0",
            b"\x00",
        ] {
            assert_eq!(parse_i64(bad), Err(Error::NotInteger), "{bad:?}");
        }
    }

    #[test]
    fn floats_must_be_finite_numbers() {
        assert_eq!(parse_finite_f64(b"1.5"), Ok(1.5));
        assert_eq!(parse_finite_f64(b"-1e9"), Ok(-1e9));
        for bad in [
            &b"inf"[..],
            b"-inf",
            b"nan",
            b"NaN",
            b"",
            b"abc",
            b" 1",
            b"1e999",
        ] {
            assert_eq!(parse_finite_f64(bad), Err(Error::NotFloat), "{bad:?}");
        }
    }

    #[test]
    fn durations_with_and_without_units() {
        assert_eq!(parse_duration(b"500ms"), Ok(500));
        assert_eq!(parse_duration(b"1500"), Ok(1500));
        assert_eq!(parse_duration(b"5s"), Ok(5_000));
        assert_eq!(parse_duration(b"5M"), Ok(300_000));
        assert_eq!(parse_duration(b"24h"), Ok(86_400_000));
        assert_eq!(parse_duration(b"180d"), Ok(15_552_000_000));
        assert_eq!(parse_duration(b"2w"), Ok(1_209_600_000));
        assert_eq!(parse_duration(b"7MS"), Ok(7));
        assert_eq!(parse_duration(b"3mS"), Ok(3));
        for bad in [
            &b"ms"[..],
            b"5sm",
            b"5mm",
            b"m5",
            b"0",
            b"0s",
            b"-5s",
            b"5x",
            b"s",
            b"",
            b"5 s",
            b"1.5s",
            b"999999999999999999w",
        ] {
            assert!(
                matches!(parse_duration(bad), Err(Error::InvalidDuration(_))),
                "{bad:?}"
            );
        }
        assert_eq!(
            parse_duration(b"5x").unwrap_err().to_string(),
            "ERR invalid duration '5x'"
        );
    }

    /// Durations stop at 10,000 years, timestamps at 2^53, whatever the unit.
    #[test]
    fn edges_of_time() {
        assert_eq!(parse_duration(b"3652500d"), Ok(MAX_DURATION_MS));
        assert_eq!(parse_duration(b"315576000000000"), Ok(MAX_DURATION_MS));
        assert_eq!(parse_duration(b"315576000000000ms"), Ok(MAX_DURATION_MS));
        assert_eq!(parse_duration(b"87660000h"), Ok(MAX_DURATION_MS));
        for bad in [
            &b"3652501d"[..],
            b"315576000000001",
            b"106751991167d",
            b"521786w",
            b"999999999999999999",
            b"5259600001m",
        ] {
            assert_eq!(
                parse_duration(bad),
                Err(Error::InvalidDuration(
                    String::from_utf8_lossy(bad).into_owned()
                )),
                "{bad:?}"
            );
        }
        assert_eq!(parse_timestamp(b"0"), Ok(0));
        assert_eq!(
            parse_timestamp(b"9007199254740991"),
            Ok(TIMESTAMP_LIMIT - 1)
        );
        for outside in [
            &b"-1"[..],
            b"-100000000000000",
            b"9007199254740992",
            b"9223372036854775807",
            b"-9223372036854775808",
        ] {
            assert_eq!(
                parse_timestamp(outside),
                Err(Error::OutsideKeptRange),
                "{outside:?}"
            );
        }
        assert_eq!(parse_timestamp(b"1.5"), Err(Error::NotInteger));
        assert_eq!(parse_timestamp(b"x"), Err(Error::NotInteger));
        let items: Vec<&[u8]> = vec![b"12", b"-12"];
        let mut args = Args::new(&items);
        assert_eq!(args.next_timestamp(), Ok(12));
        assert_eq!(args.next_timestamp(), Err(Error::OutsideKeptRange));
        assert_eq!(args.next_timestamp(), Err(Error::Syntax));
    }

    /// The `match` of one-letter units and the table of units agree, in either case.
    #[test]
    fn letter_units_match_the_table() {
        for (suffix, ms) in UNITS {
            let &[letter] = suffix.as_bytes() else {
                continue;
            };
            assert_eq!(letter_unit_ms(letter), Some(ms), "{suffix}");
            assert_eq!(
                letter_unit_ms(letter.to_ascii_uppercase()),
                Some(ms),
                "{suffix}"
            );
            assert_eq!(parse_duration(format!("3{suffix}").as_bytes()), Ok(3 * ms));
        }
        let letters = UNITS.iter().filter(|(suffix, _)| suffix.len() == 1).count();
        let matched = (0..=u8::MAX)
            .filter(|&b| letter_unit_ms(b).is_some())
            .count();
        assert_eq!(matched, 2 * letters, "no unit beyond the table's");
    }

    #[test]
    fn canonical_duration_labels() {
        assert_eq!(format_duration(500), "500ms");
        assert_eq!(format_duration(1000), "1s");
        assert_eq!(format_duration(60_000), "1m");
        assert_eq!(format_duration(90_000), "90s");
        assert_eq!(format_duration(86_400_000), "1d");
        assert_eq!(format_duration(604_800_000), "1w");
        for ms in [1, 999, 1001, 5_000, 300_000, 3_600_000, 18_000_000] {
            assert_eq!(parse_duration(format_duration(ms).as_bytes()), Ok(ms));
        }
    }

    #[test]
    fn values_run_until_the_first_option_keyword() {
        let items: Vec<&[u8]> = vec![b"5s", b"at", b"1m", b"AT", b"10"];
        let mut args = Args::new(&items);
        // The first value is taken whatever it is: a bad one is an error of its own kind.
        assert_eq!(args.values_until(1, &["AT"]), &items[..1]);
        assert!(args.eat_keyword("AT"));
        assert_eq!(args.values_until(0, &["AT", "REPORT"]), &items[2..3]);
        assert!(args.eat_keyword("at"));
        assert_eq!(args.values_until(0, &["AT"]), &items[4..]);
        assert!(args.is_done());
        assert_eq!(args.values_until(1, &["AT"]), &[] as &[&[u8]]);
        let only: Vec<&[u8]> = vec![b"WINDOW", b"1h"];
        assert_eq!(
            Args::new(&only).values_until(0, &["WINDOW"]),
            &[] as &[&[u8]]
        );
        assert_eq!(Args::new(&only).values_until(1, &["WINDOW"]), &only[..]);
    }

    #[test]
    fn floats_print_shortest_and_read_back_exactly() {
        for x in [
            0.0,
            -0.0,
            1.5,
            -2.25,
            1e-7,
            123456.789,
            1e300,
            f64::MIN_POSITIVE,
            0.1,
        ] {
            let mut out = String::new();
            push_f64(&mut out, x);
            assert_eq!(out.parse::<f64>(), Ok(x), "{out}");
            assert!(out.len() <= 24, "{out}");
        }
        let mut out = String::new();
        push_f64(&mut out, 1e300);
        assert_eq!(out, "1e300");
    }

    #[test]
    fn cursor_separates_missing_from_bad() {
        let raw: Vec<&[u8]> = vec![b"AT", b"12", b"at"];
        let mut args = Args::new(&raw);
        assert!(args.eat_keyword("at"));
        assert_eq!(args.next_i64(), Ok(12));
        assert_eq!(
            args.next_keyword().map(|k| k.as_str().to_string()),
            Ok("AT".to_string())
        );
        assert_eq!(args.next_i64(), Err(Error::Syntax));
        assert!(args.is_done());
    }
}
