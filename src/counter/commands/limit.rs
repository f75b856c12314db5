//! TSCOUNTER.LIMIT and TSCOUNTER.MLIMIT: parse every argument, read and decide every key
//! with the pure `crate::counter::model::limit`, then (only when the whole call is allowed) apply the
//! increment to each key as `INCRBY ... AT ts` would, replicated as that key's effects.
//!
//! Owns: the two rate-limit commands. May not touch: raw module calls, other families.

use redis_module::{Context, NotifyEvent, RedisString};

use super::hash_slots::{Build, HashSlots};
use super::load_save::read_counter;
use super::write;
use crate::args::{parse_duration, parse_i64_in, parse_key_count, set_once, Args};
use crate::cmddocs::{block, integer, pure_token, string, Doc, AT, KEY, KEYS, NUMKEYS};
use crate::counter::model::limit::{
    check, check_sums_only, decide_all, Check, Decision, Outcome, MAX_KEYS, MAX_LIMITS,
};
use crate::counter::model::Counter;
use crate::error::{Error, Result};
use crate::host::cmdinfo;
use crate::host::cmdinfo::{command, first_key, Command, KeyAt, KeySpec, UPDATE};
use crate::host::config;
use crate::host::reply::Reply;
use crate::host::server::command_now_ms;
use crate::host::store::{notify, notify_bytes, Key, KeyKind};
use crate::window::effective_time;

/// The options after the pairs, in any order.
const OPTIONS: [&str; 2] = ["AT", "DETAILS"];

pub const LIMIT: Command = command! {
    c"tscounter.limit" => limit, -5, c"write deny-oom", &[first_key(UPDATE)], c"write", &LIMIT_DOC
};

const LIMIT_DOC: Doc = Doc {
    summary: c"Apply an increment only if every window's sum stays within its maximum",
    complexity: c"O(P + S) where P is the number of window/max pairs and S the number of slots the windows cover, plus TSCOUNTER.INCRBY's cost when the increment is applied",
    args: &[
        KEY,
        integer(c"increment"),
        block(c"limit", &[string(c"window"), integer(c"max")]).multiple(),
        AT,
        pure_token(c"details", c"DETAILS").optional(),
    ],
};

/// TSCOUNTER.LIMIT key increment window max [window max ...] [AT ts] [DETAILS]
pub fn limit(ctx: &Context, name: &RedisString, rest: &[&[u8]]) -> Result<Reply> {
    let mut args = Args::new(rest);
    let increment = parse_increment(&mut args)?;
    let pair_args = args.values_until(0, &OPTIONS);
    if pair_args.is_empty() || !pair_args.len().is_multiple_of(2) {
        return Err(Error::Syntax);
    }
    let limits = parse_pairs(pair_args.len() / 2, &mut Args::new(pair_args))?;
    let now = command_now_ms();
    let (ts, details) = parse_options(&mut args, now)?;
    let key = Key::open(ctx, name, false);
    if increment == 0 || key.kind() != KeyKind::Hash {
        // A check only, or a key that may not exist: decide without writing (a refusal
        // must not create the key).
        let only = Some(details);
        let read = check_read_only(
            ctx,
            &key,
            name.as_slice(),
            now,
            ts,
            increment,
            &limits,
            only,
        )?;
        let decision = decide_all(&[read], details)?;
        if !decision.allowed || increment == 0 {
            return Ok(reply(decision, false));
        }
    }
    drop(key);
    let key = Key::open(ctx, name, true);
    let decision = write::change(
        ctx,
        &key,
        (name.as_slice(), Some(name)),
        now,
        |counter, slots| {
            let read = match check_sums_only(counter, slots, now, ts, increment, &limits, details)?
            {
                Some(read) => read,
                None => check(counter, slots, now, ts, increment, &limits, false)?,
            };
            let decision = decide_all(&[read], details)?;
            if decision.allowed {
                counter.incrby(slots, now, ts, increment)?;
            }
            let applied = decision.allowed;
            Ok((decision, applied))
        },
    )?;
    drop(key);
    if decision.allowed {
        notify(ctx, NotifyEvent::HASH, c"tscounter.limit", name);
    }
    Ok(reply(decision, false))
}

