//! TSRANK.REM, top-down: open the board (every key, checked), check it (rebuild a
//! quarantined one), count the members that had a non-zero window total, remove them
//! from the sorted set and from every slot hash, replicate the removals, reply.
//!
//! Owns: the removal of members. May not touch: the meta hash's fields other than through
//! `meta_hash`; replicates only through [`Effects`]. Nothing is written before every key type
//! and ACL permission has been checked.

use std::collections::HashSet;

use redis_module::{Context, NotifyEvent, RedisString};

use crate::cmddocs::{string, Doc, KEY};
use crate::error::{Error, Result};
use crate::host::cmdinfo::{command, first_key, Command, UPDATE};
use crate::host::replicate::Effects;
use crate::host::reply::Reply;
use crate::host::server::{command_now_ms, selected_db};
use crate::host::store::acl::Acl;
use crate::host::store::{notify, Key, KeyKind, RStr};
use crate::rank::model::{
    meta_key, remove_totals, score_to_total, slot_key, KeyName, Meta, MetaLayout, RemovalStore,
};

use super::lifecycle::{broken_meta_found, has_jobs, open_for_write};
use super::memory;
use super::meta_hash;
use super::repair;
use super::slots::count_in;
use super::transit::Transit;

pub const REM: Command = command! {
    c"tsrank.rem" => rem, -3, c"write deny-oom", &[first_key(UPDATE)], c"write", &REM_DOC
};

const REM_DOC: Doc = Doc {
    summary: c"Remove members from a leaderboard: their totals and their counts in every slot",
    complexity: c"O(M * S) where M is the number of members and S the number of live slots; a board whose keys were edited by other commands is first rebuilt, O(C) in its stored counts",
    args: &[KEY, string(c"member").multiple()],
};

/// TSRANK.REM key member [member ...]
pub fn rem(ctx: &Context, name: &RedisString, rest: &[&[u8]]) -> Result<Reply> {
    let members = parse(rest)?;
    let now = command_now_ms();
    let opened = open_for_write(ctx, name.as_slice(), |acl, transit| {
        let Some(board) = open(ctx, acl, name, transit)? else {
            return Ok(None);
        };
        let checked = board.map(|target| check(ctx, acl, name.as_slice(), target, now, transit));
        Ok(Some(checked.transpose()?))
    })?;
    let Some((target, rebuilding)) = opened else {
        return Ok(Reply::Int(0));
    };
    let (removed, changed) = remove(ctx, name, &target, &members, now, rebuilding);
    if changed {
        notify(ctx, NotifyEvent::ZSET, c"tsrank.rem", name);
    }
    Ok(Reply::Int(removed))
}

/// The members of a REM, each once, in order (a repeated member is counted once, as by
/// ZREM).
fn parse(rest: &[&[u8]]) -> Result<Vec<RStr>> {
    if rest.is_empty() {
        return Err(Error::Arity("TSRANK.REM".into()));
    }
    let mut seen = HashSet::new();
    rest.iter()
        .filter(|member| seen.insert(**member))
        .map(|member| RStr::try_new(member))
        .collect()
}

/// The keys of one REM, opened for writing and checked.
struct Target {
    zset: Key,
    meta_name: KeyName,
    meta_hash: Key,
    meta: Meta,
    layout: MetaLayout,
    /// Every slot hash of the board's range `lo ..= hi`, with its name.
    slots: Vec<(KeyName, i64, Key)>,
}

/// Opens and checks every key of the removal: the sorted set, the meta hash and the slot
/// hashes of the meta's range. `Ok(None)` if an open queued a lifecycle job,
/// `Ok(Some(None))` if there is no leaderboard.
fn open(
    ctx: &Context,
    acl: &Acl,
    name: &RedisString,
    transit: &Transit,
) -> Result<Option<Option<Target>>> {
    let base = name.as_slice();
    let zset = Key::open(ctx, name, true);
    if !matches!(zset.kind(), KeyKind::Empty | KeyKind::Zset) {
        return Err(Error::WrongType);
    }
    let meta_name = meta_key(base);
    let meta_hash = acl.open(ctx, &meta_name, true)?;
    if has_jobs() {
        return Ok(None);
    }
    let loaded = match meta_hash::load(&meta_hash) {
        Ok(loaded) => loaded,
        // A field past its TTL the server has not reclaimed yet: the meta is put back
        // first, as after an `HDEL` of the field (see `broken_meta_found`).
        Err(_) if broken_meta_found(ctx, selected_db(ctx), base, &meta_hash).is_some() => {
            return Ok(None)
        }
        Err(e) => return Err(e),
    };
    let Some((meta, layout)) = loaded else {
        // A plain sorted set, or a board whose meta hash a reshard has moved (or not yet).
        transit.missing()?;
        return match zset.kind() {
            KeyKind::Zset => Err(Error::WrongType),
            _ => Ok(Some(None)),
        };
    };
    if !meta.span_fits() {
        // As for INCRBY: expiry is far behind and catches up within moments.
        return Err(Error::TryAgain(
            "this leaderboard's expiry is catching up, retry in a moment".into(),
        ));
    }
    let mut slots = Vec::new();
    if !meta.is_empty() {
        for index in meta.lo..=meta.hi {
            let slot_name = slot_key(base, index);
            let slot = acl.open(ctx, &slot_name, true)?;
            match slot.kind() {
                KeyKind::Hash => slots.push((slot_name, index, slot)),
                // A gap, or on the other node during a reshard.
                KeyKind::Empty => transit.missing()?,
                _ => {}
            }
        }
    }
    if has_jobs() {
        return Ok(None);
    }
    Ok(Some(Some(Target {
        zset,
        meta_name,
        meta_hash,
        meta,
        layout,
        slots,
    })))
}

