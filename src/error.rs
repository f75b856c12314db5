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
    NotFloat,
    Syntax,
    /// A duration or resolution that does not parse; carries the user's text.
    InvalidDuration(String),
    WrongType,
    KeyExists,
    Overflow,
    OutsideKeptRange,
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
            Error::InvalidDuration(text) => write!(f, "ERR invalid duration '{text}'"),
            Error::WrongType => {
                f.write_str("WRONGTYPE Operation against a key holding the wrong kind of value")
            }
            Error::KeyExists => f.write_str("ERR key already exists"),
            Error::Overflow => f.write_str("ERR increment or decrement would overflow"),
            Error::OutsideKeptRange => f.write_str("ERR timestamp is outside the kept range"),
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
}
