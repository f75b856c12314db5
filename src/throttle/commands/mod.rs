//! TSTHROTTLE: smooth rate limits (GCRA, `crate::throttle`) on one native string per
//! subject holding its TAT in Unix nanoseconds, expiring when the subject is back to a
//! full burst; and, loaded with `throttle-cell-compat yes`, redis-cell's `CL.THROTTLE` on
//! the same keys.
//!
//! The key is read, decided, and written only when the request is allowed with a quantity
//! above 0: a refusal, a check (`QUANTITY 0`) and every error change nothing. The write
//! replicates as `SET key <tat> PXAT <ms>` (never the command, which reads the clock).
//! tally keeps nothing in memory for these keys, so every hook of the family is empty.
//!
//! Owns: the throttle commands. May not touch: raw module calls, other families.

use std::io::Write;

use redis_module::{Context, NotifyEvent, RedisString};

use crate::args::{set_once, Args};
use crate::cmddocs::{integer, string, Doc, AT, KEY};
use crate::error::{Error, Result};
use crate::host::cmdinfo::{command, first_key, Command, UPDATE};
use crate::host::config;
use crate::host::replicate::Effects;
use crate::host::reply::Reply;
use crate::host::server::command_now_us;
use crate::host::store::string::StringValue;
use crate::host::store::{notify, Key};
use crate::throttle::model::{
    cell, decide, expires_at_ms, parse_period, parse_tat, reply, request_time, Decision, Rate,
    NS_PER_MS, NS_PER_US,
};

pub const COMMANDS: &[Command] = &[ALLOW];

/// Registered only when tally is loaded with `throttle-cell-compat yes`.
pub const CELL_COMMANDS: &[Command] = &[CELL_THROTTLE];

/// Throttles are native strings and keep nothing in memory: no marker, no expiry visits
/// (the server expires the keys), no caches.
pub const FAMILY: crate::family::Family = crate::family::Family::new(COMMANDS, "tsthrottle.");

pub const ALLOW: Command = command! {
    c"tsthrottle.allow" => allow, -5, c"write deny-oom", &[first_key(UPDATE)], c"write", &ALLOW_DOC
};

const ALLOW_DOC: Doc = Doc {
    summary: c"Admit a request at a steady rate with a burst allowance (GCRA), storing the subject's next arrival time",
    complexity: c"O(1)",
    args: &[
        KEY,
        integer(c"max_burst"),
        integer(c"count"),
        string(c"period"),
        integer(c"q").token(c"QUANTITY").optional(),
        AT,
    ],
};

/// TSTHROTTLE.ALLOW key max_burst count period [QUANTITY q] [AT ts]
pub fn allow(ctx: &Context, name: &RedisString, rest: &[&[u8]]) -> Result<Reply> {
    let mut args = Args::new(rest);
    let max_burst = args.next_i64_in(0.., "max_burst is an integer >= 0")?;
    let count = args.next_i64_in(1.., "count is an integer >= 1")?;
    let period_ms = parse_period(args.next_bytes()?)?;
    let (mut quantity, mut at) = (None, None);
    while !args.is_done() {
        match args.next_keyword()?.as_str() {
            "QUANTITY" => set_once(
                &mut quantity,
                args.next_i64_in(0.., "QUANTITY is an integer >= 0")?,
            )?,
            "AT" => set_once(&mut at, args.next_timestamp()?)?,
            _ => return Err(Error::Syntax),
        }
    }
    let quantity = quantity.unwrap_or(1);
    if quantity < 0 {
        return Err(Error::NotInteger);
    }
    let rate = Rate::new(
        max_burst,
        count,
        i128::from(period_ms) * i128::from(NS_PER_MS),
    )?;
    let server_now = server_now_ns();
    let now = request_time(at, server_now, config::max_future_ms())?;
    let (decision, _) = throttle(ctx, name, &rate, now, server_now, quantity)?;
    Ok(Reply::Ints(reply(&decision).to_vec()))
}

