//! TSRANK.*: sliding-window leaderboards on native keys (layout: `crate::rank`).
//!
//! Every command parses and checks all of its arguments and ACL permissions before the
//! first write. Writes go through the key API and are replicated as effects with
//! absolute values (`HSET`, `ZADD`, `ZREM`, `HDEL`, `UNLINK`, `RENAME`). Reads on a primary
//! are exact even while an expired slot is still being subtracted (see `crate::rank`).
//!
//! Lifecycle of the board's keys (DEL/RENAME/EXPIRE of `key`, parts lost to expiry or
//! eviction, native edits and the quarantine they cause): [`lifecycle`].
//!
//! Resharding (cluster): MIGRATE moves a board's keys in batches, so for a while they sit
//! on two nodes. A command that finds a key of the board missing (main key without meta,
//! meta-less new board, a slot hash that meta's `lo ..= hi` says may exist) asks whether
//! the slot is MIGRATING or IMPORTING here, and if so answers TRYAGAIN without writing
//! ([`Transit`]). A new slot hash outside `lo ..= hi` exists nowhere and is created freely:
//! the common write path never asks. The expiry timer leaves such a board alone until the
//! move is over, and a `del` of the main key by MIGRATE does not delete the derived keys.

mod lifecycle;
mod transit;

use std::collections::HashMap;

use redis_module::{Context, ContextFlags, RedisString, RedisValue};

use crate::args::{parse_i64, set_once, Args};
use crate::config;
use crate::error::{Error, Result};
use crate::expiry::{self, Visit};
use crate::layout::MARKER_FIELD;
use crate::server::{monotonic_us, now_ms, selected_db};
use std::cmp::Ordering;

use crate::rank::{
    ahead, base_of_meta, has_hash_tag, meta_key, rank_adjusted, score_to_total, slot_key,
    sort_totals, top_adjusted, validate_settings, Meta, MAX_TOTAL,
};
use crate::replicate::Effects;
use crate::reply::Reply;
use crate::store::acl::Acl;
use crate::store::scan::HashCursor;
use crate::store::{Key, KeyKind, RStr};
use crate::window::{effective_time, slot_index, slot_start};

use lifecycle::{
    flush_jobs, has_jobs, is_quarantined, known_meta, lift_quarantine, remember, resolve_base,
    BoardId, CURSORS,
};
pub use lifecycle::{forget_all, forget_db, on_keyspace_event, swap_dbs};
use transit::Transit;

/// This family, for the layer around the families.
pub const FAMILY: super::Family = super::Family {
    word: crate::layout::RANK,
    expire,
    on_keyspace_event,
};

/// How soon the expiry timer looks again at a board whose slot is being resharded.
const TRANSIT_RETRY_MS: i64 = 100;

// ------------------------------------------------------------------------------ helpers

/// In cluster mode the derived keys must hash like `key`: only a hash tag guarantees it.
fn check_cluster(flags: &ContextFlags, name: &[u8]) -> Result<()> {
    if flags.contains(ContextFlags::CLUSTER) && !has_hash_tag(name) {
        return Err(Error::Invalid(
            "in cluster mode a leaderboard key must contain a hash tag, e.g. '{board}', so that its derived keys share its slot".into(),
        ));
    }
    Ok(())
}

/// Integer totals as replication arguments.
fn int_arg(value: i64) -> Vec<u8> {
    value.to_string().into_bytes()
}

thread_local! {
    /// The `_tally` field name, built once (it is read by every command).
    static MARKER: Option<RStr> = RStr::new(MARKER_FIELD.as_bytes());
}

// ------------------------------------------------------------------------ opening boards

/// A leaderboard opened by a command.
struct Board {
    zset: Key,
    /// Name under which the derived keys live (differs from the key during a rename).
    base: Vec<u8>,
    meta: Meta,
    /// Slot hashes that left the window but still hold counts not yet subtracted.
    pending: Vec<Key>,
    /// A quarantined board's window totals, computed from its slot hashes: its sorted set
    /// may have been edited, the slots are what tally counted.
    computed: Option<HashMap<Vec<u8>, i64>>,
}

