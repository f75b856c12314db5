//! STATS.*: windowed statistics on one native hash per object (layout: `crate::stats`).
//! Every argument is parsed and every key checked before the first write; writes are
//! replicated as HSET/HDEL/DEL effects on the hash and ZADD/ZREM on a REPORT zset.
//!
//! Owns: the STATS commands and the stats expiry visit. May not touch: raw module calls
//! (through `store`, `replicate`, `server`, `cmdinfo`), other families.

use std::os::raw::c_int;
use std::rc::Rc;

use redis_module::{Context, NotifyEvent, RedisString};

use crate::args::{parse_finite_f64, parse_i64, push_f64, set_once, Args};
use crate::cmddocs::{
    block, double, integer, pure_token, string, Arg, Doc, Kind, AT, FROM, KEY, TO,
};
use crate::error::{Error, Result};
use crate::expiry::{self, Visit};
use crate::host::cmdinfo;
use crate::host::cmdinfo::{command, first_key, Command, KeyAt, KeySpec, INSERT, READ, UPDATE};
use crate::host::config;
use crate::host::replicate::{Effects, HashEffects};
use crate::host::reply::Reply;
use crate::host::server::{command_now_ms, selected_db};
use crate::host::store::{notify, notify_bytes, Key, KeyKind, RStr};
use crate::layout::MARKER_FIELD;
use crate::stats::model::window_cache::Admit;
use crate::stats::model::{
    check_cdf_count, check_quantile, check_value, parse_keep, Record, ReportStat, Settings,
    ShownSummary,
};
use crate::window::effective_time;

pub mod family_config;
mod multi;
mod periods;
mod stats_memory;
mod window_reads;

use stats_memory::memory;

use periods::{
    default_settings, inventory, last_settings, load, load_periods, read_period, window_record,
    PeriodFields, DEFAULT_REPORT_KEEP,
};
/// Estimated bytes the family holds in memory (its read cache of windows).
pub use stats_memory::bytes as cache_bytes;

/// The family's commands, in registration order, each written beside its handler.
pub const COMMANDS: &[Command] = &[
    CREATE,
    ADD,
    window_reads::GET,
    window_reads::QUANTILE,
    window_reads::CDF,
    RANGE,
    INFO,
    multi::MGET,
    multi::MQUANTILE,
];

/// `key`, and `REPORT rankkey`: a declared key, so cluster routing, CROSSSLOT and ACL
/// checks cover it. Values are numbers, never the word REPORT.
const STATS_ADD_KEYS: &[KeySpec] = &[
    first_key(UPDATE),
    KeySpec {
        at: KeyAt::AfterKeyword(c"REPORT", 3),
        flags: UPDATE,
    },
];

/// This family, for the layer around the families.
pub const FAMILY: crate::family::Family = crate::family::Family {
    marker_word: Some(crate::layout::STATS),
    expire,
    on_keyspace_event: forget_cached,
    forget: |db, name| memory().forget(db, name),
    flushed: |_| forget_all(),
    swapped: |_, _| forget_all(),
    loading: forget_all,
    info: || {
        let (hits, misses) = memory().reads();
        vec![
            (c"stats_cache_hits", i64::try_from(hits).unwrap_or(i64::MAX)),
            (
                c"stats_cache_misses",
                i64::try_from(misses).unwrap_or(i64::MAX),
            ),
        ]
    },
    // Everything it keeps in memory is a cache, counted here; no other state.
    cache_bytes,
    ..crate::family::Family::new(COMMANDS, "stats.")
};

/// Any event on a key may change it behind the read cache: drop its cached windows.
fn forget_cached(ctx: &Context, _class: NotifyEvent, _event: &str, key: &[u8]) {
    memory().forget(selected_db(ctx), key);
}

/// `stats::forget_all` for the server hooks (flush, SWAPDB, loading).
pub fn forget_all() {
    memory().forget_all();
}