pub const CELL_THROTTLE: Command = command! {
    c"cl.throttle" => cell_throttle, -5, c"write deny-oom", &[first_key(UPDATE)], c"write", &CELL_THROTTLE_DOC
};

const CELL_THROTTLE_DOC: Doc = Doc {
    summary:
        c"redis-cell's rate limit on TSTHROTTLE's keys (registered with throttle-cell-compat yes)",
    complexity: c"O(1)",
    args: &[
        KEY,
        integer(c"max_burst"),
        integer(c"count"),
        integer(c"period"),
        integer(c"quantity").optional(),
    ],
};

/// CL.THROTTLE key max_burst count period [quantity]
///
/// redis-cell's command (period in whole seconds) and reply, on `TSTHROTTLE.ALLOW`'s keys.
pub fn cell_throttle(ctx: &Context, name: &RedisString, rest: &[&[u8]]) -> Result<Reply> {
    if rest.len() > 4 {
        return Err(Error::Arity("cl.throttle".into()));
    }
    let mut args = Args::new(rest);
    let max_burst = args.next_i64()?;
    let count = args.next_i64()?;
    let period_s = args.next_i64()?;
    let quantity = if args.is_done() { 1 } else { args.next_i64()? };
    if quantity < 0 {
        return Err(Error::NotInteger);
    }
    let rate = cell::rate(max_burst, count, period_s)?;
    let now = server_now_ns();
    let (decision, stored) = throttle(ctx, name, &rate, now, now, quantity)?;
    Ok(Reply::Ints(
        cell::reply(&rate, &decision, stored, now).to_vec(),
    ))
}

/// The server's now in Unix ns.
fn server_now_ns() -> i64 {
    command_now_us().saturating_mul(NS_PER_US)
}

/// Decides a request of `quantity` at `now` (the server's clock reading `server_now`)
/// against the key's TAT, and stores the new TAT if it is allowed. Returns the decision
/// and the TAT stored before.
fn throttle(
    ctx: &Context,
    name: &RedisString,
    rate: &Rate,
    now: i64,
    server_now: i64,
    quantity: i64,
) -> Result<(Decision, Option<i64>)> {
    let (decision, stored) = {
        // Read-only first: a refusal or a check opens nothing for writing (which would
        // touch the key for WATCH).
        let key = Key::open_untracked(ctx, name, false);
        let stored = match key.string_value() {
            StringValue::Missing => None,
            StringValue::String(value) => Some(parse_tat(value).ok_or(Error::WrongType)?),
            StringValue::Other => return Err(Error::WrongType),
        };
        (decide(rate, stored, now, quantity)?, stored)
    };
    if let Some(tat) = decision.store {
        let expires = expires_at_ms(tat, now, server_now);
        let mut tat_text = [0u8; 20];
        let mut ms_text = [0u8; 20];
        let (tat_text, ms_text) = (decimal(tat, &mut tat_text), decimal(expires, &mut ms_text));
        let key = Key::open_untracked(ctx, name, true);
        if !key.set_string(tat_text) {
            // Not reached: the key was a string or missing a moment ago.
            return Err(Error::WrongType);
        }
        key.expire_at(expires);
        drop(key);
        Effects::send(ctx, c"SET", &[name.as_slice(), tat_text, b"PXAT", ms_text]);
        notify(ctx, NotifyEvent::STRING, c"tsthrottle.allow", name);
    }
    Ok((decision, stored))
}

/// `value`'s decimal text in `buf` (an `i64` has at most 20 characters).
fn decimal(value: i64, buf: &mut [u8; 20]) -> &[u8] {
    let total = buf.len();
    let mut rest = &mut buf[..];
    // Writing an `i64` into 20 bytes cannot fail.
    let _ = write!(rest, "{value}");
    let written = total - rest.len();
    buf.get(..written).unwrap_or_default()
}