impl Board {
    /// Opens `name` for reading. `Ok(None)`: no leaderboard there.
    fn open_read(
        ctx: &Context,
        acl: &Acl,
        name: &RedisString,
        now: i64,
        transit: &Transit,
    ) -> Result<Option<Board>> {
        let zset = Key::open(ctx, name, false);
        if !matches!(zset.kind(), KeyKind::Empty | KeyKind::Zset) {
            return Err(Error::WrongType);
        }
        let db = selected_db(ctx);
        let Some(base) = resolve_base(db, name.as_slice()) else {
            // A queued job is removing this board (whole, or its parts after a DEL): it
            // answers as the empty board it is about to be.
            return Ok(None);
        };
        let key = acl.open(ctx, &meta_key(&base), false)?;
        let meta = match load_meta(&key)? {
            Some(meta) => Some(meta),
            // A user deleted the meta of a board tally knows; a job puts it back.
            None if zset.kind() == KeyKind::Zset => known_meta(db, &base),
            None => None,
        };
        drop(key);
        let Some(meta) = meta else {
            // A sorted set without meta is a plain sorted set, not a leaderboard, unless
            // a reshard has moved the meta hash already (or not yet).
            return if zset.kind() == KeyKind::Empty {
                Ok(None)
            } else {
                transit.missing()?;
                Err(Error::WrongType)
            };
        };
        remember(db, &base, meta);
        let (pending, computed) = if is_quarantined(db, &base) {
            let totals = window_totals(ctx, acl, &base, &meta, meta.slots(), now, transit)?;
            (Vec::new(), Some(totals))
        } else {
            (open_pending(ctx, acl, &base, &meta, now, transit)?, None)
        };
        Ok(Some(Board {
            zset,
            base,
            meta,
            pending,
            computed,
        }))
    }

    /// What is not yet subtracted from `member`'s score.
    fn pending_of(&self, member: &RStr) -> i64 {
        pending_in(&self.pending, member)
    }

    /// `member`'s exact window total (0 if absent).
    fn total_of(&self, member: &[u8]) -> i64 {
        if let Some(totals) = &self.computed {
            return totals.get(member).copied().unwrap_or(0);
        }
        let Some(member) = RStr::new(member) else {
            return 0;
        };
        let raw = self.zset.zscore(&member).map_or(0, score_to_total);
        if self.pending.is_empty() || raw <= 0 {
            return raw;
        }
        raw.saturating_sub(self.pending_of(&member))
    }

    /// The reverse walk of the sorted set as `(member, raw total)`.
    fn walk(&mut self) -> impl Iterator<Item = (Vec<u8>, i64)> + '_ {
        walk(&mut self.zset)
    }
}

/// `member`'s counts in the slots still being subtracted.
fn pending_in(pending: &[Key], member: &RStr) -> i64 {
    pending
        .iter()
        .map(|slot| slot.hget_i64_str(member).flatten().unwrap_or(0).max(0))
        .fold(0i64, i64::saturating_add)
}

/// The reverse walk of a board's sorted set as `(member, raw total)`.
fn walk(zset: &mut Key) -> impl Iterator<Item = (Vec<u8>, i64)> + '_ {
    zset.zrev_iter().map(|(m, s)| (m, score_to_total(s)))
}

/// The meta of a leaderboard from its meta hash: `None` if missing, WRONGTYPE if the key
/// is something else.
fn load_meta(key: &Key) -> Result<Option<Meta>> {
    match key.kind() {
        KeyKind::Empty => Ok(None),
        KeyKind::Hash => MARKER
            .with(|field| key.hget_with(field.as_ref()?, Meta::parse))
            .flatten()
            .map(Some)
            .ok_or(Error::WrongType),
        _ => Err(Error::WrongType),
    }
}

/// Opens the slot hashes of `base` that left the window but are not fully subtracted.
/// One that is missing may be a gap (a slot never written) or, during a reshard, on the
/// other node: then the totals cannot be corrected here (TRYAGAIN). A valid meta spans
/// less than two windows (`Meta::span_fits`), which bounds the walk.
fn open_pending(
    ctx: &Context,
    acl: &Acl,
    base: &[u8],
    meta: &Meta,
    now: i64,
    transit: &Transit,
) -> Result<Vec<Key>> {
    let mut pending = Vec::new();
    if let Some((start, end)) = meta.pending_range(now) {
        for index in start..=end {
            let key = acl.open(ctx, &slot_key(base, index), false)?;
            match key.kind() {
                KeyKind::Hash => pending.push(key),
                KeyKind::Empty => transit.missing()?,
                _ => {}
            }
        }
    }
    Ok(pending)
}

