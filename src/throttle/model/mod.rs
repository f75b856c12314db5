//! Smooth rate limits: the generic cell rate algorithm (GCRA) over one stored number, the
//! subject's *theoretical arrival time* (TAT), in Unix nanoseconds. Pure: no Redis imports.
//!
//! A rate of `count` per `period` admits one request every emission interval
//! `T = period / count` (whole nanoseconds, rounded down), with a tolerance
//! `tau = T * (max_burst + 1)`: a request of `q` at `now` moves the TAT from
//! `tat = max(stored, now)` to `new = tat + T * q`, and is allowed when `new - tau <= now`.
//! Equivalently, a bucket of capacity `tau` that drains one nanosecond per nanosecond holds
//! `tat - now` (the model the unit tests check against).
//!
//! Every nanosecond value a caller sees fits `i64` (Unix nanoseconds reach the year 2262):
//! a rate whose tolerance, counted from now, would end past that is refused
//! ([`burst_too_long`]); intermediate sums are done in `i128`, so no input (a forged stored
//! TAT, a quantity of `i64::MAX`) overflows.
//!
//! Owns: the GCRA decision, the reply's rounding, the stored value's text, the time a
//! request is decided at, and redis-cell's `CL.THROTTLE` reply (`cell.rs`). May not touch:
//! Redis (pure).

pub mod cell;
#[cfg(test)]
mod tests;

use crate::error::{Error, Result};

pub const NS_PER_MS: i64 = 1_000_000;
pub const NS_PER_US: i64 = 1_000;

/// The error of a rate whose emission interval would be under a nanosecond.
pub fn rate_too_high() -> Error {
    Error::Invalid("rate is too high".into())
}

/// The error of a rate whose tolerance (`(max_burst + 1) * period / count`), counted from
/// the request's time, ends after the last Unix nanosecond an `i64` holds (year 2262).
pub fn burst_too_long() -> Error {
    Error::Invalid("burst window is too long".into())
}

/// What TSTHROTTLE.ALLOW's period is, said when it has no unit.
pub const PERIOD_FORM: &str = "TSTHROTTLE.ALLOW's period needs a unit (60s, 1m, 500ms): \
     CL.THROTTLE takes seconds, so a bare number here is refused rather than read as ms";

/// Parses TSTHROTTLE.ALLOW's `period`: a duration with its unit. A bare number is refused:
/// redis-cell users type the period in seconds (`CL.THROTTLE k 15 30 60`), and as tally's
/// bare milliseconds it would mean a rate 1000 times higher without a word.
pub fn parse_period(bytes: &[u8]) -> Result<i64> {
    if !bytes.is_empty() && bytes.iter().all(u8::is_ascii_digit) {
        return Err(Error::DurationHint(
            String::from_utf8_lossy(bytes).into_owned(),
            PERIOD_FORM,
        ));
    }
    crate::args::parse_duration(bytes)
}

/// A rate with its burst allowance, in nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rate {
    /// `T`: the time one unit of quantity takes to drain.
    pub interval: i64,
    /// `tau = T * (max_burst + 1)`.
    pub tolerance: i64,
    /// `max_burst + 1`.
    pub limit: i64,
}

impl Rate {
    /// `count` per `period_ns` with bursts of `max_burst`: `max_burst >= 0` and
    /// `count >= 1` (else [`Error::NotInteger`], the contract's "out of range"), a period of
    /// at least a nanosecond.
    pub fn new(max_burst: i64, count: i64, period_ns: i128) -> Result<Rate> {
        if max_burst < 0 || count < 1 || period_ns < 1 {
            return Err(Error::NotInteger);
        }
        Rate::with_interval(max_burst, period_ns / i128::from(count))
    }

    /// A rate of one unit per `interval` ns with bursts of `max_burst`.
    pub fn with_interval(max_burst: i64, interval: i128) -> Result<Rate> {
        if max_burst < 0 {
            return Err(Error::NotInteger);
        }
        if interval < 1 {
            return Err(rate_too_high());
        }
        let limit = max_burst.checked_add(1).ok_or_else(burst_too_long)?;
        let tolerance = interval
            .checked_mul(i128::from(limit))
            .and_then(|tau| i64::try_from(tau).ok())
            .ok_or_else(burst_too_long)?;
        // `interval <= tolerance`, so it fits too.
        let interval = i64::try_from(interval).map_err(|_| burst_too_long())?;
        Ok(Rate {
            interval,
            tolerance,
            limit,
        })
    }
}

/// What a request gets, in nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    /// `max_burst + 1`.
    pub limit: i64,
    /// How many more requests of 1 fit right now (after this one, if allowed).
    pub remaining: i64,
    /// The wait before the same request would be allowed: 0 when allowed, -1 when it can
    /// never fit (its quantity is more than the burst holds).
    pub retry_after: i64,
    /// The wait until the subject is back to a full burst.
    pub reset_after: i64,
    /// The TAT to store, when the request is allowed with a quantity above 0.
    pub store: Option<i64>,
}