/// `numkeys key [key ...]`: counted keys, so cluster routing, CROSSSLOT and ACL checks
/// cover each of them.
const COUNTED_KEYS: &[KeySpec] = &[KeySpec {
    at: KeyAt::Counted(1),
    flags: UPDATE,
}];

pub const MLIMIT: Command = command! {
    c"tscounter.mlimit" => mlimit, -7, c"write deny-oom getkeys-api", COUNTED_KEYS, c"write", &MLIMIT_DOC
};

const MLIMIT_DOC: Doc = Doc {
    summary: c"Apply an increment to several counters only if every window of every counter stays within its maximum",
    complexity: c"O(K * (P + S)) where K is the number of keys, P the number of window/max pairs of a key and S the number of slots its windows cover, plus TSCOUNTER.INCRBY's cost per key when the increment is applied",
    args: &[
        NUMKEYS,
        KEYS,
        integer(c"increment"),
        block(
            c"key_limits",
            &[
                integer(c"npairs"),
                block(c"limit", &[string(c"window"), integer(c"max")]).multiple(),
            ],
        )
        .multiple(),
        AT,
        pure_token(c"details", c"DETAILS").optional(),
    ],
};

/// TSCOUNTER.MLIMIT numkeys key [key ...] increment npairs window max [window max ...]
/// [npairs window max ...] [AT ts] [DETAILS]
///
/// All or nothing across the keys: every argument is parsed and every key read, type
/// checked and decided before the first write; the increment then goes to every key.
pub fn mlimit(ctx: &Context, numkeys: &RedisString, rest: &[&[u8]]) -> Result<Reply> {
    if cmdinfo::answered_counted_keys(ctx, numkeys.as_slice(), rest.len(), MAX_KEYS) {
        return Ok(Reply::Nil);
    }
    let count = key_count(numkeys.as_slice())?;
    let (names, rest) = rest.split_at_checked(count).ok_or(Error::Syntax)?;
    if names
        .iter()
        .enumerate()
        .any(|(i, name)| names.get(..i).is_some_and(|before| before.contains(name)))
    {
        return Err(Error::Syntax);
    }
    let mut args = Args::new(rest);
    let increment = parse_increment(&mut args)?;
    let mut limits = Vec::with_capacity(count);
    for _ in names {
        let npairs = usize::try_from(args.next_i64_in(1..=16, NPAIRS_FORM)?)
            .ok()
            .filter(|n| (1..=MAX_LIMITS).contains(n))
            .ok_or(Error::IntegerArg(NPAIRS_FORM))?;
        limits.push(parse_pairs(npairs, &mut args)?);
    }
    let now = command_now_ms();
    let (ts, details) = parse_options(&mut args, now)?;
    // Every key read and decided first (each handle closed before the next opens).
    let mut checks: Vec<Check> = Vec::with_capacity(count);
    for (&name, pairs) in names.iter().zip(&limits) {
        let key = Key::open_bytes(ctx, name, false).ok_or(Error::WrongType)?;
        checks.push(check_read_only(
            ctx, &key, name, now, ts, increment, pairs, None,
        )?);
    }
    let decision = decide_all(&checks, details)?;
    drop(checks);
    if decision.allowed && increment != 0 {
        // Each key's increment was checked above (kept range, overflow) on the data it
        // is now applied to: the keys are distinct, so writing one changes no other.
        for &name in names {
            let key = Key::open_bytes(ctx, name, true).ok_or(Error::WrongType)?;
            write::change(ctx, &key, (name, None), now, |counter, slots| {
                counter.incrby(slots, now, ts, increment)?;
                Ok(((), true))
            })?;
            notify_bytes(ctx, NotifyEvent::HASH, c"tscounter.limit", name);
        }
    }
    Ok(reply(decision, true))
}

/// `numkeys`: an integer from 1 to [`MAX_KEYS`].
fn key_count(numkeys: &[u8]) -> Result<usize> {
    parse_key_count(numkeys, MAX_KEYS)
}

/// What MLIMIT's `npairs` is (MAX_LIMITS pairs at most), said when it is not.
const NPAIRS_FORM: &str =
    "npairs (the window/max pairs of the next key) is an integer from 1 to 16";

