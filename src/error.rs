//! The one error type of tally. Its `Display` is the exact text sent on the wire,
//! so tests and users can rely on it (the table of errors in README.md).
//!
//! Owns: error texts. May not touch: Redis (pure).

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// Wrong number of arguments; carries the command name as typed by the user.
    Arity(String),
    NotInteger,
    /// An integer argument that does not parse or is outside its range: the contract's
    /// text, then which argument and what it takes (`max is an integer >= 0`).
    IntegerArg(&'static str),
    NotFloat,
    Syntax,
    /// A duration or resolution that does not parse; carries the user's text.
    InvalidDuration(String),
    /// A duration or resolution that does not parse, with what the accepted form is:
    /// the contract's text, then the hint.
    DurationHint(String, &'static str),
    WrongType,
    KeyExists,
    Overflow,
    OutsideKeptRange,
    /// A timestamp outside the kept range that reads as Unix seconds (see
    /// [`outside_kept_range`]); carries it.
    OutsideKeptRangeSeconds(i64),
    TooFarInFuture,
    /// An argument that parses but is not allowed (message without the `ERR ` prefix).
    Invalid(String),
    /// Missing ACL permission on a key the command derives (message after `NOPERM `).
    NoPerm(String),
    /// The object's keys are split between two nodes by a reshard in progress (message
    /// after `TRYAGAIN `, Redis's own retryable error for that case).
    TryAgain(String),
    /// Something the module relies on did not hold: a string the server could not make,
    /// an index that must exist. Answered instead of a panic, which would abort the server.
    Internal(&'static str),
}

pub type Result<T> = std::result::Result<T, Error>;

/// Unix times in seconds from 2001 (10^9) to the year 5138 (10^11): as milliseconds they
/// are 1970's first weeks to 1973, which nothing keeps, so a refused `AT` in this range is
/// almost surely seconds typed where milliseconds belong.
const SECONDS_LIKE: std::ops::Range<i64> = 1_000_000_000..100_000_000_000;

/// The error for a timestamp `ts` that nothing keeps: the contract's text, with the hint
/// that `AT` is in milliseconds when `ts` reads as Unix seconds.
pub fn outside_kept_range(ts: i64) -> Error {
    if SECONDS_LIKE.contains(&ts) {
        Error::OutsideKeptRangeSeconds(ts)
    } else {
        Error::OutsideKeptRange
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Arity(cmd) => write!(
                f,
                "ERR wrong number of arguments for '{}' command",
                cmd.to_ascii_lowercase()
            ),
            Error::NotInteger => f.write_str("ERR value is not an integer or out of range"),
            Error::NotFloat => f.write_str("ERR value is not a valid float"),
            Error::Syntax => f.write_str("ERR syntax error"),
            Error::IntegerArg(what) => {
                write!(f, "ERR value is not an integer or out of range: {what}")
            }
            Error::InvalidDuration(text) => write!(f, "ERR invalid duration '{text}'"),
            Error::DurationHint(text, hint) => write!(f, "ERR invalid duration '{text}': {hint}"),
            Error::WrongType => {
                f.write_str("WRONGTYPE Operation against a key holding the wrong kind of value")
            }
            Error::KeyExists => f.write_str("ERR key already exists"),
            Error::Overflow => f.write_str("ERR increment or decrement would overflow"),
            Error::OutsideKeptRange => f.write_str("ERR timestamp is outside the kept range"),
            Error::OutsideKeptRangeSeconds(ts) => write!(
                f,
                "ERR timestamp is outside the kept range: AT is in Unix milliseconds \
                 ({ts} looks like seconds; {ts}000 is milliseconds)"
            ),
            Error::TooFarInFuture => f.write_str("ERR timestamp is too far in the future"),
            Error::Invalid(msg) => write!(f, "ERR {msg}"),
            Error::NoPerm(msg) => write!(f, "NOPERM {msg}"),
            Error::TryAgain(msg) => write!(f, "TRYAGAIN {msg}"),
            Error::Internal(what) => write!(f, "ERR tally internal error: {what}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_texts_are_exact() {
        assert_eq!(
            Error::Arity("TSCOUNTER.INCRBY".into()).to_string(),
            "ERR wrong number of arguments for 'tscounter.incrby' command"
        );
        assert_eq!(
            Error::InvalidDuration("5x".into()).to_string(),
            "ERR invalid duration '5x'"
        );
        assert_eq!(
            Error::WrongType.to_string(),
            "WRONGTYPE Operation against a key holding the wrong kind of value"
        );
    }

    /// A refused `AT` that reads as Unix seconds says that `AT` is in milliseconds; a
    /// negative one keeps the contract's text.
    #[test]
    fn seconds_for_milliseconds_are_named() {
        assert_eq!(
            outside_kept_range(1_765_000_000).to_string(),
            "ERR timestamp is outside the kept range: AT is in Unix milliseconds \
             (1765000000 looks like seconds; 1765000000000 is milliseconds)"
        );
        assert_eq!(outside_kept_range(-1), Error::OutsideKeptRange);
        assert_eq!(outside_kept_range(5_000), Error::OutsideKeptRange);
        assert_eq!(
            outside_kept_range(1_765_000_000_000),
            Error::OutsideKeptRange
        );
    }
}