/// Totals over the latest `slots` slots, from the slot hashes (values that are not
/// positive integers, a user's edits, count as nothing).
fn window_totals(
    ctx: &Context,
    acl: &Acl,
    base: &[u8],
    meta: &Meta,
    slots: i64,
    now: i64,
    transit: &Transit,
) -> Result<HashMap<Vec<u8>, i64>> {
    let current = slot_index(now, meta.slot);
    let first = current
        .saturating_sub(slots - 1)
        .max(meta.lo)
        .max(meta.first_kept(now));
    let mut totals: HashMap<Vec<u8>, i64> = HashMap::new();
    for index in first..=current.min(meta.hi) {
        let name = slot_key(base, index);
        let key = acl.open(ctx, &name, false)?;
        match key.kind() {
            KeyKind::Hash => {}
            // A gap, or on the other node during a reshard.
            KeyKind::Empty => {
                transit.missing()?;
                continue;
            }
            _ => continue,
        }
        key.hscan(|member, count| {
            if let Ok(count @ 1..) = parse_i64(count) {
                let entry = totals.entry(member.to_vec()).or_insert(0);
                *entry = entry.saturating_add(count);
            }
        });
    }
    totals.retain(|_, total| *total > 0);
    Ok(totals)
}

/// Rebuilds a quarantined board before a write: the totals become the sums of the live
/// slot hashes, slots that left the window are deleted, and the board leaves quarantine.
/// The caller holds write permission on every key touched (checked here for the slots).
/// Costs one pass over the board's stored data, once.
fn repair(
    ctx: &Context,
    acl: &Acl,
    zset: &Key,
    key_name: &[u8],
    meta: &mut Meta,
    now: i64,
    transit: &Transit,
) -> Result<()> {
    let totals = window_totals(ctx, acl, key_name, meta, meta.slots(), now, transit)?;
    let mut gone = Vec::new();
    if let Some((start, end)) = meta.pending_range(now) {
        for index in start..=end {
            let name = slot_key(key_name, index);
            let slot = acl.open(ctx, &name, true)?;
            if slot.kind() == KeyKind::Hash {
                slot.delete();
                gone.push(name);
            }
        }
        meta.lo = end.saturating_add(1);
        if meta.hi < meta.lo {
            *meta = Meta::new(meta.window, meta.slot);
        }
    }
    zset.delete();
    ctx.replicate("DEL", &[key_name][..]);
    let rows: Vec<(Vec<u8>, Vec<u8>)> = totals
        .iter()
        .filter_map(|(member, &total)| {
            let m = RStr::new(member)?;
            zset.zadd(&m, total as f64);
            Some((int_arg(total), member.clone()))
        })
        .collect();
    for chunk in rows.chunks(256) {
        let mut args: Vec<&[u8]> = Vec::with_capacity(chunk.len() * 2 + 1);
        args.push(key_name);
        for (total, member) in chunk {
            args.push(total);
            args.push(member);
        }
        ctx.replicate("ZADD", &args[..]);
    }
    for name in &gone {
        ctx.replicate("DEL", &[name.as_slice()][..]);
    }
    lift_quarantine(selected_db(ctx), key_name);
    lifecycle::mark_edited(ctx, key_name, false);
    Ok(())
}

// -------------------------------------------------------------------------------- commands

/// TSRANK.CREATE key [WINDOW dur] [SLOT dur]
pub fn create(ctx: &Context, name: &RedisString, rest: &[&[u8]]) -> Result<Reply> {
    let mut args = Args::new(rest);
    let (mut window, mut slot) = (None, None);
    while !args.is_done() {
        match args.next_keyword()?.as_str() {
            "WINDOW" => set_once(&mut window, args.next_duration()?)?,
            "SLOT" => set_once(&mut slot, args.next_duration()?)?,
            _ => return Err(Error::Syntax),
        }
    }
    let window = window.unwrap_or_else(|| config::RANK_WINDOW.ms());
    let slot = slot.unwrap_or_else(|| config::RANK_SLOT.ms());
    validate_settings(window, slot)?;
    let flags = ctx.get_flags();
    check_cluster(&flags, name.as_slice())?;
    let acl = Acl::of(ctx)?;
    let meta_name = meta_key(name.as_slice());
    // Touch both keys first: a lazy expiry queues a lifecycle job, run before writing.
    drop(Key::open(ctx, name, false));
    drop(acl.open(ctx, &meta_name, false)?);
    flush_jobs(ctx);
    let meta_hash = acl.open(ctx, &meta_name, true)?;
    let zset = Key::open(ctx, name, true);
    if zset.kind() != KeyKind::Empty || meta_hash.kind() != KeyKind::Empty {
        return Err(Error::KeyExists);
    }
    // During a reshard the meta hash may exist on the other node.
    Transit::new(ctx, &flags, name.as_slice()).missing()?;
    let meta = Meta::new(window, slot);
    save_marker(ctx, &meta_hash, &meta_name, &meta);
    remember(selected_db(ctx), name.as_slice(), meta);
    Ok(Reply::Ok)
}

