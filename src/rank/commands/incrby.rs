//! TSRANK.INCRBY, top-down: open the board (every key, checked), check it (rebuild a
//! quarantined one, refuse a range that would not fit), compute the new values, write
//! them (and keep the board's next totals in step), replicate them as absolute values,
//! reply.
//!
//! Owns: the write path of increments. May not touch: the meta hash's fields other than
//! through `meta_hash`; replicates only through [`Effects`]. Nothing is written before every
//! argument, key type and ACL permission has been checked.

use redis_module::{Context, NotifyEvent, RedisString};

use crate::args::{parse_i64, set_once, Args};
use crate::cmddocs::{block, integer, string, Doc, AT, KEY};
use crate::error::{Error, Result};
use crate::expiry;
use crate::host::cmdinfo::{command, first_key, Command, UPDATE};
use crate::host::config;
use crate::host::replicate::Effects;
use crate::host::reply::Reply;
use crate::host::server::{command_now_ms, selected_db};
use crate::host::store::acl::Acl;
use crate::host::store::{notify, Key, KeyKind, RStr};
use crate::rank::model::{
    apply_increments, meta_key, plan_write, positive_only, score_to_total, slot_key,
    validate_settings, Incremented, KeyName, MemberCounts, Meta, MetaLayout, Plan, SlotOrder,
    Target as Planned, FILL_IN_WRITE, MAX_TOTAL,
};
use crate::window::{effective_time, slot_index};
use smallvec::SmallVec;

use super::lifecycle::{broken_meta_found, has_jobs, open_for_write};
use super::memory::{self, HeldOrder, MetaOrigin};
use super::meta_hash;
use super::next;
use super::repair::{self, Stored};
use super::slots::{open_pending, pending_in};
use super::transit::Transit;

/// Increments (and their replies) kept on the stack: the usual write has one.
const INLINE_PAIRS: usize = 8;

pub const INCRBY: Command = command! {
    c"tsrank.incrby" => incrby, -4, c"write deny-oom", &[first_key(UPDATE)], c"write", &INCRBY_DOC
};

const INCRBY_DOC: Doc = Doc {
    summary: c"Add increments to members of a leaderboard in the slot of now or of a given time",
    complexity: c"O(M * log(N)) where M is the number of increment/member pairs and N the number of members; a board whose keys were edited by other commands is first rebuilt, O(C) in its stored counts; on a board with CAPACITY k, O(M * log(k)) more, evictions included, and a write to a slot of at most 128 members whose order the server does not hold (after a restart or a failover) first reads it, O(128); a larger slot's order is read by the expiry timer in steps, the slot evicting nothing meanwhile",
    args: &[
        KEY,
        block(c"pair", &[integer(c"increment"), string(c"member")]).multiple(),
        AT,
    ],
};

/// TSRANK.INCRBY key increment member [increment member ...] [AT ts]
pub fn incrby(ctx: &Context, name: &RedisString, rest: &[&[u8]]) -> Result<Reply> {
    let Increments { pairs, at } = parse(rest)?;
    let now = command_now_ms();
    let ts = effective_time(at, now, config::max_future_ms()).ok_or(Error::TooFarInFuture)?;
    let mut target = open_for_write(ctx, name.as_slice(), |acl, transit| {
        let Some(mut target) = open(ctx, acl, name, now, ts, transit)? else {
            return Ok(None);
        };
        // Checked before `check`, which may repair a quarantined board.
        if target.meta.is_bounded() && pairs.iter().any(|&(increment, _)| increment < 0) {
            return Err(positive_only());
        }
        let checked = check(ctx, acl, name.as_slice(), &mut target, now, transit)?;
        Ok(checked.then_some(target))
    })?;
    let db = selected_db(ctx);
    // A board with CAPACITY: the slot's order (taken out of memory while the command
    // works) plans the evictions; an error lets it go (the plan changed it), and the next
    // write starts it again.
    let (order, plan) = match target.meta.is_bounded() {
        true => {
            let mut held = slot_order(ctx, db, name.as_slice(), &target);
            let before = held.order.error;
            let capacity = target.meta.capacity;
            let planned = plan_write(&pairs, capacity, &mut held.order, |member| {
                stored_count(&target, member)
            });
            let plan = match planned {
                Ok(plan) => plan,
                Err(e) => {
                    memory::orders(|o| o.discard(held.order));
                    return Err(e);
                }
            };
            (Some((held, before)), Some(plan))
        }
        false => (None, None),
    };
    let computed = match &plan {
        None => compute_changes(&pairs, None, &target),
        Some(plan) => {
            let (expanded, replied) = expand(&pairs, plan);
            compute_changes(&expanded, Some(&replied), &target)
        }
    };
    let (mut changes, replies) = match computed {
        Ok(computed) => computed,
        Err(e) => {
            if let Some((held, _)) = order {
                memory::orders(|o| o.discard(held.order));
            }
            return Err(e);
        }
    };
    // Read handles on the slot hashes close before the write (it may empty one).
    target.stored = None;
    let mut meta_effects = write(ctx, name.as_slice(), &mut target, &mut changes);
    if let Some((held, before)) = order {
        if held.order.error > before {
            write_error(ctx, &target, held.order.error, &mut meta_effects);
        }
        memory::orders(|o| o.put(db, name.as_slice(), held));
    }
    replicate(ctx, name, &target, &changes, meta_effects);
    notify(ctx, NotifyEvent::ZSET, c"tsrank.incrby", name);
    Ok(match replies.as_slice() {
        [single] => Reply::Int(*single),
        _ => Reply::Array(replies.iter().map(|&reply| Reply::Int(reply)).collect()),
    })
}

