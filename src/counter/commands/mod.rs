//! TSCOUNTER.*: multi-resolution counters on one native hash per counter.
//! Parse every argument, then compute with the pure `crate::counter` logic over the hash,
//! then reply; writes are replicated as HSET/HDEL/DEL effects.
//!
//! Owns: the TSCOUNTER commands and the counter's expiry visit. May not touch: raw module
//! calls (through `store`, `replicate`, `server`), other families.

use redis_module::{Context, NotifyEvent, RedisString};

use crate::args::{parse_duration, set_once, Args};
use crate::cmddocs::{integer, pure_token, string, Doc, AT, FROM, KEY, TO};
use crate::counter::model::{
    finest_covering, packed_slots, parse_resolutions, Counter, Extent, STATE_FIELD,
};
use crate::error::{Error, Result};
use crate::expiry::{self, Visit};
use crate::host::cmdinfo::{command, first_key, Command, INSERT, READ, UPDATE};
use crate::host::config;
use crate::host::replicate::HashEffects;
use crate::host::reply::Reply;
use crate::host::server::{command_now_ms, monotonic_us, selected_db};
use crate::host::store::{notify, Key, KeyKind};
use crate::layout::{self, MARKER_FIELD};

mod counter_memory;
pub mod family_config;
mod hash_slots;
mod limit;
mod load_save;
mod msum;
mod write;

use self::counter_memory::memory;
use self::hash_slots::{Build, HashSlots};
use self::load_save::{load, load_for_command, read_counter, save, Loaded};
use crate::window::effective_time;

/// The family's commands, in registration order, each written beside its handler.
pub const COMMANDS: &[Command] = &[
    CREATE,
    INCRBY,
    INCR,
    SUM,
    RANGE,
    INFO,
    limit::LIMIT,
    limit::MLIMIT,
    msum::MSUM,
];

/// This family, for the layer around the families.
pub const FAMILY: crate::family::Family = crate::family::Family {
    marker_word: Some(layout::COUNTER),
    expire,
    on_keyspace_event: forget_key,
    forget: |db, name| memory().forget(db, name),
    flushed: |_| forget_all(),
    swapped: |_, _| forget_all(),
    loading: forget_all,
    info: || {
        let memory = memory();
        vec![
            (c"mirrored_slots", memory.mirrored_slots() as i64),
            (c"counter_hash_lookups", memory.hash_lookups() as i64),
        ]
    },
    // Everything it keeps in memory is a cache, counted here; no other state.
    cache_bytes: || memory().bytes(),
    ..crate::family::Family::new(COMMANDS, "tscounter.")
};

/// Any event on a key may change it behind the read cache: drop what is kept of it.
fn forget_key(ctx: &Context, _class: NotifyEvent, _event: &str, key: &[u8]) {
    memory().forget(selected_db(ctx), key);
}

/// Data was replaced behind the caches (flush, SWAPDB, loading): drop everything.
fn forget_all() {
    memory().forget_all();
}

/// Parses `[AT ts]` (the only option of INCRBY/INCR/SUM) and resolves it against `now`.
fn parse_at(args: &mut Args, now: i64) -> Result<i64> {
    let mut at = None;
    while !args.is_done() {
        match args.next_keyword()?.as_str() {
            "AT" => set_once(&mut at, args.next_timestamp()?)?,
            _ => return Err(Error::Syntax),
        }
    }
    effective_time(at, now, config::max_future_ms()).ok_or(Error::TooFarInFuture)
}

pub const CREATE: Command = command! {
    c"tscounter.create" => create, -2, c"write deny-oom", &[first_key(INSERT)], c"write", &CREATE_DOC
};

const CREATE_DOC: Doc = Doc {
    summary: c"Create a multi-resolution counter",
    complexity: c"O(R) where R is the number of resolutions",
    args: &[
        KEY,
        string(c"res:samples")
            .token(c"RESOLUTIONS")
            .optional()
            .multiple(),
    ],
};