/// The increment: an integer >= 0.
fn parse_increment(args: &mut Args) -> Result<i64> {
    args.next_i64_in(0.., "increment is an integer >= 0")
}

/// `npairs` pairs `window max` from `args`: 1 to [`MAX_LIMITS`] of them; a missing value,
/// or an option word where a value belongs, is a syntax error.
fn parse_pairs(npairs: usize, args: &mut Args) -> Result<Vec<(i64, i64)>> {
    if !(1..=MAX_LIMITS).contains(&npairs) {
        return Err(Error::Syntax);
    }
    let mut limits = Vec::with_capacity(npairs);
    for _ in 0..npairs {
        let (window, max) = (args.next_bytes()?, args.next_bytes()?);
        let is_option = |arg: &[u8]| {
            OPTIONS
                .iter()
                .any(|o| arg.eq_ignore_ascii_case(o.as_bytes()))
        };
        if is_option(window) || is_option(max) {
            return Err(Error::Syntax);
        }
        let window = parse_duration(window)?;
        let max = parse_i64_in(max, 0.., "max (of a window max pair) is an integer >= 0")?;
        limits.push((window, max));
    }
    Ok(limits)
}

/// `[AT ts] [DETAILS]`, in any order, each at most once: the call's time (resolved against
/// `now`) and whether DETAILS was given.
fn parse_options(args: &mut Args, now: i64) -> Result<(i64, bool)> {
    let (mut at, mut details) = (None, None);
    while !args.is_done() {
        match args.next_keyword()?.as_str() {
            "AT" => set_once(&mut at, args.next_timestamp()?)?,
            "DETAILS" => set_once(&mut details, true)?,
            _ => return Err(Error::Syntax),
        }
    }
    let ts = effective_time(at, now, config::max_future_ms()).ok_or(Error::TooFarInFuture)?;
    Ok((ts, details.is_some()))
}

/// One key's pairs read from its stored counter (or an empty one with the default
/// resolutions for a missing key), without writing anything. The increment's dry run is
/// included: a call over several keys must know before its first write that every key
/// takes it. `alone` is `Some(details)` for a call of one key, which may then be answered
/// from the sums when its increment is 0 (a check only; see `check_sums_only`).
#[allow(clippy::too_many_arguments)]
fn check_read_only(
    ctx: &Context,
    key: &Key,
    name: &[u8],
    now: i64,
    ts: i64,
    increment: i64,
    limits: &[(i64, i64)],
    alone: Option<bool>,
) -> Result<Check> {
    let read = read_counter(ctx, key, name, now, |counter, slots| {
        if let (Some(details), 0) = (alone, increment) {
            if let Some(read) = check_sums_only(counter, slots, now, ts, 0, limits, details)? {
                return Ok(read);
            }
        }
        check(counter, slots, now, ts, increment, limits, true)
    })?;
    match read {
        Some(read) => Ok(read),
        None => {
            let empty = Counter::new(super::family_config::COUNTER_RESOLUTIONS.get());
            let mut slots = HashSlots::open(ctx, key, name, Build::Never);
            check(&empty, &mut slots, now, ts, increment, limits, true)
        }
    }
}

/// `[allowed, retry_after_ms, third]`, the same in RESP2 and RESP3: `third` is the one
/// key's windows for LIMIT, an array of them per key for MLIMIT (`per_key`).
fn reply(decision: Decision, per_key: bool) -> Reply {
    let Decision {
        allowed,
        retry_after_ms,
        keys,
    } = decision;
    let third = if per_key {
        Reply::Array(keys.into_iter().map(windows_reply).collect())
    } else {
        keys.into_iter()
            .next()
            .map_or(Reply::Array(Vec::new()), windows_reply)
    };
    Reply::Array(vec![
        Reply::Int(i64::from(allowed)),
        Reply::Int(retry_after_ms),
        third,
    ])
}

/// A key's windows: their sums, or with DETAILS `[sum, remaining, reset_ms]` each.
fn windows_reply(outcome: Outcome) -> Reply {
    match outcome.details {
        Some(details) => Reply::Array(
            details
                .into_iter()
                .map(|detail| Reply::Ints(detail.to_vec()))
                .collect(),
        ),
        None => Reply::Ints(outcome.sums),
    }
}
