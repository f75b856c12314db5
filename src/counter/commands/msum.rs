//! TSCOUNTER.MSUM: each window summed over several counters, every key read as its own
//! SUM reads it (the same mirror and parsed-counter caches), so a key costs no more here
//! than in a pipeline of SUMs.
//!
//! Owns: the MSUM command. May not touch: raw module calls, other families.

use redis_module::{Context, RedisString};

use super::check_default_windows;
use super::load_save::read_counter;
use crate::args::{parse_duration, parse_key_count, Args, MAX_READ_KEYS};
use crate::cmddocs::{string, Doc, AT, KEYS, NUMKEYS};
use crate::counter::model::{add_sums, distinct_names, finish_sums};
use crate::error::{Error, Result};
use crate::host::cmdinfo;
use crate::host::cmdinfo::{command, Command, KeyAt, KeySpec, READ};
use crate::host::reply::Reply;
use crate::host::server::command_now_ms;
use crate::host::store::Key;

/// `numkeys key [key ...]` of a read (MSUM).
const COUNTED_READ_KEYS: &[KeySpec] = &[KeySpec {
    at: KeyAt::Counted(1),
    flags: READ,
}];

pub const MSUM: Command = command! {
    c"tscounter.msum" => msum, -4, c"readonly getkeys-api", COUNTED_READ_KEYS, c"read", &MSUM_DOC
};

const MSUM_DOC: Doc = Doc {
    summary: c"Sum each window over several counters at once",
    complexity: c"O(K * W * S) where K is the number of keys, W the number of windows and S the number of slots a window covers: the cost of K TSCOUNTER.SUM calls",
    args: &[
        NUMKEYS,
        KEYS,
        string(c"window").multiple(),
        AT,
    ],
};

/// TSCOUNTER.MSUM numkeys key [key ...] window [window ...] [AT ts]
///
/// A missing key counts 0 (its windows checked against the default resolutions, as SUM
/// checks them); the first error a key's SUM would give is the reply. A key named twice
/// is read once and counts twice. The totals are exact whenever they fit in a signed
/// 64-bit integer, whatever the keys' order.
pub fn msum(ctx: &Context, numkeys: &RedisString, rest: &[&[u8]]) -> Result<Reply> {
    if cmdinfo::answered_counted_keys(ctx, numkeys.as_slice(), rest.len(), MAX_READ_KEYS) {
        return Ok(Reply::Nil);
    }
    let count = parse_key_count(numkeys.as_slice(), MAX_READ_KEYS)?;
    let (names, rest) = rest.split_at_checked(count).ok_or(Error::Syntax)?;
    let mut args = Args::new(rest);
    let window_args = args.values_until(1, &["AT"]);
    if window_args.is_empty() {
        return Err(Error::Syntax);
    }
    let windows = window_args
        .iter()
        .map(|arg| parse_duration(arg))
        .collect::<Result<Vec<i64>>>()?;
    let now = command_now_ms();
    let t = super::parse_at(&mut args, now)?;
    let mut totals = vec![0i128; windows.len()];
    let mut sums = vec![0i64; windows.len()];
    for (name, times) in distinct_names(names) {
        // Each handle is closed before the next key opens.
        let key = Key::open_bytes(ctx, name, false).ok_or(Error::WrongType)?;
        let found = read_counter(ctx, &key, name, now, |counter, slots| {
            counter.sum_into(slots, now, t, &windows, &mut sums)
        })?;
        match found {
            Some(()) => add_sums(&mut totals, &sums, times)?,
            None => check_default_windows(&windows)?,
        }
    }
    let totals = finish_sums(&totals)?;
    Ok(match totals.as_slice() {
        [single] => Reply::Int(*single),
        _ => Reply::Ints(totals),
    })
}