/// The map GET and RANGE send for a summary: the count, then the doubles.
fn summary_map(count: u64, doubles: impl Iterator<Item = (&'static str, Reply)>) -> Reply {
    let mut fields = Vec::with_capacity(9);
    fields.push((
        "count",
        Reply::Int(i64::try_from(count).unwrap_or(i64::MAX)),
    ));
    fields.extend(doubles);
    Reply::Map(fields)
}

/// Parses an optional trailing `WINDOW dur` (the only option of GET and QUANTILE).
fn parse_window(args: &mut Args) -> Result<Option<i64>> {
    let mut window = None;
    while !args.is_done() {
        match args.next_keyword()?.as_str() {
            "WINDOW" => set_once(&mut window, args.next_duration()?)?,
            _ => return Err(Error::Syntax),
        }
    }
    Ok(window)
}

/// Opens `name` and resolves the window: the object's settings (or the defaults for a
/// missing key, so a bad WINDOW is an error either way) and the number of periods.
fn open_window(
    ctx: &Context,
    name: &RedisString,
    window: Option<i64>,
) -> Result<(Key, Option<Settings>, i64)> {
    let key = Key::open(ctx, name, false);
    let settings = load(&key)?;
    let periods = settings
        .unwrap_or_else(default_settings)
        .window_periods(window)?;
    Ok((key, settings, periods))
}

// ------------------------------------------------------------------------- commands

pub const CREATE: Command = command! {
    c"stats.create" => create, -2, c"write deny-oom", &[first_key(INSERT)], c"write", &CREATE_DOC
};

const CREATE_DOC: Doc = Doc {
    summary: c"Create a windowed statistics object",
    complexity: c"O(1)",
    args: &[
        KEY,
        string(c"dur").token(c"PERIOD").optional(),
        integer(c"n").token(c"KEEP").optional(),
    ],
};

/// STATS.CREATE key [PERIOD dur] [KEEP n]
pub fn create(ctx: &Context, name: &RedisString, rest: &[&[u8]]) -> Result<Reply> {
    let mut args = Args::new(rest);
    let (mut period, mut keep) = (None, None);
    while !args.is_done() {
        match args.next_keyword()?.as_str() {
            "PERIOD" => set_once(&mut period, args.next_duration()?)?,
            "KEEP" => set_once(&mut keep, parse_keep(args.next_bytes()?)?)?,
            _ => return Err(Error::Syntax),
        }
    }
    let defaults = default_settings();
    let settings = Settings::new(
        period.unwrap_or(defaults.period),
        keep.unwrap_or(defaults.keep),
    )?;
    let key = Key::open(ctx, name, true);
    if key.kind() != KeyKind::Empty {
        return Err(Error::KeyExists);
    }
    let marker = settings.marker();
    key.hset(MARKER_FIELD.as_bytes(), marker.as_bytes());
    let mut effects = HashEffects::default();
    effects.set(MARKER_FIELD, marker);
    effects.emit(ctx, name.as_slice());
    // The key was missing, so nothing should be cached for it: make sure.
    memory().forget(selected_db(ctx), name.as_slice());
    notify(ctx, NotifyEvent::HASH, c"stats.create", name);
    Ok(Reply::Ok)
}

/// `REPORT rankkey member [KEEP n] [BY stat]` of STATS.ADD.
struct Report<'a> {
    rankkey: &'a [u8],
    member: &'a [u8],
    keep: i64,
    by: ReportStat,
}

pub const ADD: Command = command! {
    c"stats.add" => add, -3, c"write deny-oom getkeys-api", STATS_ADD_KEYS, c"write", &ADD_DOC
};

const ADD_DOC: Doc = Doc {
    summary: c"Add values to the statistics of their period, optionally ranking the period by its mean or another statistic",
    complexity: c"O(V + B) where V is the number of values and B the number of quantile-sketch buckets of the period (its sketch is read and rewritten); with REPORT, plus O(log(N)) where N is the number of members of the ranking, and O(B) more to rank by a quantile (BY p50, p90 or p99)",
    args: &[
        KEY,
        double(c"value").multiple(),
        AT,
        block(
            c"report",
            &[
                Arg::new(c"rankkey", Kind::Key(1)),
                string(c"member"),
                integer(c"n").token(c"KEEP").optional(),
                Arg {
                    args: &[
                        pure_token(c"mean", c"MEAN"),
                        pure_token(c"max", c"MAX"),
                        pure_token(c"count", c"COUNT"),
                        pure_token(c"sum", c"SUM"),
                        pure_token(c"p50", c"P50"),
                        pure_token(c"p90", c"P90"),
                        pure_token(c"p99", c"P99"),
                    ],
                    ..Arg::new(c"stat", Kind::OneOf)
                }
                .token(c"BY")
                .optional(),
            ],
        )
        .token(c"REPORT")
        .optional(),
    ],
};