/// One member of an INCRBY: its string, increment sum, and values before/after.
struct Change<'a> {
    member: RStr,
    bytes: &'a [u8],
    slot_count: i64,
    total: i64,
    pending: i64,
}

/// Sends `HSET slot member count ...` and `ZADD key total member ...` to replicas and AOF.
fn replicate_changes(ctx: &Context, key: &[u8], slot_name: &[u8], changes: &[Change]) {
    let mut effects = Effects::new();
    effects.command(c"HSET").arg(slot_name);
    for change in changes {
        effects.arg(change.bytes).int(change.slot_count);
    }
    effects.command(c"ZADD").arg(key);
    for change in changes {
        effects.int(change.total).arg(change.bytes);
    }
    effects.emit(ctx);
}

/// Writes the meta hash's marker and replicates it.
pub(super) fn save_marker(ctx: &Context, meta_hash: &Key, meta_name: &[u8], meta: &Meta) {
    let marker = meta.marker();
    meta_hash.hset(MARKER_FIELD.as_bytes(), marker.as_bytes());
    let args: [&[u8]; 3] = [meta_name, MARKER_FIELD.as_bytes(), marker.as_bytes()];
    ctx.replicate("HSET", &args[..]);
}

/// TSRANK.INCRBY key increment member [increment member ...] [AT ts]
pub fn incrby(ctx: &Context, name: &RedisString, rest: &[&[u8]]) -> Result<Reply> {
    // Parse everything first.
    let mut args = Args::new(rest);
    let mut pairs: Vec<(i64, &[u8])> = Vec::with_capacity(rest.len() / 2);
    let mut at = None;
    while !args.is_done() {
        if args.eat_keyword("AT") {
            set_once(&mut at, args.next_i64()?)?;
            if !args.is_done() {
                return Err(Error::Syntax);
            }
            break;
        }
        let increment = args.next_i64()?;
        let member = args.next_bytes()?;
        if increment <= 0 {
            return Err(Error::Invalid(
                "increment must be a positive integer".into(),
            ));
        }
        if increment > MAX_TOTAL {
            return Err(Error::Overflow);
        }
        pairs.push((increment, member));
    }
    if pairs.is_empty() {
        return Err(Error::Syntax);
    }
    let now = now_ms();
    let ts = effective_time(at, now, config::max_future_ms()).ok_or(Error::TooFarInFuture)?;
    check_cluster(&ctx.get_flags(), name.as_slice())?;
    // Opening a key can expire it lazily (or a part of the board) and queue a lifecycle
    // job that would undo this write: such an attempt writes nothing, lets the jobs run and
    // starts over on the keys as they are now.
    for _ in 0..OPEN_ATTEMPTS {
        flush_jobs(ctx);
        if let Some(reply) = apply_incrby(ctx, name, &pairs, now, ts)? {
            return Ok(reply);
        }
    }
    Err(Error::TryAgain(
        "the leaderboard's keys keep expiring while it is opened".into(),
    ))
}

/// How many times a write opens a board whose keys expire while being opened.
const OPEN_ATTEMPTS: usize = 3;

