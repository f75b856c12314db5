//! STATS.GET, STATS.QUANTILE and STATS.CDF: reads of one merged window (from the read
//! cache of windows when it holds it).
//!
//! Owns: parsing and answering these three reads. May not touch: raw module calls, writes.

use super::*;
use crate::cmddocs::{double, Doc, KEY, WINDOW};

pub const GET: Command = command! {
    c"stats.get" => get, -2, c"readonly", &[first_key(READ)], c"read", &GET_DOC
};

const GET_DOC: Doc = Doc {
    summary: c"Get count, sum, min, max, mean, stddev and percentiles over the current period or a window",
    complexity: c"O(P * B) where P is the number of periods merged (1 without WINDOW, at most 2000) and B the number of quantile-sketch buckets of a period",
    args: &[KEY, WINDOW],
};

/// STATS.GET key [WINDOW dur]
pub fn get(ctx: &Context, name: &RedisString, rest: &[&[u8]]) -> Result<Reply> {
    let window = parse_window(&mut Args::new(rest))?;
    let (key, settings, periods) = open_window(ctx, name, window)?;
    let Some(settings) = settings else {
        return Ok(Reply::Nil);
    };
    let (lo, hi) = settings.window_range(command_now_ms(), periods);
    let (db, name) = (selected_db(ctx), name.as_slice());
    let cached = memory()
        .windows(|w| w.summary(db, name, &settings, lo, hi))
        .flatten();
    memory().count_read(cached.is_some());
    let summary = match cached {
        Some(summary) => summary,
        None => {
            let mut admission = Admission::new(ctx, db, name);
            let summary = window_record(&key, &settings, (lo, hi), &mut admission)
                .0
                .summary()
                .map(|s| Rc::new(ShownSummary::new(&s)));
            let admit = admission.admit(&key);
            let stored = summary.clone();
            memory().windows(|w| w.store_summary(db, name, settings, lo, hi, stored, admit));
            summary
        }
    };
    Ok(summary.map_or(Reply::Nil, Reply::Summary))
}

/// The merged record of the window that the rest of `args` (`[WINDOW dur]`) asks of
/// `name` now, for QUANTILE and CDF; `None` for a missing key.
fn merged_window(ctx: &Context, name: &RedisString, args: &mut Args) -> Result<Option<Record>> {
    let window = parse_window(args)?;
    let (key, settings, periods) = open_window(ctx, name, window)?;
    let Some(settings) = settings else {
        return Ok(None);
    };
    let (lo, hi) = settings.window_range(command_now_ms(), periods);
    let (db, name) = (selected_db(ctx), name.as_slice());
    let mut admission = Admission::new(ctx, db, name);
    let (record, hit) = window_record(&key, &settings, (lo, hi), &mut admission);
    memory().count_read(hit);
    Ok(Some(record))
}

pub const QUANTILE: Command = command! {
    c"stats.quantile" => quantile, -3, c"readonly", &[first_key(READ)], c"read", &QUANTILE_DOC
};

const QUANTILE_DOC: Doc = Doc {
    summary: c"Estimate quantiles over the current period or a window",
    complexity: c"O(P * B + Q * log(Q)) where P is the number of periods merged (1 without WINDOW, at most 2000), B the number of quantile-sketch buckets of a period and Q the number of quantiles",
    args: &[KEY, double(c"q").multiple(), WINDOW],
};

/// STATS.QUANTILE key q [q ...] [WINDOW dur]
pub fn quantile(ctx: &Context, name: &RedisString, rest: &[&[u8]]) -> Result<Reply> {
    let mut args = Args::new(rest);
    let qs = parse_quantiles(&mut args, Error::NotFloat)?;
    let Some(record) = merged_window(ctx, name, &mut args)? else {
        return Ok(Reply::Nil);
    };
    Ok(quantiles_reply(&record, &qs))
}

/// The fractions `q [q ...]` up to `WINDOW` (at least one, each in [0, 1]).
pub(super) fn parse_quantiles(args: &mut Args, missing: Error) -> Result<Vec<f64>> {
    let q_args = args.values_until(0, &["WINDOW"]);
    if q_args.is_empty() {
        return Err(missing);
    }
    let mut qs = Vec::with_capacity(q_args.len());
    for arg in q_args {
        qs.push(check_quantile(parse_finite_f64(arg)?)?);
    }
    Ok(qs)
}

/// QUANTILE's reply for `record`: nil when it is empty.
pub(super) fn quantiles_reply(record: &Record, qs: &[f64]) -> Reply {
    if record.count() == 0 {
        return Reply::Nil;
    }
    // One sorted walk of the merged sketch for all the fractions.
    Reply::Array(
        record
            .quantiles(qs)
            .into_iter()
            .map(|v| v.map_or(Reply::Nil, Reply::Double))
            .collect(),
    )
}

pub const CDF: Command = command! {
    c"stats.cdf" => cdf, -3, c"readonly", &[first_key(READ)], c"read", &CDF_DOC
};

const CDF_DOC: Doc = Doc {
    summary: c"Estimate the share of values at or below each value over the current period or a window",
    complexity: c"O(P * B + V * log(V)) where P is the number of periods merged (1 without WINDOW, at most 2000), B the number of quantile-sketch buckets of a period and V the number of values",
    args: &[KEY, double(c"value").multiple(), WINDOW],
};

/// STATS.CDF key value [value ...] [WINDOW dur]
///
/// The share of the window's values at or below each value, in order, from the same
/// merged sketch as QUANTILE; nil for an empty window or a missing key.
pub fn cdf(ctx: &Context, name: &RedisString, rest: &[&[u8]]) -> Result<Reply> {
    let mut args = Args::new(rest);
    let value_args = args.values_until(0, &["WINDOW"]);
    check_cdf_count(value_args.len())?;
    let mut values = Vec::with_capacity(value_args.len());
    for arg in value_args {
        values.push(check_value(parse_finite_f64(arg)?)?);
    }
    let Some(record) = merged_window(ctx, name, &mut args)? else {
        return Ok(Reply::Nil);
    };
    Ok(record.cdf(&values).map_or(Reply::Nil, |shares| {
        Reply::Array(shares.into_iter().map(Reply::Double).collect())
    }))
}