/// STATS.ADD key value [value ...] [AT ts] [REPORT rankkey member [KEEP n] [BY stat]]
///
/// Replies with the number of values in the period the values went to (the current
/// period without AT), and REPORT ranks that period by `stat` (its mean by default).
pub fn add(ctx: &Context, name: &RedisString, rest: &[&[u8]]) -> Result<Reply> {
    if cmdinfo::is_keys_position_request(ctx) {
        report_key_positions(ctx, rest);
        return Ok(Reply::Nil);
    }
    let mut args = Args::new(rest);
    let value_args = args.values_until(1, &["AT", "REPORT"]);
    let mut values = Vec::with_capacity(value_args.len());
    for arg in value_args {
        values.push(check_value(parse_finite_f64(arg)?)?);
    }
    let (mut at, mut report) = (None, None);
    while !args.is_done() {
        match args.next_keyword()?.as_str() {
            "AT" => set_once(&mut at, args.next_timestamp()?)?,
            "REPORT" => {
                let rankkey = args.next_bytes()?;
                let member = args.next_bytes()?;
                let (keep, by) = parse_report_options(&mut args)?;
                set_once(
                    &mut report,
                    Report {
                        rankkey,
                        member,
                        keep,
                        by,
                    },
                )?;
            }
            _ => return Err(Error::Syntax),
        }
    }
    let now = command_now_ms();
    let ts = effective_time(at, now, config::max_future_ms()).ok_or(Error::TooFarInFuture)?;

    let key = Key::open(ctx, name, true);
    let exists = match key.kind() {
        KeyKind::Empty => false,
        KeyKind::Hash => true,
        _ => return Err(Error::WrongType),
    };
    // The field names depend on the period, which the marker holds: guess the settings
    // of the last object seen, so the marker and both fields come in one read, and read
    // again only if the guess was wrong. Nothing is written until every check passed.
    let mut sketch_out = Vec::new();
    let (stored, previous, read_fields) = if exists {
        let guess = last_settings().unwrap_or_else(default_settings);
        match read_period(&key, &guess, ts, &values, &mut sketch_out)? {
            (settings, previous, fields) if settings == guess => {
                (Some(settings), previous, Some(fields))
            }
            (settings, _, _) => {
                let (_, previous, fields) =
                    read_period(&key, &settings, ts, &values, &mut sketch_out)?;
                (Some(settings), previous, Some(fields))
            }
        }
    } else {
        (None, None, None)
    };
    let mut rank = match &report {
        Some(r) => {
            // The statistics hash cannot also be the ranking zset.
            if r.rankkey == name.as_slice() {
                return Err(Error::WrongType);
            }
            let rank = Key::open_bytes(ctx, r.rankkey, true).ok_or(Error::WrongType)?;
            if !matches!(rank.kind(), KeyKind::Empty | KeyKind::Zset) {
                return Err(Error::WrongType);
            }
            Some(rank)
        }
        None => None,
    };
    let settings = stored.unwrap_or_else(default_settings);
    let index = settings.write_index(ts, now)?;

    // Everything is checked: from here on the command writes.
    let start = settings.start(index);
    // A missing or damaged period (a user's HSET/HDEL) starts afresh.
    let new_period = previous.is_none();
    let moments = match previous {
        Some(moments) => moments,
        None => {
            let mut record = Record::default();
            for &v in &values {
                record.add(v);
            }
            sketch_out = record.sketch.encode();
            record.moments
        }
    };
    let m_bytes = moments.encode();
    let mut effects = HashEffects::default();
    if stored.is_none() {
        let marker = settings.marker();
        key.hset(MARKER_FIELD.as_bytes(), marker.as_bytes());
        effects.set(MARKER_FIELD, marker);
    }
    // The read named the fields of this very period (the index is the period of `ts`
    // under the stored settings): its strings serve the write and its effects.
    let fields = match read_fields.filter(|f| f.start == start) {
        Some(fields) => Some(fields),
        None => PeriodFields::new(start),
    };
    let (Some(fields), Some(m_value), Some(q_value)) =
        (fields, RStr::new(&m_bytes), RStr::new(&sketch_out))
    else {
        return Err(Error::Invalid("out of memory".into()));
    };
    // The value strings go to the key and then to the effects as they are (the server
    // copies them into the hash and keeps a reference for the replicated HSET).
    let first = effects.len();
    effects.set_strings(&fields.moments_name, m_value);
    effects.set_strings(&fields.sketch_name, q_value);
    key.hset_many(effects.sets_since(first));
    if new_period {
        // The timer drops the periods as they leave; it visits the key when the oldest
        // stored one leaves (its visits keep that time). This period leaves at the
        // latest then, so it is the time to ask for when the key had no visit pending;
        // an earlier pending one is kept. No scan of the hash here: a write costs the
        // same whatever the hash holds.
        expiry::schedule(ctx, name.as_slice(), settings.leaves_at(index));
    }
    effects.emit(ctx, name.as_slice());
    // tally's own event reaches no hook: the read cache is told here.
    memory().wrote(selected_db(ctx), name.as_slice(), index);
    notify(ctx, NotifyEvent::HASH, c"stats.add", name);

    if let (Some(r), Some(rank)) = (&report, &mut rank) {
        report_score(ctx, rank, r, r.by.score(&moments, &sketch_out));
    }
    Ok(Reply::Int(i64::try_from(moments.count).unwrap_or(i64::MAX)))
}