/// A parsed INCRBY.
struct Increments<'a> {
    /// `(increment, member)`, in order (on the stack when few).
    pairs: SmallVec<[(i64, &'a [u8]); INLINE_PAIRS]>,
    /// The `AT` timestamp, if given.
    at: Option<i64>,
}

fn parse<'a>(rest: &'a [&'a [u8]]) -> Result<Increments<'a>> {
    let mut args = Args::new(rest);
    let mut pairs = SmallVec::new();
    let mut at = None;
    while !args.is_done() {
        if args.eat_keyword("AT") {
            set_once(&mut at, args.next_timestamp()?)?;
            if !args.is_done() {
                return Err(Error::Syntax);
            }
            break;
        }
        let increment = args.next_i64()?;
        let member = args.next_bytes()?;
        if increment == 0 {
            return Err(Error::Invalid(
                "increment must be a non-zero integer".into(),
            ));
        }
        if increment.unsigned_abs() > MAX_TOTAL.unsigned_abs() {
            return Err(Error::Overflow);
        }
        pairs.push((increment, member));
    }
    if pairs.is_empty() {
        return Err(Error::Syntax);
    }
    Ok(Increments { pairs, at })
}

/// The keys of one INCRBY, opened for writing and checked.
struct Target {
    zset: Key,
    meta_name: KeyName,
    /// The meta hash, opened unless the board's verified meta was used (then this write
    /// neither reads nor writes it).
    meta_hash: Option<Key>,
    meta: Meta,
    /// The meta is known to equal the stored one (see `crate::rank::model::KnownMetas`), after this write too.
    verified: bool,
    /// How the meta hash holds the meta (`None`: a new board, nothing stored yet).
    stored_as: Option<MetaLayout>,
    /// The slot the write goes to.
    index: i64,
    /// The slot hash's name (kept for the replicated `HSET`).
    slot_name: RStr,
    slot: Key,
    /// A key exists under the slot hash's name but is not a part of the board (a hash
    /// outside its range, or a value of another type; see `check`): the write replaces it.
    slot_is_leftover: bool,
    /// Slot hashes that left the window and still hold counts (see `board`).
    pending: Vec<Key>,
    /// A board being rebuilt in steps (see `repair`): its stored slot hashes but the
    /// written one, over which the members written are summed; the pending slots are
    /// among them (and `pending` is empty).
    /// With the last index of the slots that left the window, if any.
    stored: Option<(Stored, Option<i64>)>,
}

/// Opens and checks every key of the write: the sorted set, the meta (its verified copy
/// or its hash; a new board gets the configured defaults), the slot hash of `ts` and the
/// pending slots. `Ok(None)` if an open queued a lifecycle job.
fn open(
    ctx: &Context,
    acl: &Acl,
    name: &RedisString,
    now: i64,
    ts: i64,
    transit: &Transit,
) -> Result<Option<Target>> {
    let base = name.as_slice();
    let zset = Key::open(ctx, name, true);
    if !matches!(zset.kind(), KeyKind::Empty | KeyKind::Zset) {
        return Err(Error::WrongType);
    }
    let meta_name = meta_key(base);
    let db = selected_db(ctx);
    // The usual write: the verified meta (see `crate::rank::model::KnownMetas`) spares reading the meta hash, as
    // long as the write stays in the board's slot range (a new slot rewrites the meta).
    // The caller's write permission on the meta hash is checked all the same.
    let verified = match zset.kind() {
        KeyKind::Zset => meta_hash::verified(ctx, db, base, &meta_name)?
            .filter(|meta| !meta.clone().note_write(slot_index(ts, meta.slot))),
        _ => None,
    };
    let (meta_hash, meta, stored_as, verified) = match verified {
        Some(meta) => {
            acl.check_bytes(&meta_name, true)?;
            (None, meta, Some(MetaLayout::Current), true)
        }
        None => {
            let meta_hash = acl.open(ctx, &meta_name, true)?;
            if has_jobs() {
                return Ok(None);
            }
            let loaded = match meta_hash::load(&meta_hash) {
                Ok(loaded) => loaded,
                // A field past its TTL the server has not reclaimed yet: the meta is put
                // back first, as after an `HDEL` of the field (see `broken_meta_found`).
                Err(_) if broken_meta_found(ctx, db, base, &meta_hash).is_some() => {
                    return Ok(None)
                }
                Err(e) => return Err(e),
            };
            let (meta, stored_as) = match loaded {
                Some((meta, layout)) => (meta, Some(layout)),
                None if zset.kind() == KeyKind::Zset => {
                    // A plain sorted set, or a leaderboard whose meta hash a reshard has
                    // moved already (or not yet).
                    transit.missing()?;
                    return Err(Error::WrongType);
                }
                None => {
                    // A new leaderboard, unless a reshard has its meta hash on the other
                    // node.
                    transit.missing()?;
                    let (window, slot) = (config::RANK_WINDOW.ms(), config::RANK_SLOT.ms());
                    validate_settings(window, slot)?;
                    (Meta::new(window, slot), None)
                }
            };
            let verified = stored_as == Some(MetaLayout::Current)
                && zset.kind() == KeyKind::Zset
                && !meta_hash.has_ttl()
                && meta_hash::fields_never_expire(ctx, &meta_hash, &meta_name);
            (Some(meta_hash), meta, stored_as, verified)
        }
    };
    let index = slot_index(ts, meta.slot);
    if index < meta.first_kept(now) {
        return Err(crate::error::outside_kept_range(ts));
    }
    let slot_name = RStr::try_new(&slot_key(base, index))?;
    let slot = acl.open_str(ctx, &slot_name, true)?;
    let pending = open_pending(ctx, acl, base, &meta, now, transit)?
        .into_iter()
        .map(|(_, slot)| slot)
        .collect();
    if has_jobs() {
        return Ok(None);
    }
    Ok(Some(Target {
        zset,
        meta_name,
        meta_hash,
        meta,
        verified,
        stored_as,
        index,
        slot_name,
        slot,
        slot_is_leftover: false,
        pending,
        stored: None,
    }))
}

/// Makes the board ready for the write: a quarantined board with few slot fields is
/// rebuilt (and that is saved and replicated at once, whatever follows), a larger one is
/// rebuilt in steps (see `repair`: this write sums its members over the stored slots);
/// then the write must fit the range and must not create a slot hash that may exist on
/// another node. `Ok(false)` if an open queued a lifecycle job (the write starts over).
fn check(
    ctx: &Context,
    acl: &Acl,
    base: &[u8],
    target: &mut Target,
    now: i64,
    transit: &Transit,
) -> Result<bool> {
    if let Some(layout) = target.stored_as {
        let db = selected_db(ctx);
        let quarantined = memory::quarantine(|q| q.contains(db, base));
        if quarantined && repair::begin_in_steps(ctx, acl, base, &target.meta, now)? {
            target.verified = false;
            target.pending.clear();
            // The written slot's count comes from its open handle (`current_values`).
            let meta = &target.meta;
            let slots = (meta, Some(target.index));
            let stored = repair::open_stored(ctx, acl, base, slots, transit)?;
            let pending_end = meta.pending_range(now).map(|(_, end)| end);
            target.stored = Some((stored, pending_end));
            if has_jobs() {
                return Ok(false);
            }
        } else if quarantined {
            // The rebuild deletes the pending slot hashes: close our handles on them
            // first (closing a handle whose value another handle freed reads freed
            // memory). The rebuilt totals need no pending correction.
            target.pending.clear();
            target.verified = false;
            let meta = &mut target.meta;
            repair::at_once(ctx, acl, &target.zset, base, meta, now, transit)?;
            let mut effects = Effects::new();
            if let Some(meta_hash) = &target.meta_hash {
                meta_hash::write_range(meta_hash, &target.meta_name, meta, layout, &mut effects);
            }
            effects.emit(ctx);
            target.stored_as = Some(MetaLayout::Current);
        }
    }
    let (meta, index) = (target.meta, target.index);
    let mut stretched = meta;
    if stretched.note_write(index) && !stretched.span_fits() {
        // Expiry is far behind (the server was down for a long time): the timer catches
        // up within moments; a meta spanning more than two windows is not a leaderboard.
        return Err(Error::TryAgain(
            "this leaderboard's expiry is catching up, retry in a moment".into(),
        ));
    }
    let in_range = target.stored_as.is_some() && (meta.lo..=meta.hi).contains(&index);
    match target.slot.kind() {
        // Every part of a board has an index in `lo ..= hi`. A hash outside (or at a new
        // board) is a leftover of a native edit (another board's meta renamed onto this
        // one, a narrowed `_slots`) or a user's own hash under the board's names: counting
        // it would make the totals disagree with the slots for good. The write replaces it.
        KeyKind::Hash => {
            target.slot_is_leftover = !in_range;
            Ok(true)
        }
        // Meta is here and every existing slot hash has an index in `lo ..= hi`: outside,
        // the hash exists nowhere and may be created (the usual case: a new slot). Inside,
        // it is a gap or, during a reshard, on the other node.
        KeyKind::Empty if in_range => transit.missing().map(|_| true),
        KeyKind::Empty => Ok(true),
        // Another type under the slot's name (a user's SET, a sorted set) is no part of
        // the board either: reads and totals count it as an empty slot, so refusing
        // every write with WRONGTYPE would leave the board stuck while it reads empty.
        // The write replaces it, as a leftover hash.
        _ => {
            target.slot_is_leftover = true;
            Ok(true)
        }
    }
}

/// One member of an INCRBY: its string, and its slot count, total and pending counts
/// after the increments. A count of 0 leaves the slot hash, a total of 0 the sorted set.
struct Change<'a> {
    member: RStr,
    bytes: &'a [u8],
    counts: MemberCounts,
    /// The slot count and total as written (module strings, also replicated); `None` for
    /// a value of 0, removed instead.
    written: (Option<RStr>, Option<RStr>),
}

/// The new values of every member (a member may appear several times) and the reply to
/// each increment: the member's exact window total after it (the arithmetic is
/// `crate::rank::model::apply_increments`). With `replied`, only the increments it marks
/// are replied to (the others are evictions).
fn compute_changes<'a>(
    pairs: &[(i64, &'a [u8])],
    replied: Option<&[bool]>,
    target: &Target,
) -> Result<(Vec<Change<'a>>, SmallVec<[i64; INLINE_PAIRS]>)> {
    let mut replies = SmallVec::new();
    let current = |member: &'a [u8]| current_values(target, member);
    let mut at = 0;
    let changes = apply_increments(pairs, current, |reply| {
        if replied.is_none_or(|r| r.get(at).copied().unwrap_or(true)) {
            replies.push(reply);
        }
        at += 1;
    })?;
    Ok((changes, replies))
}

/// A plan's increments as `(increment, member)` pairs, and which of them answer one of the
/// command's pairs (the others are evictions).
fn expand<'a>(pairs: &[(i64, &'a [u8])], plan: &'a Plan) -> (Vec<(i64, &'a [u8])>, Vec<bool>) {
    (plan.increments.iter())
        .filter_map(|(increment, target)| match target {
            Planned::Pair(at) => pairs
                .get(*at)
                .map(|&(_, member)| ((*increment, member), true)),
            Planned::Evicted(name) => Some(((*increment, &name[..]), false)),
        })
        .unzip()
}