/// TSCOUNTER.CREATE key [RESOLUTIONS res:samples [res:samples ...]]
pub fn create(ctx: &Context, name: &RedisString, rest: &[&[u8]]) -> Result<Reply> {
    let mut args = Args::new(rest);
    let resolutions = if args.is_done() {
        self::family_config::COUNTER_RESOLUTIONS.get()
    } else {
        if !args.eat_keyword("RESOLUTIONS") || args.is_done() {
            return Err(Error::Syntax);
        }
        parse_resolutions(&rest[1..])?
    };
    let key = Key::open(ctx, name, true);
    if key.kind() != KeyKind::Empty {
        return Err(Error::KeyExists);
    }
    let counter = Counter::new(resolutions);
    let mut counter = counter;
    let (marker, state) = (counter.marker(), counter.state(command_now_ms()));
    key.hset(MARKER_FIELD.as_bytes(), marker.as_bytes());
    key.hset(STATE_FIELD.as_bytes(), state.as_bytes());
    let mut effects = HashEffects::default();
    effects.set(MARKER_FIELD, marker);
    effects.set(STATE_FIELD, state);
    effects.emit(ctx, name.as_slice());
    notify(ctx, NotifyEvent::HASH, c"tscounter.create", name);
    Ok(Reply::Ok)
}

pub const INCRBY: Command = command! {
    c"tscounter.incrby" => incrby, -3, c"write deny-oom", &[first_key(UPDATE)], c"write", &INCRBY_DOC
};

const INCRBY_DOC: Doc = Doc {
    summary: c"Add an increment to a counter at every resolution that keeps the time",
    complexity: c"O(R) where R is the number of resolutions, plus O(E) for the E slots that left their resolution's kept range since the counter was last trimmed",
    args: &[KEY, integer(c"increment"), AT],
};

/// TSCOUNTER.INCRBY key increment [AT ts]
pub fn incrby(ctx: &Context, name: &RedisString, rest: &[&[u8]]) -> Result<Reply> {
    let mut args = Args::new(rest);
    let increment = args.next_i64()?;
    add(ctx, name, increment, &mut args)
}

pub const INCR: Command = command! {
    c"tscounter.incr" => incr, -2, c"write deny-oom", &[first_key(UPDATE)], c"write", &INCR_DOC
};

const INCR_DOC: Doc = Doc {
    summary: c"Add 1 to a counter at every resolution that keeps the time",
    complexity: c"O(R) where R is the number of resolutions, plus O(E) for the E slots that left their resolution's kept range since the counter was last trimmed",
    args: &[KEY, AT],
};

/// TSCOUNTER.INCR key [AT ts]
pub fn incr(ctx: &Context, name: &RedisString, rest: &[&[u8]]) -> Result<Reply> {
    add(ctx, name, 1, &mut Args::new(rest))
}

fn add(ctx: &Context, name: &RedisString, increment: i64, args: &mut Args) -> Result<Reply> {
    let now = command_now_ms();
    let ts = parse_at(args, now)?;
    let key = Key::open(ctx, name, true);
    let reply = write::increment(ctx, &key, (name.as_slice(), Some(name)), now, ts, increment)?;
    drop(key);
    if increment != 0 {
        notify(ctx, NotifyEvent::HASH, c"tscounter.incrby", name);
    }
    Ok(Reply::Int(reply))
}

pub const SUM: Command = command! {
    c"tscounter.sum" => sum, -3, c"readonly", &[first_key(READ)], c"read", &SUM_DOC
};

const SUM_DOC: Doc = Doc {
    summary: c"Sum a counter over one or more windows ending now or at a given time",
    complexity: c"O(W * S) where W is the number of windows and S the number of slots a window covers at the resolution that answers it",
    args: &[KEY, string(c"window").multiple(), AT],
};

/// TSCOUNTER.SUM key window [window ...] [AT ts]
pub fn sum(ctx: &Context, name: &RedisString, rest: &[&[u8]]) -> Result<Reply> {
    // The usual read, one window ending now: a short path without the argument cursor or
    // the arrays of sums.
    if let [window] = rest {
        return sum_one_window(ctx, name, parse_duration(window)?);
    }
    let mut args = Args::new(rest);
    let window_args = args.values_until(1, &["AT"]);
    // A few windows (the usual read) are parsed into a stack array, not a Vec.
    let mut on_stack = [0i64; 8];
    let mut on_heap = Vec::new();
    let windows: &mut [i64] = match on_stack.get_mut(..window_args.len()) {
        Some(windows) => windows,
        None => {
            on_heap.resize(window_args.len(), 0);
            &mut on_heap
        }
    };
    for (window, arg) in windows.iter_mut().zip(window_args) {
        *window = parse_duration(arg)?;
    }
    let windows = &*windows;
    let now = command_now_ms();
    let t = parse_at(&mut args, now)?;
    // The sums, like the windows: on the stack when few (one window replies without any
    // allocation).
    let mut sums_on_stack = [0i64; 8];
    let mut sums_on_heap = Vec::new();
    let sums: &mut [i64] = match sums_on_stack.get_mut(..windows.len()) {
        Some(sums) => sums,
        None => {
            sums_on_heap.resize(windows.len(), 0);
            &mut sums_on_heap
        }
    };
    let key = Key::open(ctx, name, false);
    let found = read_counter(ctx, &key, name.as_slice(), now, |counter, slots| {
        counter.sum_into(slots, now, t, windows, sums)
    })?;
    if found.is_none() {
        check_default_windows(windows)?;
    }
    Ok(match &*sums {
        [single] => Reply::Int(*single),
        _ => Reply::Ints(sums.to_vec()),
    })
}