/// INCRBY on a parsed command: `Ok(None)` if opening the keys queued a lifecycle job
/// (nothing was written).
fn apply_incrby(
    ctx: &Context,
    name: &RedisString,
    pairs: &[(i64, &[u8])],
    now: i64,
    ts: i64,
) -> Result<Option<Reply>> {
    let key_name = name.as_slice();
    let flags = ctx.get_flags();
    let transit = Transit::new(ctx, &flags, key_name);
    let db = selected_db(ctx);

    // Open and check every key.
    let acl = Acl::of(ctx)?;
    let zset = Key::open(ctx, name, true);
    if !matches!(zset.kind(), KeyKind::Empty | KeyKind::Zset) {
        return Err(Error::WrongType);
    }
    let meta_name = meta_key(key_name);
    let meta_hash = acl.open(ctx, &meta_name, true)?;
    if has_jobs() {
        return Ok(None);
    }
    let (mut meta, is_new) = match load_meta(&meta_hash)? {
        Some(meta) => (meta, false),
        None if zset.kind() == KeyKind::Zset => {
            // A plain sorted set, or a leaderboard whose meta hash a reshard has moved
            // already (or not yet).
            transit.missing()?;
            return Err(Error::WrongType);
        }
        None => {
            // A new leaderboard, unless a reshard has its meta hash on the other node.
            transit.missing()?;
            let (window, slot) = (config::RANK_WINDOW.ms(), config::RANK_SLOT.ms());
            validate_settings(window, slot)?;
            (Meta::new(window, slot), true)
        }
    };
    let index = slot_index(ts, meta.slot);
    if index < meta.first_kept(now) {
        return Err(Error::OutsideKeptRange);
    }
    let slot_name = slot_key(key_name, index);
    let slot = acl.open(ctx, &slot_name, true)?;
    let mut pending = open_pending(ctx, &acl, key_name, &meta, now, &transit)?;
    if has_jobs() {
        return Ok(None);
    }
    if !is_new && is_quarantined(db, key_name) {
        repair(ctx, &acl, &zset, key_name, &mut meta, now, &transit)?;
        pending.clear();
        save_marker(ctx, &meta_hash, &meta_name, &meta);
    }
    let mut stretched = meta;
    if stretched.note_write(index) && !stretched.span_fits() {
        // Expiry is far behind (the server was down for a long time): the timer catches
        // up within moments; a meta spanning more than two windows is not a leaderboard.
        return Err(Error::TryAgain(
            "this leaderboard's expiry is catching up, retry in a moment".into(),
        ));
    }
    match slot.kind() {
        KeyKind::Hash => {}
        // Meta is here and every existing slot hash has an index in `lo ..= hi`: outside,
        // the hash exists nowhere and may be created (the usual case: a new slot). Inside,
        // it is a gap or, during a reshard, on the other node.
        KeyKind::Empty if (meta.lo..=meta.hi).contains(&index) => transit.missing()?,
        KeyKind::Empty => {}
        _ => return Err(Error::WrongType),
    }

    // Compute new values (a member may appear several times) and every reply.
    let mut changes: Vec<Change> = Vec::with_capacity(pairs.len());
    let mut index_of: HashMap<&[u8], usize> = HashMap::new();
    let mut replies = Vec::with_capacity(pairs.len());
    for &(increment, member) in pairs {
        let found = if pairs.len() > 8 {
            index_of.get(member).copied()
        } else {
            changes.iter().position(|c| c.bytes == member)
        };
        let at = match found {
            Some(at) => at,
            None => {
                let rstr = RStr::new(member).ok_or(Error::WrongType)?;
                let slot_count = slot.hget_i64_str(&rstr).flatten().unwrap_or(0).max(0);
                let total = zset.zscore(&rstr).map_or(0, score_to_total).max(0);
                let pending = pending
                    .iter()
                    .map(|p| p.hget_i64_str(&rstr).flatten().unwrap_or(0))
                    .fold(0i64, i64::saturating_add);
                changes.push(Change {
                    member: rstr,
                    bytes: member,
                    slot_count,
                    total,
                    pending,
                });
                if pairs.len() > 8 {
                    index_of.insert(member, changes.len() - 1);
                }
                changes.len() - 1
            }
        };
        let change = changes.get_mut(at).ok_or(Error::Syntax)?;
        change.slot_count = change.slot_count.saturating_add(increment);
        change.total = change.total.saturating_add(increment);
        if change.total > MAX_TOTAL {
            return Err(Error::Overflow);
        }
        replies.push(change.total.saturating_sub(change.pending));
    }

    // Write, then replicate the absolute values.
    for change in &changes {
        slot.hset_i64_str(&change.member, change.slot_count);
        zset.zadd(&change.member, change.total as f64);
    }
    if meta.note_write(index) || is_new {
        save_marker(ctx, &meta_hash, &meta_name, &meta);
        if let Some(due) = meta.next_due() {
            expiry::schedule(ctx, &meta_name, due);
        }
    }
    replicate_changes(ctx, key_name, &slot_name, &changes);
    remember(db, key_name, meta);

    Ok(Some(match replies.as_slice() {
        [single] => Reply::Int(*single),
        _ => Reply::Array(replies.into_iter().map(Reply::Int).collect()),
    }))
}