/// `member`'s count in the written slot before the write (0: not there, or a value that is
/// not a positive integer, which the write replaces).
fn stored_count(target: &Target, member: &[u8]) -> i64 {
    match (target.slot_is_leftover, RStr::new(member)) {
        (false, Some(member)) => (target.slot.hget_i64_str(&member))
            .flatten()
            .unwrap_or(0)
            .max(0),
        _ => 0,
    }
}

/// The order of the written slot of a board with CAPACITY: the one held in memory if it is
/// of this slot and, once complete, agrees with it (as many members, the same smallest
/// count); else one with the error its meta field holds: read here from a slot of at most
/// `FILL_IN_WRITE` fields, else empty and filled by the timer from the slot hash (see
/// `visit::fill_orders`: no command reads a large slot). While an order is not complete
/// the board is kept due, so the timer fills it.
fn slot_order(ctx: &Context, db: std::os::raw::c_int, base: &[u8], target: &Target) -> HeldOrder {
    let len = match target.slot_is_leftover {
        true => 0,
        false => target.slot.len(),
    };
    if let Some(held) = memory::orders(|o| o.take(db, base, target.index)) {
        let order = &held.order;
        let agrees = match order.is_complete() {
            true => {
                order.fields() == len
                    && order
                        .min()
                        .is_none_or(|(count, member)| stored_count(target, member) == count)
            }
            // Being filled: the writes keep what it holds current (a leftover hash is not
            // the slot it was filling).
            false => !target.slot_is_leftover,
        };
        if agrees {
            if !order.is_complete() {
                expiry::schedule(ctx, &target.meta_name, 0);
            }
            return held;
        }
        memory::orders(|o| o.discard(held.order));
    }
    let error = stored_error(ctx, target);
    if len == 0 {
        return HeldOrder::new(SlotOrder::new(target.index, error));
    }
    if len <= FILL_IN_WRITE {
        // Small: read here, so the slot evicts as it would have with its order held.
        let mut counts: Vec<(Vec<u8>, i64)> = Vec::with_capacity(len);
        target.slot.hscan(|member, count| {
            if let Ok(count @ 1..) = parse_i64(count) {
                counts.push((member.to_vec(), count));
            }
        });
        let counts = counts.iter().map(|(member, count)| (&member[..], *count));
        let mut order = SlotOrder::from_counts(target.index, error, counts);
        order.scan_done(len);
        return HeldOrder::new(order);
    }
    expiry::schedule(ctx, &target.meta_name, 0);
    HeldOrder::new(SlotOrder::building(target.index, error))
}