/// TSCOUNTER.SUM key window: exactly what the general path answers for one window and no
/// `AT` (the model test `one_window_sum_answers_like_the_general_path` compares them).
fn sum_one_window(ctx: &Context, name: &RedisString, window: i64) -> Result<Reply> {
    let now = command_now_ms();
    let key = Key::open(ctx, name, false);
    let found = read_counter(ctx, &key, name.as_slice(), now, |counter, slots| {
        counter.window_sum(slots, now, window)
    })?;
    match found {
        Some(sum) => Ok(Reply::Int(sum)),
        None => check_default_windows(&[window]).map(|()| Reply::Int(0)),
    }
}

/// A SUM of a missing key answers as an empty counter with the default resolutions
/// (zeros), so a window no default resolution spans is still an error.
fn check_default_windows(windows: &[i64]) -> Result<()> {
    self::family_config::COUNTER_RESOLUTIONS.with(|defaults| {
        windows
            .iter()
            .try_for_each(|&window| finest_covering(defaults, window).map(drop))
    })
}

pub const RANGE: Command = command! {
    c"tscounter.range" => range, -3, c"readonly", &[first_key(READ)], c"read", &RANGE_DOC
};

const RANGE_DOC: Doc = Doc {
    summary: c"List a counter's slots at one resolution, oldest first",
    complexity: c"O(N) where N is the number of slots of the resolution between FROM and TO (at most its samples); with EMPTY, O(N) in the reply: one row per slot, zeros included",
    args: &[
        KEY,
        string(c"resolution"),
        FROM,
        TO,
        pure_token(c"empty", c"EMPTY").optional(),
    ],
};

/// TSCOUNTER.RANGE key resolution [FROM ts] [TO ts] [EMPTY]
pub fn range(ctx: &Context, name: &RedisString, rest: &[&[u8]]) -> Result<Reply> {
    let mut args = Args::new(rest);
    let res_ms = args.next_duration()?;
    let (mut from, mut to, mut empty) = (None, None, None);
    while !args.is_done() {
        match args.next_keyword()?.as_str() {
            "FROM" => set_once(&mut from, args.next_timestamp()?)?,
            "TO" => set_once(&mut to, args.next_timestamp()?)?,
            "EMPTY" => set_once(&mut empty, true)?,
            _ => return Err(Error::Syntax),
        }
    }
    let key = Key::open(ctx, name, false);
    let now = command_now_ms();
    let rows = read_counter(ctx, &key, name.as_slice(), now, |counter, slots| {
        counter.range(slots, now, res_ms, from, to, empty.unwrap_or(false))
    })?
    .unwrap_or_default();
    Ok(Reply::pairs(rows.into_iter().map(|(start, count)| {
        (Reply::Int(start), Reply::Int(count))
    })))
}

/// Probes INFO may spend finding the oldest and newest stored slots from the bookkeeping
/// (about a millisecond) before it walks the hash instead.
const INFO_MAX_PROBES: usize = 2048;

pub const INFO: Command = command! {
    c"tscounter.info" => info, 2, c"readonly", &[first_key(READ)], c"read", &INFO_DOC
};

const INFO_DOC: Doc = Doc {
    summary: c"Show a counter's resolutions, stored slots and memory",
    complexity: c"O(R) where R is the number of resolutions (a few probes of the hash each); O(F) in the F fields of the hash when native edits left the counter's bookkeeping out of step with it",
    args: &[KEY],
};