/// TSRANK.TOP key count [OFFSET offset] [WITHSCORES] [WINDOW dur]
pub fn top(ctx: &Context, name: &RedisString, rest: &[&[u8]]) -> Result<Reply> {
    let mut args = Args::new(rest);
    let count = args.next_i64()?;
    let (mut offset, mut withscores, mut window) = (None, None, None);
    while !args.is_done() {
        match args.next_keyword()?.as_str() {
            "OFFSET" => set_once(&mut offset, args.next_i64()?)?,
            "WITHSCORES" => set_once(&mut withscores, true)?,
            "WINDOW" => set_once(&mut window, args.next_duration()?)?,
            _ => return Err(Error::Syntax),
        }
    }
    let offset = offset.unwrap_or(0);
    if count < 0 || offset < 0 {
        return Err(Error::NotInteger);
    }
    let now = now_ms();
    let (acl, transit, board) = open_for_read(ctx, name, now)?;
    let Some(mut board) = board else {
        return Ok(Reply::Array(Vec::new()));
    };
    let meta = board.meta;
    let sub_slots = match window {
        Some(dur) => Some(meta.sub_window_slots(dur)?).filter(|&d| d < meta.slots()),
        None => None,
    };
    let (offset, count) = (offset as usize, count as usize);
    let rows: Vec<(Vec<u8>, i64)> = if let Some(slots) = sub_slots {
        let totals = window_totals(ctx, &acl, &board.base, &meta, slots, now, &transit)?;
        sort_totals(totals)
            .into_iter()
            .skip(offset)
            .take(count)
            .collect()
    } else if let Some(totals) = &board.computed {
        sort_totals(totals.iter().map(|(m, t)| (m.clone(), *t)))
            .into_iter()
            .skip(offset)
            .take(count)
            .collect()
    } else if board.pending.is_empty() {
        // The common case: the sorted set is exact, read it as ZREVRANGE does.
        board
            .walk()
            .take_while(|(_, total)| *total > 0)
            .skip(offset)
            .take(count)
            .collect()
    } else {
        let want = offset.saturating_add(count).min(board.zset.len());
        let (zset, pending) = (&mut board.zset, &board.pending);
        let adjust = |member: &[u8], raw: i64| match RStr::new(member) {
            Some(m) => raw.saturating_sub(pending_in(pending, &m)),
            None => raw,
        };
        top_adjusted(walk(zset), want, adjust)
            .into_iter()
            .skip(offset)
            .collect()
    };
    let resp3 = ctx.get_flags().contains(ContextFlags::FLAGS_RESP3);
    let mut out = Vec::with_capacity(rows.len() * if withscores.is_some() { 2 } else { 1 });
    for (member, total) in rows {
        match (withscores.is_some(), resp3) {
            (false, _) => out.push(Reply::Bulk(member)),
            (true, true) => out.push(Reply::Array(vec![Reply::Bulk(member), Reply::Int(total)])),
            (true, false) => {
                out.push(Reply::Bulk(member));
                out.push(Reply::Int(total));
            }
        }
    }
    Ok(Reply::Array(out))
}

/// The common start of the read commands: cluster check, the caller's ACL, the transit
/// probe and the board at `name` (`None`: no leaderboard there).
fn open_for_read<'a>(
    ctx: &'a Context,
    name: &'a RedisString,
    now: i64,
) -> Result<(Acl, Transit<'a>, Option<Board>)> {
    let flags = ctx.get_flags();
    check_cluster(&flags, name.as_slice())?;
    let acl = Acl::of(ctx)?;
    let transit = Transit::new(ctx, &flags, name.as_slice());
    let board = Board::open_read(ctx, &acl, name, now, &transit)?;
    Ok((acl, transit, board))
}

/// TSRANK.SCORE key member
pub fn score(ctx: &Context, name: &RedisString, rest: &[&[u8]]) -> Result<Reply> {
    let [member] = rest else {
        return Err(Error::Arity("tsrank.score".into()));
    };
    let (_, _, board) = open_for_read(ctx, name, now_ms())?;
    let Some(board) = board else {
        return Ok(Reply::Nil);
    };
    let total = board.total_of(member);
    Ok(if total > 0 {
        Reply::Int(total)
    } else {
        Reply::Nil
    })
}

/// TSRANK.RANK key member
pub fn rank(ctx: &Context, name: &RedisString, rest: &[&[u8]]) -> Result<Reply> {
    let [member] = rest else {
        return Err(Error::Arity("tsrank.rank".into()));
    };
    let (_, _, board) = open_for_read(ctx, name, now_ms())?;
    let Some(mut board) = board else {
        return Ok(Reply::Nil);
    };
    let total = board.total_of(member);
    if total <= 0 {
        return Ok(Reply::Nil);
    }
    if let Some(totals) = &board.computed {
        let ahead_of_member = totals
            .iter()
            .filter(|(m, t)| ahead((**t, m), (total, member)) == Ordering::Greater)
            .count();
        return Ok(Reply::Int(ahead_of_member as i64));
    }
    if board.pending.is_empty() {
        // Exact sorted set: ZREVRANK is O(log n).
        let args: [&[u8]; 2] = [name.as_slice(), member];
        if let Ok(RedisValue::Integer(rank)) = ctx.call("ZREVRANK", &args[..]) {
            return Ok(Reply::Int(rank));
        }
    }
    let (zset, pending) = (&mut board.zset, &board.pending);
    let adjust = |m: &[u8], raw: i64| match RStr::new(m) {
        Some(m) => raw.saturating_sub(pending_in(pending, &m)),
        None => raw,
    };
    Ok(Reply::Int(rank_adjusted(
        walk(zset),
        (total, member),
        adjust,
    )))
}