/// Rebuilds a quarantined board with few slot fields first (saved and replicated at once,
/// whatever follows): its totals become the sums of its live slot hashes, its pending
/// slots go. A larger one is rebuilt in steps (see `repair`; true): this removal counts
/// its members from the slot hashes.
fn check(
    ctx: &Context,
    acl: &Acl,
    base: &[u8],
    mut target: Target,
    now: i64,
    transit: &Transit,
) -> Result<(Target, bool)> {
    let db = selected_db(ctx);
    if !memory::quarantine(|q| q.contains(db, base)) {
        return Ok((target, false));
    }
    if repair::begin_in_steps(ctx, acl, base, &target.meta, now)? {
        return Ok((target, true));
    }
    // The rebuild deletes the pending slot hashes: close our handles on them first.
    target.slots.clear();
    repair::at_once(ctx, acl, &target.zset, base, &mut target.meta, now, transit)?;
    let mut effects = Effects::new();
    meta_hash::write_range(
        &target.meta_hash,
        &target.meta_name,
        &target.meta,
        target.layout,
        &mut effects,
    );
    effects.emit(ctx);
    memory::known(|k| k.note(db, base, target.meta, memory::MetaOrigin::Written));
    let meta = target.meta;
    if !meta.is_empty() {
        for index in meta.lo..=meta.hi {
            let slot_name = slot_key(base, index);
            let slot = acl.open(ctx, &slot_name, true)?;
            if slot.kind() == KeyKind::Hash {
                target.slots.push((slot_name, index, slot));
            }
        }
    }
    Ok((target, false))
}

/// A board as TSRANK.REM removes members from it (`crate::rank::model::RemovalStore`): the
/// removals from the sorted set are recorded as one `ZREM`.
struct Removing<'a> {
    name: &'a RedisString,
    target: &'a Target,
    /// The last slot that left the window, if any did.
    pending_end: Option<i64>,
    zrem: Effects,
    started: bool,
}

impl Removing<'_> {
    /// `member`'s counts in the board's slots that left the window (`pending`) or not.
    fn sum(&self, member: &RStr, pending: bool) -> i64 {
        let left = |index: i64| self.pending_end.is_some_and(|end| index <= end);
        (self.target.slots.iter())
            .filter(|(_, index, _)| left(*index) == pending)
            .map(|(_, _, slot)| count_in(slot, member))
            .fold(0i64, i64::saturating_add)
    }
}

impl RemovalStore for Removing<'_> {
    type Member = RStr;

    fn total(&mut self, member: &RStr) -> Option<i64> {
        self.target.zset.zscore(member).map(score_to_total)
    }

    fn pending_sum(&mut self, member: &RStr) -> i64 {
        self.sum(member, true)
    }

    fn live_sum(&mut self, member: &RStr) -> i64 {
        self.sum(member, false)
    }

    fn remove_total(&mut self, member: &RStr) {
        self.target.zset.zrem(member);
        if !self.started {
            self.zrem.command(c"ZREM").arg(self.name.as_slice());
            self.started = true;
        }
        self.zrem.arg(member.as_bytes());
    }
}

/// Removes `members` from the board: returns how many had a non-zero window total, and
/// whether anything was removed. Replicated as `ZREM key member ...` and one
/// `HDEL slot member ...` per slot hash that held some of them. On a board being rebuilt
/// (`rebuilding`) the window totals are the sums of the live slot hashes.
fn remove(
    ctx: &Context,
    name: &RedisString,
    target: &Target,
    members: &[RStr],
    now: i64,
    rebuilding: bool,
) -> (i64, bool) {
    // The sorted set still holds the counts of slots that left the window until the timer
    // has subtracted them: the window total leaves them out.
    let pending_end = target.meta.pending_range(now).map(|(_, end)| end);
    let mut store = Removing {
        name,
        target,
        pending_end,
        zrem: Effects::new(),
        started: false,
    };
    let removed = remove_totals(&mut store, members, rebuilding);
    let Removing {
        mut zrem, started, ..
    } = store;
    let mut any = started;
    zrem.emit(ctx);
    // A board with CAPACITY: the orders of its slots written last follow the removals.
    let db = selected_db(ctx);
    let mut orders = memory::orders(|o| o.take_all(db, name.as_slice()));
    for (slot_name, index, slot) in &target.slots {
        let mut hdel = Effects::new();
        let mut started = false;
        for member in members {
            if let Some(held) = orders.iter_mut().find(|h| h.order.index == *index) {
                held.order.set(member.as_bytes(), count_in(slot, member), 0);
            }
            if slot.hdel_str(member) {
                if !started {
                    hdel.command(c"HDEL").arg(slot_name);
                    started = true;
                }
                hdel.arg(member.as_bytes());
            }
        }
        any |= started;
        hdel.emit(ctx);
    }
    if !orders.is_empty() {
        memory::orders(|o| o.put_all(db, name.as_slice(), orders));
    }
    // The board's next totals (see `next`), if it keeps them: the members are gone.
    memory::nexts(|n| {
        if let Some(next) = n.get_mut(db, name.as_slice()) {
            for member in members {
                next.totals.set(member.as_bytes(), 0);
            }
        }
    });
    (removed, any)
}