/// Tells Redis where STATS.ADD's keys are: `key`, and `rankkey` after REPORT.
///
/// Why a callback when the key specs already say so: Redis 7.0 and Valkey route cluster
/// commands (and answer CROSSSLOT) with the legacy first/last/step range of a module
/// command, which cannot express a key after a keyword; with `getkeys-api` they ask the
/// module instead. Same search as the key spec: the first REPORT from argument 3 on.
fn report_key_positions(ctx: &Context, rest: &[&[u8]]) {
    cmdinfo::key_at(ctx, 1);
    let report = rest
        .iter()
        .skip(1)
        .position(|a| a.eq_ignore_ascii_case(b"REPORT"));
    if let Some(p) = report {
        // argv index: command name, key, then rest[p + 1] is REPORT, rest[p + 2] rankkey.
        let rankkey_at = p + 2 + 2;
        if rankkey_at < rest.len() + 2 {
            if let Ok(pos) = c_int::try_from(rankkey_at) {
                cmdinfo::key_at(ctx, pos);
            }
        }
    }
}

/// Deletes the periods no longer kept at `now`, and the key if that leaves none (an
/// object never written to keeps its settings). `key` is only read (and closed before the write); the key is opened
/// for writing only when there is something to delete, so a visit that changes nothing
/// does not touch it (WATCH, client-side caching). Returns when the next period leaves.
fn trim(ctx: &Context, key: Key, name: &[u8], settings: &Settings, now: i64) -> Option<i64> {
    let inv = inventory(&key, settings, now);
    if inv.stale.is_empty() {
        return inv.oldest_kept.map(|oldest| settings.leaves_at(oldest));
    }
    // Close the read handle first: the writer may unlink the key, and closing a handle
    // whose value another handle freed reads freed memory (Valkey 9 crashed on it).
    drop(key);
    let Some(writer) = Key::open_bytes(ctx, name, true) else {
        return Some(now);
    };
    let mut effects = HashEffects::default();
    if inv.oldest_kept.is_none() {
        writer.unlink();
        effects.delete_key();
        crate::family::forget_deleted(ctx, name);
    } else {
        for stale in &inv.stale {
            if writer.hdel(stale) {
                effects.del(stale.clone());
            }
        }
    }
    drop(writer);
    // The expiry's deletions fire no event the hooks see.
    memory().forget(selected_db(ctx), name);
    if !effects.is_empty() {
        effects.emit(ctx, name);
    }
    if inv.stale_periods > 0 {
        expiry::count_expired(inv.stale_periods as u64);
    }
    inv.oldest_kept.map(|oldest| settings.leaves_at(oldest))
}