/// TSRANK.INFO key
pub fn info(ctx: &Context, name: &RedisString, rest: &[&[u8]]) -> Result<Reply> {
    if !rest.is_empty() {
        return Err(Error::Arity("tsrank.info".into()));
    }
    let now = now_ms();
    let (acl, transit, board) = open_for_read(ctx, name, now)?;
    let Some(board) = board else {
        // No main key and no meta here: during a reshard the meta hash of a board without
        // totals may still be on the other node.
        transit.missing()?;
        return Ok(Reply::Nil);
    };
    let meta = board.meta;
    let mut members = match &board.computed {
        Some(totals) => totals.len() as i64,
        None => board.zset.len() as i64,
    };
    if !board.pending.is_empty() {
        // Members whose whole total is still pending are no longer in the window.
        let mut seen: HashMap<Vec<u8>, ()> = HashMap::new();
        for slot in &board.pending {
            slot.hscan(|member, _| {
                seen.insert(member.to_vec(), ());
            });
        }
        for member in seen.keys() {
            let in_zset = RStr::new(member).is_some_and(|m| board.zset.zscore(&m).is_some());
            if in_zset && board.total_of(member) <= 0 {
                members -= 1;
            }
        }
    }
    let (mut live, mut oldest) = (0i64, None);
    if let Some((start, end)) = meta.live_range(now) {
        for index in start..=end {
            let slot_name = slot_key(&board.base, index);
            match acl.open(ctx, &slot_name, false)?.kind() {
                KeyKind::Hash => {
                    live += 1;
                    oldest = oldest.or(Some(slot_start(index, meta.slot)));
                }
                // A gap, or on the other node during a reshard.
                KeyKind::Empty => transit.missing()?,
                _ => {}
            }
        }
    }
    Ok(Reply::Map(vec![
        ("window", Reply::Int(meta.window)),
        ("slot", Reply::Int(meta.slot)),
        ("members", Reply::Int(members)),
        ("slots", Reply::Int(live)),
        ("oldest", oldest.map_or(Reply::Nil, Reply::Int)),
    ]))
}

// --------------------------------------------------------------------------------- expiry

/// Effects of one expiry step on one slot, sent as a few batched commands.
struct ExpiryEffects {
    zadd: Vec<Vec<u8>>,
    zrem: Vec<Vec<u8>>,
    hdel: Vec<Vec<u8>>,
}

impl ExpiryEffects {
    fn new(base: &[u8], slot_name: &[u8]) -> Self {
        ExpiryEffects {
            zadd: vec![base.to_vec()],
            zrem: vec![base.to_vec()],
            hdel: vec![slot_name.to_vec()],
        }
    }

    fn emit(&self, ctx: &Context) {
        for (command, args) in [
            ("ZADD", &self.zadd),
            ("ZREM", &self.zrem),
            ("HDEL", &self.hdel),
        ] {
            if args.len() > 1 {
                let args: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
                ctx.replicate(command, &args[..]);
            }
        }
    }
}

/// Subtracts one expired slot from the totals, member by member, until the slot hash is
/// empty (true) or the deadline passes (false; the scan resumes at the next visit).
fn drain_slot(
    ctx: &Context,
    board: &BoardId,
    index: i64,
    keys: (&Key, &Key, &[u8]),
    deadline_us: u64,
) -> bool {
    let (zset, slot, slot_name) = keys;
    let base = board.1.as_slice();
    let cursor_key = board.clone();
    let saved = CURSORS.with(|c| c.borrow_mut().remove(&cursor_key));
    let mut cursor = match saved {
        Some((saved_index, cursor)) if saved_index == index => cursor,
        _ => HashCursor::new(),
    };
    let mut effects = ExpiryEffects::new(base, slot_name);
    let mut batch = Vec::new();
    let drained = loop {
        batch.clear();
        let more = cursor.step(slot, &mut batch);
        for (member, count) in batch.drain(..) {
            let Some(m) = RStr::new(&member) else {
                continue;
            };
            let count = parse_i64(&count).unwrap_or(0);
            if count > 0 {
                if let Some(score) = zset.zscore(&m) {
                    let total = score_to_total(score).saturating_sub(count);
                    if total <= 0 {
                        zset.zrem(&m);
                        effects.zrem.push(member.clone());
                    } else {
                        zset.zadd(&m, total as f64);
                        effects.zadd.push(int_arg(total));
                        effects.zadd.push(member.clone());
                    }
                }
            }
            slot.hdel_str(&m);
            effects.hdel.push(member);
        }
        if !more {
            if slot.kind() != KeyKind::Hash {
                break true;
            }
            // Fields the scan missed (the hash changed under it): scan again.
            cursor = HashCursor::new();
        }
        if monotonic_us() >= deadline_us {
            CURSORS.with(|c| c.borrow_mut().insert(cursor_key, (index, cursor)));
            break false;
        }
    };
    effects.emit(ctx);
    drained
}