/// TSCOUNTER.INFO key
pub fn info(ctx: &Context, name: &RedisString, rest: &[&[u8]]) -> Result<Reply> {
    if !rest.is_empty() {
        return Err(Error::Arity("tscounter.info".into()));
    }
    let key = Key::open(ctx, name, false);
    let now = command_now_ms();
    let Some(Loaded {
        counter,
        state_rebuilt,
    }) = load_for_command(ctx, &key, name.as_slice(), now)?
    else {
        return Ok(Reply::Nil);
    };
    // From the bookkeeping when it can be trusted (a few probes), else one walk.
    let probed = (!state_rebuilt)
        .then(|| {
            let mut slots = HashSlots::open(ctx, &key, name.as_slice(), Build::Never);
            counter.extent(&mut slots, now, INFO_MAX_PROBES)
        })
        .flatten();
    let Extent { slots, first, last } = probed.unwrap_or_else(|| {
        // Packed fields count by their headers; a few are decoded (see `InfoWalk`).
        let mut walk = packed_slots::InfoWalk::default();
        key.hscan(|field, value| walk.field(field, value, now));
        walk.finish(&mut |name| key.hget(name))
    });
    drop(key);
    let opt = |v: Option<i64>| v.map_or(Reply::Nil, Reply::Int);
    let resolutions = counter
        .resolutions
        .iter()
        .map(|r| (Reply::Int(r.ms), Reply::Int(r.samples)));
    Ok(Reply::Map(vec![
        ("resolutions", Reply::pairs(resolutions)),
        ("slots", Reply::Int(slots)),
        ("first", opt(first)),
        ("last", opt(last)),
        (
            "memory",
            Reply::Int(crate::host::store::memory_usage(ctx, name.as_slice())),
        ),
    ]))
}

/// The timer rebuilds a lost `_state` by walking the hash only up to this many fields (a
/// fraction of a tick); larger hashes get a conservative guess that trimming heals.
const TIMER_REBUILD_MAX_FIELDS: usize = 2048;

/// Timer visit: trims a counter nobody writes to any more, within the tick's deadline
/// (`deadline_us`, monotonic µs). `read_key` is open for reading only: the key is reopened
/// for writing only when the visit has something to change, so a visit that changes
/// nothing does not invalidate `WATCH` or client-side caching.
pub fn expire(
    ctx: &Context,
    read_key: Key,
    name: &[u8],
    _marker: &[u8],
    now: i64,
    deadline_us: u64,
) -> Visit {
    let Ok(Some(Loaded {
        mut counter,
        state_rebuilt,
    })) = load(&read_key, now, TIMER_REBUILD_MAX_FIELDS)
    else {
        return Visit::Done;
    };
    let has_work = counter.has_seal_work(now)
        || counter.has_trim_work(
            &mut HashSlots::open(ctx, &read_key, name, Build::Never),
            now,
        );
    if !has_work && !state_rebuilt {
        return due_visit(&counter);
    }
    drop(read_key);
    let Some(key) = Key::open_bytes(ctx, name, true) else {
        return Visit::Done;
    };
    let old_tracks = (!state_rebuilt).then(|| counter.tracks.clone());
    let mut slots = HashSlots::open(ctx, &key, name, Build::Never);
    let mut within_budget = || monotonic_us() < deadline_us;
    let mut trimmed = counter.trim_within(&mut slots, now, &mut within_budget);
    expiry::count_expired(trimmed.removed as u64);
    // Old runs are packed once trimming is done (the runs trimming removes are not).
    if trimmed.finished && counter.has_seal_work(now) {
        counter.seal_within(&mut slots, now, &mut within_budget);
        trimmed.finished = !counter.has_seal_work(now);
    }
    let changed =
        !slots.effects.is_empty() || old_tracks.as_deref() != Some(counter.tracks.as_slice());
    let deleted = changed
        && save(
            ctx,
            &key,
            (name, None),
            &mut counter,
            old_tracks.as_deref(),
            false,
            &mut slots,
        );
    drop(slots);
    if deleted {
        crate::family::forget_deleted(ctx, name);
        return Visit::Done;
    }
    if !trimmed.finished {
        return Visit::Unfinished;
    }
    due_visit(&counter)
}

fn due_visit(counter: &Counter) -> Visit {
    match counter.next_due() {
        Some(due) => Visit::DueAt(due),
        None => Visit::Done,
    }
}