/// `[KEEP n] [BY stat]` after `REPORT rankkey member`, in either order, each at most
/// once: `n` (default [`DEFAULT_REPORT_KEEP`]) and the statistic (default the mean).
fn parse_report_options(args: &mut Args) -> Result<(i64, ReportStat)> {
    let (mut keep, mut by) = (None, None);
    loop {
        if args.eat_keyword("KEEP") {
            let n = parse_i64(args.next_bytes()?)?;
            if n < 1 {
                return Err(Error::Invalid(
                    "REPORT KEEP must be a positive integer".into(),
                ));
            }
            set_once(&mut keep, n)?;
        } else if args.eat_keyword("BY") {
            set_once(&mut by, ReportStat::parse(args.next_bytes()?)?)?;
        } else {
            break;
        }
    }
    Ok((keep.unwrap_or(DEFAULT_REPORT_KEEP), by.unwrap_or_default()))
}

/// REPORT: sets `member`'s score to `score` and keeps the `keep` highest members.
fn report_score(ctx: &Context, rank: &mut Key, report: &Report, score: f64) {
    let Some(member) = RStr::new(report.member) else {
        return;
    };
    if !rank.zadd(&member, score) {
        return;
    }
    let mut text = String::new();
    push_f64(&mut text, score);
    let mut effects = Effects::new();
    effects.keyed(c"ZADD", report.rankkey, &[text.as_bytes(), report.member]);
    let excess = (rank.len() as i64).saturating_sub(report.keep);
    if excess > 0 {
        let lowest: Vec<RStr> = rank
            .zfwd_iter()
            .take(usize::try_from(excess).unwrap_or(0))
            .filter_map(|(m, _)| RStr::new(&m))
            .collect();
        let removed: Vec<&[u8]> = lowest
            .iter()
            .filter(|m| rank.zrem(m))
            .map(RStr::as_bytes)
            .collect();
        if !removed.is_empty() {
            effects.keyed(c"ZREM", report.rankkey, &removed);
        }
    }
    effects.emit(ctx);
    notify_bytes(ctx, NotifyEvent::ZSET, c"zadd", report.rankkey);
}

/// The most fields a hash-field TTL question may name when admitting a STATS object to
/// the read cache (see `Key::has_field_ttls`): the fields of 256 periods and some
/// bookkeeping. Where the server cannot answer for the whole key at once (Valkey 9) the
/// question names every field, about 1 µs each; a larger object is not cached there, and
/// its reads merge its periods from the hash, which `MAX_KEEP` bounds.
const MAX_FIELDS_ASKED: usize = 2 * 256 + 16;

/// What a store into the read cache may do, asked at most once per command: the bytes
/// the budget leaves it, and whether `name` may be cached at all when it is not yet (its
/// hash has no field TTLs: an expired period counts in the hash's length until reclaimed,
/// so a cache of it could keep one). The field-TTL question is skipped when the budget
/// leaves nothing (on Valkey it names every field of the hash).
pub(super) struct Admission<'a> {
    ctx: &'a Context,
    db: c_int,
    name: &'a [u8],
    answer: Option<Admit>,
}

impl<'a> Admission<'a> {
    fn new(ctx: &'a Context, db: c_int, name: &'a [u8]) -> Self {
        Admission {
            ctx,
            db,
            name,
            answer: None,
        }
    }

