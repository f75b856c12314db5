//! STATS.MGET and STATS.MQUANTILE: one summary of several objects, as if every value of
//! every key's window had been added to one object. Each key's window is read as its own
//! QUANTILE reads it (the read cache of closed periods, then the current period), and the
//! windows are merged in key order by the pure `crate::stats::model::KeysMerge`.
//!
//! Owns: parsing and answering the two reads across keys. May not touch: raw module calls,
//! writes.

use super::window_reads::{parse_quantiles, quantiles_reply};
use super::*;
use crate::args::{parse_key_count, MAX_READ_KEYS};
use crate::cmddocs::{double, Doc, KEYS, NUMKEYS, WINDOW};
use crate::stats::model::window_cache::{PackedRecord, Span};
use crate::stats::model::{distinct_names, KeysMerge};

/// `numkeys key [key ...]` of a read across keys (MGET, MQUANTILE).
const COUNTED_READ_KEYS: &[KeySpec] = &[KeySpec {
    at: KeyAt::Counted(1),
    flags: READ,
}];

pub const MGET: Command = command! {
    c"stats.mget" => mget, -3, c"readonly getkeys-api", COUNTED_READ_KEYS, c"read", &MGET_DOC
};

const MGET_DOC: Doc = Doc {
    summary: c"Get count, sum, min, max, mean, stddev and percentiles over the values of several objects' windows",
    complexity: c"O(K * P * B) where K is the number of keys, P the number of periods merged per key (1 without WINDOW, at most 2000) and B the number of quantile-sketch buckets of a period: the cost of K STATS.QUANTILE calls",
    args: &[
        NUMKEYS,
        KEYS,
        WINDOW,
    ],
};

/// STATS.MGET numkeys key [key ...] [WINDOW dur]
pub fn mget(ctx: &Context, numkeys: &RedisString, rest: &[&[u8]]) -> Result<Reply> {
    if cmdinfo::answered_counted_keys(ctx, numkeys.as_slice(), rest.len(), MAX_READ_KEYS) {
        return Ok(Reply::Nil);
    }
    let (names, mut args) = split_keys(numkeys, rest)?;
    let window = parse_window(&mut args)?;
    let merged = merge_windows(ctx, names, window)?;
    Ok(merged.summary().map_or(Reply::Nil, |s| {
        Reply::Summary(Rc::new(ShownSummary::new(&s)))
    }))
}

pub const MQUANTILE: Command = command! {
    c"stats.mquantile" => mquantile, -4, c"readonly getkeys-api", COUNTED_READ_KEYS, c"read", &MQUANTILE_DOC
};

const MQUANTILE_DOC: Doc = Doc {
    summary: c"Estimate quantiles over the values of several objects' windows",
    complexity: c"O(K * P * B + Q * log(Q)) where K is the number of keys, P the number of periods merged per key (1 without WINDOW, at most 2000), B the number of quantile-sketch buckets of a period and Q the number of quantiles",
    args: &[
        NUMKEYS,
        KEYS,
        double(c"q").multiple(),
        WINDOW,
    ],
};

/// STATS.MQUANTILE numkeys key [key ...] q [q ...] [WINDOW dur]
pub fn mquantile(ctx: &Context, numkeys: &RedisString, rest: &[&[u8]]) -> Result<Reply> {
    if cmdinfo::answered_counted_keys(ctx, numkeys.as_slice(), rest.len(), MAX_READ_KEYS) {
        return Ok(Reply::Nil);
    }
    let (names, mut args) = split_keys(numkeys, rest)?;
    // No quantile after the keys: the arguments stop short, a syntax error (QUANTILE's
    // `key WINDOW dur` reads WINDOW where a number belongs, and says so).
    let qs = parse_quantiles(&mut args, Error::Syntax)?;
    let window = parse_window(&mut args)?;
    Ok(quantiles_reply(&merge_windows(ctx, names, window)?, &qs))
}

/// The keys (1 to [`MAX_READ_KEYS`]) and the arguments after them.
fn split_keys<'a>(
    numkeys: &RedisString,
    rest: &'a [&'a [u8]],
) -> Result<(&'a [&'a [u8]], Args<'a>)> {
    let count = parse_key_count(numkeys.as_slice(), MAX_READ_KEYS)?;
    let (names, rest) = rest.split_at_checked(count).ok_or(Error::Syntax)?;
    Ok((names, Args::new(rest)))
}

/// The union of the keys' windows: each key's `WINDOW` resolved by its own period (a
/// missing key by the defaults, as GET resolves it, and adds nothing); the first error a
/// key's GET would give is the reply. Each distinct key is opened and read once: a key
/// named several times adds its window again at each place it is named (its values
/// count as often as it is named), merged in the order the keys are named, so the
/// answer is the one every name read on its own would give. Each key's window comes
/// from the read cache of windows when it holds it (a repeated read of unchanged keys
/// decodes nothing), else from the hash, and is cached for the next read.
fn merge_windows(ctx: &Context, names: &[&[u8]], window: Option<i64>) -> Result<Record> {
    let now = command_now_ms();
    let db = selected_db(ctx);
    let (distinct, at) = distinct_names(names);
    // The window of each distinct key (`None`: a missing key).
    let mut windows: Vec<Option<Rc<PackedRecord>>> = Vec::with_capacity(distinct.len());
    for &name in &distinct {
        // Each handle is closed before the next key opens.
        let key = Key::open_bytes(ctx, name, false).ok_or(Error::WrongType)?;
        let settings = load(&key)?;
        let periods = settings
            .unwrap_or_else(default_settings)
            .window_periods(window)?;
        let Some(settings) = settings else {
            windows.push(None);
            continue;
        };
        let (lo, hi) = settings.window_range(now, periods);
        let cached = memory()
            .windows(|w| w.merge(db, name, &settings, (lo, hi), Span::Whole))
            .flatten();
        memory().count_read(cached.is_some());
        let merged = match cached {
            Some(merged) => merged,
            None => {
                let mut admission = Admission::new(ctx, db, name);
                let record = window_record(&key, &settings, (lo, hi), &mut admission).0;
                let merged = Rc::new(PackedRecord::pack(&record));
                let admit = admission.admit(&key);
                let stored = Rc::clone(&merged);
                memory().windows(|w| {
                    w.store_merge(db, name, settings, (lo, hi), Span::Whole, stored, admit)
                });
                merged
            }
        };
        windows.push(Some(merged));
    }
    // Each distinct key's sketch once, times the number of its names; the moments at
    // every name, in the order named.
    let mut times = vec![0u64; windows.len()];
    for &i in &at {
        if let Some(t) = times.get_mut(i) {
            *t += 1;
        }
    }
    let mut merge = KeysMerge::default();
    let added: Vec<bool> = (windows.iter().zip(&times))
        .map(|(window, &t)| window.as_ref().is_some_and(|w| merge.add_sketch(w, t)))
        .collect();
    for &i in &at {
        if let (Some(Some(window)), Some(true)) = (windows.get(i), added.get(i)) {
            merge.add_moments(window);
        }
    }
    Ok(merge.finish())
}