/// The written slot's error as its meta field holds it (0 when there is none).
fn stored_error(ctx: &Context, target: &Target) -> i64 {
    let index = target.index;
    match &target.meta_hash {
        Some(meta) => meta_hash::read_error(meta, index),
        None => Key::open_bytes(ctx, &target.meta_name, false)
            .map_or(0, |meta| meta_hash::read_error(&meta, index)),
    }
}

/// Stores the written slot's new error in its meta field, recorded with the meta's effects.
fn write_error(ctx: &Context, target: &Target, error: i64, effects: &mut Effects) {
    let (name, index) = (&target.meta_name, target.index);
    match &target.meta_hash {
        Some(meta) => meta_hash::write_error(meta, name, index, error, effects),
        None => {
            if let Some(meta) = Key::open_bytes(ctx, name, true) {
                meta_hash::write_error(&meta, name, index, error, effects);
            }
        }
    }
}

impl Incremented for Change<'_> {
    fn name(&self) -> &[u8] {
        self.bytes
    }
    fn counts(&mut self) -> &mut MemberCounts {
        &mut self.counts
    }
}

/// `member`'s stored values before the write.
fn current_values<'a>(target: &Target, member: &'a [u8]) -> Result<Change<'a>> {
    let rstr = RStr::try_new(member)?;
    let slot_count = match target.slot_is_leftover {
        true => 0,
        false => target
            .slot
            .hget_i64_str(&rstr)
            .flatten()
            .unwrap_or(0)
            .max(0),
    };
    let (total, pending) = match &target.stored {
        // A board being rebuilt: the member's sum over every stored slot (its total on a
        // healthy board), and the part of it that left the window.
        Some((stored, pending_end)) => {
            let (all, pending) = repair::sums(stored, &rstr, *pending_end);
            (all.saturating_add(slot_count), pending)
        }
        None => {
            let total = target.zset.zscore(&rstr).map_or(0, score_to_total).max(0);
            // A count that is not a positive integer (a user's edit) is nothing, as reads
            // take it.
            (total, pending_in(&target.pending, &rstr))
        }
    };
    Ok(Change {
        member: rstr,
        bytes: member,
        counts: MemberCounts {
            slot_count,
            total,
            pending,
        },
        written: (None, None),
    })
}