/// Timer visit of a scheduled key whose `_tally` marker starts with [`FAMILY`]: the meta
/// hash `name` of a leaderboard. Subtracts slots that left the window, in bounded steps.
pub fn expire(
    ctx: &Context,
    key: Key,
    name: &[u8],
    marker: &[u8],
    now: i64,
    deadline_us: u64,
) -> Visit {
    // The board's keys are opened below, for writing when there is work.
    drop(key);
    if has_jobs() {
        // A rename or delete of this board may be queued: let it run first.
        return Visit::DueAt(now.saturating_add(1));
    }
    let (Some(mut meta), Some(base)) = (Meta::parse(marker), base_of_meta(name)) else {
        return Visit::Done;
    };
    let db = selected_db(ctx);
    remember(db, base, meta);
    let marked = Key::open_bytes_untouched(ctx, name)
        .is_some_and(|k| k.hget(lifecycle::EDITED_FIELD).is_some());
    if marked {
        lifecycle::quarantine(db, base);
    }
    if is_quarantined(db, base) {
        // Edited by a native command, maybe by a user who may not touch the totals: the
        // timer keeps its hands off; the next write rebuilds the board.
        return Visit::Done;
    }
    if meta.pending_range(now).is_none() {
        // Nothing to expire yet: open nothing for writing (that would invalidate WATCH).
        return meta.next_due().map_or(Visit::Done, Visit::DueAt);
    }
    let Some(key) = Key::open_bytes(ctx, name, true) else {
        return Visit::Done;
    };
    let Some(zset) = Key::open_bytes(ctx, base, true) else {
        return Visit::Done;
    };
    if !matches!(zset.kind(), KeyKind::Empty | KeyKind::Zset) {
        return Visit::Done;
    }
    // During a reshard the keys of this board may be split between two nodes: subtracting
    // a slot whose totals are elsewhere, or skipping a slot hash that is elsewhere (and
    // forgetting it), would lose counts. Such a board is visited again later.
    let transit = Transit::new(ctx, &ctx.get_flags(), base);
    let retry = Visit::DueAt(now.saturating_add(TRANSIT_RETRY_MS));
    if zset.kind() == KeyKind::Empty && meta.pending_range(now).is_some() && transit.active() {
        return retry;
    }
    let before = meta;
    let mut expired = 0u64;
    let mut finished = true;
    let mut blocked = false;
    let mut probes = 0u32;
    while let Some((index, _)) = meta.pending_range(now) {
        let slot_name = slot_key(base, index);
        let slot = Key::open_bytes(ctx, &slot_name, true);
        let kind = slot.as_ref().map_or(KeyKind::Empty, |s| s.kind());
        if kind == KeyKind::Empty && transit.active() {
            blocked = true;
            break;
        }
        if kind == KeyKind::Hash {
            let Some(slot) = slot else { break };
            let board: BoardId = (db, base.to_vec());
            if !drain_slot(ctx, &board, index, (&zset, &slot, &slot_name), deadline_us) {
                finished = false;
                break;
            }
            expired += 1;
        }
        meta.lo = index.saturating_add(1);
        probes += 1;
        if probes.is_multiple_of(64) && monotonic_us() >= deadline_us {
            finished = false;
            break;
        }
    }
    expiry::count_expired(expired);
    if meta != before {
        if meta.is_empty() && zset.kind() == KeyKind::Empty {
            // Nothing left at all: the leaderboard disappears, like an emptied sorted set.
            key.delete();
            ctx.replicate("DEL", &[name][..]);
            lifecycle::forget_board(db, base);
            return Visit::Done;
        }
        save_marker(ctx, &key, name, &meta);
        remember(db, base, meta);
    }
    if blocked {
        return retry;
    }
    if !finished {
        return Visit::Unfinished;
    }
    match meta.next_due() {
        Some(due) => Visit::DueAt(due),
        None => Visit::Done,
    }
}