/// Decides a request of `quantity` (>= 0) at `now` (Unix ns) against the `stored` TAT.
/// Nothing is stored when the request is refused or its quantity is 0.
pub fn decide(rate: &Rate, stored: Option<i64>, now: i64, quantity: i64) -> Result<Decision> {
    if quantity < 0 || now < 0 {
        return Err(Error::NotInteger);
    }
    if now.checked_add(rate.tolerance).is_none() {
        return Err(burst_too_long());
    }
    let (now_w, interval, tau) = (
        i128::from(now),
        i128::from(rate.interval),
        i128::from(rate.tolerance),
    );
    let tat = i128::from(stored.map_or(now, |stored| stored.max(now)));
    // Below 2^126: no overflow.
    let increment = interval * i128::from(quantity);
    let new = tat + increment;
    let (allowed, retry_after, reset_after) = if new - tau > now_w {
        let retry = if increment <= tau {
            new - tau - now_w
        } else {
            -1
        };
        (false, retry, tat - now_w)
    } else {
        (true, 0, new - now_w)
    };
    let remaining = (tau - reset_after).div_euclid(interval).max(0);
    // Allowed: `new <= now + tau`, which fits (checked above); refused: `reset_after` is
    // at most the stored value and `retry_after` below the old TAT.
    let fit = |value: i128| i64::try_from(value).map_err(|_| burst_too_long());
    Ok(Decision {
        allowed,
        limit: rate.limit,
        remaining: fit(remaining)?,
        retry_after: fit(retry_after)?,
        reset_after: fit(reset_after)?,
        store: if allowed && quantity > 0 {
            Some(fit(new)?)
        } else {
            None
        },
    })
}

/// Nanoseconds as whole milliseconds rounded up (waiting that long is enough); -1 stays -1.
pub fn ms_rounded_up(ns: i64) -> i64 {
    if ns < 0 {
        return -1;
    }
    ns / NS_PER_MS + i64::from(ns % NS_PER_MS != 0)
}

/// The reply of `TSTHROTTLE.ALLOW`: `[allowed, limit, remaining, retry_after_ms,
/// reset_after_ms]`.
pub fn reply(decision: &Decision) -> [i64; 5] {
    [
        i64::from(decision.allowed),
        decision.limit,
        decision.remaining,
        ms_rounded_up(decision.retry_after),
        ms_rounded_up(decision.reset_after),
    ]
}

/// The time a request is decided at, in Unix ns, from the server's clock (`server_now`,
/// ns) and the command's `AT ts` (ms). A `ts` ahead of the server's clock by at most
/// `max_future_ms` is the server's now; further ahead it is refused. A `ts` in the past is
/// the request's time as given (its key then lives as long after the server's now as its
/// TAT is after `ts`: see [`expires_at_ms`]).
pub fn request_time(at: Option<i64>, server_now: i64, max_future_ms: i64) -> Result<i64> {
    let Some(ts) = at else {
        return Ok(server_now);
    };
    let server_ms = server_now.div_euclid(NS_PER_MS);
    if ts > server_ms {
        return if ts - server_ms <= max_future_ms {
            Ok(server_now)
        } else {
            Err(Error::TooFarInFuture)
        };
    }
    if ts < 0 {
        return Err(Error::OutsideKeptRange);
    }
    ts.checked_mul(NS_PER_MS).ok_or(Error::TooFarInFuture)
}

/// When a stored `tat` expires (Unix ms, rounded up) for a request decided at `now` while
/// the server's clock read `server_now` (both ns, `now <= server_now`): at the TAT itself
/// for a request of the server's now, and as much later as the request's time was in the
/// past. So a request given `AT` a past time leaves a state that lives, on the server's
/// clock, exactly as long as it matters to the requests that follow it at that lag (a
/// state that expired at its TAT would already be gone for them), and never less than it
/// matters to requests of the server's now (for which any TAT before their time is no
/// state at all).
pub fn expires_at_ms(tat: i64, now: i64, server_now: i64) -> i64 {
    let lag = (i128::from(server_now) - i128::from(now)).max(0);
    let at = i128::from(tat) + lag;
    let ms = at.div_euclid(i128::from(NS_PER_MS))
        + i128::from(at.rem_euclid(i128::from(NS_PER_MS)) != 0);
    i64::try_from(ms).unwrap_or(i64::MAX)
}

/// The stored TAT: a decimal integer of Unix nanoseconds, at least 0 (what tally and
/// redis-cell write). Anything else is not a throttle's state.
pub fn parse_tat(value: &[u8]) -> Option<i64> {
    crate::args::parse_i64(value).ok().filter(|&tat| tat >= 0)
}