    pub(super) fn admit(&mut self, key: &Key) -> Admit {
        if let Some(answer) = self.answer {
            return answer;
        }
        let limit = crate::family::cache_budget::stats_budget();
        let (db, name) = (self.db, self.name);
        let new_key = limit > 0
            && (memory().windows(|w| w.holds(db, name)).unwrap_or(false)
                || !key.has_field_ttls(self.ctx, name, MAX_FIELDS_ASKED));
        let answer = Admit { limit, new_key };
        self.answer = Some(answer);
        answer
    }
}

pub const RANGE: Command = command! {
    c"stats.range" => range, -2, c"readonly", &[first_key(READ)], c"read", &RANGE_DOC
};

const RANGE_DOC: Doc = Doc {
    summary: c"List the statistics of each stored period, oldest first",
    complexity: c"O(P * B) where P is the number of periods between FROM and TO and B the number of quantile-sketch buckets of a period",
    args: &[KEY, FROM, TO],
};

/// STATS.RANGE key [FROM ts] [TO ts]
pub fn range(ctx: &Context, name: &RedisString, rest: &[&[u8]]) -> Result<Reply> {
    let mut args = Args::new(rest);
    let (mut from, mut to) = (None, None);
    while !args.is_done() {
        match args.next_keyword()?.as_str() {
            "FROM" => set_once(&mut from, args.next_timestamp()?)?,
            "TO" => set_once(&mut to, args.next_timestamp()?)?,
            _ => return Err(Error::Syntax),
        }
    }
    let key = Key::open(ctx, name, false);
    let Some(settings) = load(&key)? else {
        return Ok(Reply::Array(Vec::new()));
    };
    let Some((lo, hi)) = settings.range_bounds(command_now_ms(), from, to) else {
        return Ok(Reply::Array(Vec::new()));
    };
    let rows = load_periods(&key, &settings, lo, hi)
        .into_iter()
        .filter_map(|(index, record)| {
            record.summary().map(|s| {
                let doubles = s.doubles().into_iter();
                let map = summary_map(s.count, doubles.map(|(n, v)| (n, Reply::Double(v))));
                (Reply::Int(settings.start(index)), map)
            })
        });
    Ok(Reply::pairs(rows))
}

pub const INFO: Command = command! {
    c"stats.info" => info, 2, c"readonly", &[first_key(READ)], c"read", &INFO_DOC
};

const INFO_DOC: Doc = Doc {
    summary: c"Show a statistics object's period, keep, stored periods and memory",
    complexity: c"O(min(F, K)) where F is the number of fields of the object's hash and K its KEEP (at most 2000)",
    args: &[KEY],
};

/// STATS.INFO key
pub fn info(ctx: &Context, name: &RedisString, rest: &[&[u8]]) -> Result<Reply> {
    if !rest.is_empty() {
        return Err(Error::Arity("stats.info".into()));
    }
    let key = Key::open(ctx, name, false);
    let Some(settings) = load(&key)? else {
        return Ok(Reply::Nil);
    };
    let stored = inventory(&key, &settings, command_now_ms()).stored;
    drop(key);
    Ok(Reply::Map(vec![
        ("period", Reply::Int(settings.period)),
        ("keep", Reply::Int(settings.keep)),
        ("periods", Reply::Int(stored as i64)),
        (
            "memory",
            Reply::Int(crate::host::store::memory_usage(ctx, name.as_slice())),
        ),
    ]))
}

/// Timer visit of a scheduled key whose `_tally` marker starts with [`FAMILY`]: drops
/// the periods that have left (one hash scan; a key has at most 2 × 10000 + 1 fields).
pub fn expire(
    ctx: &Context,
    key: Key,
    name: &[u8],
    marker: &[u8],
    now: i64,
    deadline_us: u64,
) -> Visit {
    let Some(settings) = Settings::from_marker(marker) else {
        return Visit::Done;
    };
    // A visit costs up to one walk of a legitimate object (bounded by KEEP); start it
    // only with time left, else come back at the next tick.
    if crate::host::server::monotonic_us() >= deadline_us {
        return Visit::Unfinished;
    }
    match trim(ctx, key, name, &settings, now) {
        Some(due) => Visit::DueAt(due),
        None => Visit::Done,
    }
}