/// Writes the new values, and the meta if its range changed, the board is new or its meta
/// is still in the four-number layout. Returns the meta's effects (and the removal of a
/// leftover slot hash), which go first when the write is replicated.
fn write(ctx: &Context, base: &[u8], target: &mut Target, changes: &mut [Change]) -> Effects {
    if target.slot_is_leftover {
        // A leftover can be a whole slot of a deleted board whose parts are still queued
        // for removal (`DEL key` then a write before the job runs): freed in the
        // background, as its removal would have (a million fields take ~1 s to free).
        target.slot.unlink();
    }
    // The replicated HSET and ZADD take the module strings the write made (the members,
    // the counts set in the slot hash): a reference each, nothing copied.
    for change in changes.iter_mut() {
        let count = match change.counts.slot_count {
            0 => {
                target.slot.hdel_str(&change.member);
                None
            }
            count => RStr::from_i64(count),
        };
        if let Some(count) = &count {
            target.slot.hset_str_value(&change.member, count);
        }
        let total = match change.counts.total {
            0 => {
                target.zset.zrem(&change.member);
                None
            }
            total => RStr::from_i64(total),
        };
        if total.is_some() {
            target.zset.zadd(&change.member, change.counts.total as f64);
        }
        change.written = (count, total);
    }
    let mut effects = Effects::new();
    let range_changed = target.meta.note_write(target.index);
    let meta = target.meta;
    // A verified meta was used only if this write leaves it as it is.
    if let Some(meta_hash) = &target.meta_hash {
        let name = &target.meta_name;
        match target.stored_as {
            None => meta_hash::write_all(meta_hash, name, &meta, &mut effects),
            Some(layout) if range_changed || layout != MetaLayout::Current => {
                meta_hash::write_range(meta_hash, name, &meta, layout, &mut effects)
            }
            Some(_) => {}
        }
    }
    if range_changed || target.stored_as.is_none() {
        if let Some(due) = meta.next_due() {
            expiry::schedule(ctx, &target.meta_name, due);
        }
    }
    // The totals without the oldest slot, if the board keeps them (see `next`).
    let slot = (target.index, target.slot.len());
    let members = changes
        .iter()
        .map(|c| (&c.member, c.bytes, c.counts.slot_count, c.counts.total));
    if next::follow_write(ctx, selected_db(ctx), base, &meta, slot, members) {
        expiry::schedule(ctx, &target.meta_name, 0);
    }
    if target.slot_is_leftover {
        effects.command(c"UNLINK").arg(target.slot_name.as_bytes());
    }
    effects
}

/// Replicates the write as absolute values (`HSET meta ...` and the removal of a leftover
/// slot hash first, then `HSET slot member count ...`, `HDEL slot member ...` for counts
/// lowered to 0, `ZADD key total member ...`, `ZREM key member ...` for totals lowered to
/// 0), and records the meta this write leaves (see `crate::rank::model::KnownMetas`).
fn replicate(
    ctx: &Context,
    name: &RedisString,
    target: &Target,
    changes: &[Change],
    mut meta_effects: Effects,
) {
    meta_effects.emit(ctx);
    let counts = || {
        changes
            .iter()
            .map(|change| (&change.member, change.written.0.as_ref()))
    };
    if counts().any(|(_, count)| count.is_some()) {
        let slot_counts = counts()
            .filter_map(|(member, count)| Some([member.into(), count?.into()]))
            .flatten();
        let hset = std::iter::once((&target.slot_name).into()).chain(slot_counts);
        Effects::send_strings(ctx, c"HSET", hset);
    }
    if counts().any(|(_, count)| count.is_none()) {
        let zeros = counts()
            .filter(|(_, count)| count.is_none())
            .map(|(member, _)| member.into());
        let hdel = std::iter::once((&target.slot_name).into()).chain(zeros);
        Effects::send_strings(ctx, c"HDEL", hdel);
    }
    let totals = || {
        changes
            .iter()
            .map(|change| (&change.member, change.written.1.as_ref()))
    };
    if totals().any(|(_, total)| total.is_some()) {
        let pairs = totals()
            .filter_map(|(member, total)| Some([total?.into(), member.into()]))
            .flatten();
        Effects::send_strings(ctx, c"ZADD", std::iter::once(name.into()).chain(pairs));
    }
    if totals().any(|(_, total)| total.is_none()) {
        let zeros = totals()
            .filter(|(_, total)| total.is_none())
            .map(|(member, _)| member.into());
        Effects::send_strings(ctx, c"ZREM", std::iter::once(name.into()).chain(zeros));
    }
    if target.meta_hash.is_some() {
        // (The verified meta was used only if this write left it as it was: nothing new.)
        let seen = if target.verified {
            MetaOrigin::Verified
        } else {
            MetaOrigin::Written
        };
        let (db, meta) = (selected_db(ctx), target.meta);
        memory::known(|k| k.note(db, name.as_slice(), meta, seen));
    }
}
