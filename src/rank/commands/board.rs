//! Opening a leaderboard for a read: the sorted set, the meta (its verified copy, its hash,
//! or what tally knows while a job puts a deleted one back), the slots still being subtracted, and
//! for a quarantined board the totals computed from its slot hashes (by the read when
//! they are few, by the timer in steps when they are many: see `repair`).
//!
//! Owns: [`Board`] and the read-only walks over a board's keys. May not touch: writes of
//! any kind (the write paths are `incrby`, `rem`, `repair`, `visit` and
//! `lifecycle`). Every derived key is opened through the caller's [`Acl`].

use std::collections::HashSet;
use std::os::raw::c_int;
use std::rc::Rc;

use redis_module::{Context, RedisString};

use crate::error::{Error, Result};
use crate::expiry;
use crate::host::server::selected_db;
use crate::host::store::acl::Acl;
use crate::host::store::zset::{zcount_above, zcount_at, zrevrange};
use crate::host::store::{Key, KeyKind, RStr};
use crate::rank::model::{
    corrected_around, corrected_rank, meta_key, score_to_total, slot_key, Meta, Pending, RankedSet,
    RawOrder, Totals,
};

use super::lifecycle::{broken_meta_found, has_jobs, resolve_base};
use super::memory::{self, MetaOrigin};
use super::meta_hash;
use super::next;
use super::repair;
use super::slots::{live_totals, open_pending, pending_in};
use super::transit::Transit;

/// Rows of the next totals copied at a time by a walk over them.
const NEXT_WALK_PAGE: usize = 256;

/// Pending counts (fields of the slot hashes that left the window) up to which the reads
/// about one member correct the pending members alone rather than walk the order: the
/// next totals take over from a larger oldest slot.
const CORRECTED_BY_MEMBER: usize = 4 * next::BIG_SLOT;

/// A leaderboard opened by a command.
pub(super) struct Board {
    pub(super) zset: Key,
    /// Name under which the derived keys live (differs from the key during a rename).
    pub(super) base: Vec<u8>,
    pub(super) meta: Meta,
    /// Slot hashes that left the window but still hold counts not yet subtracted.
    pub(super) pending: Vec<Key>,
    /// A quarantined board's window totals, computed from its slot hashes (its view): its
    /// sorted set may have been edited, the slots are what tally counted.
    pub(super) view: Option<Rc<Totals>>,
    /// The board answers from its next totals: the large oldest slot that left the window
    /// is being subtracted, and they leave it out (see `next`). Any later slots that left
    /// the window too are in `pending`, corrected member by member as the reads pass.
    pub(super) from_next: bool,
    pub(super) db: c_int,
}

impl Board {
    /// Opens `name` for reading. `Ok(None)`: no leaderboard there.
    pub(super) fn open_read(
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
        let meta_name = meta_key(&base);
        // Opening a part can expire it lazily, and a part that expires takes the whole
        // board with it: the expiry queues the removal, and from then on the board
        // answers as the removed board it is about to be (a write starts over instead).
        let removed_meanwhile = || has_jobs() && resolve_base(db, name.as_slice()).is_none();
        // The usual read: a verified meta (equal to the stored one, see `crate::rank::model::KnownMetas`) spares
        // reading and parsing the meta hash. The read permission is checked all the same.
        if let Some(meta) = meta_hash::verified(ctx, db, &base, &meta_name)? {
            acl.check_bytes(&meta_name, false)?;
            let board = Board::with_meta(ctx, acl, zset, base, meta, now, transit)?;
            return Ok(Some(board).filter(|_| !removed_meanwhile()));
        }
        let key = acl.open(ctx, &meta_name, false)?;
        if removed_meanwhile() {
            return Ok(None);
        }
        let meta = match meta_hash::load(&key) {
            Ok(Some((meta, _))) => Some(meta),
            // A user deleted the meta of a board tally knows; a job puts it back.
            Ok(None) if zset.kind() == KeyKind::Zset => memory::known(|k| k.get(db, &base)),
            Ok(None) => None,
            // A user garbled the meta of a board tally knows (HSET `_slots` garbage): the
            // queued job puts back the meta it holds, so the board answers from that one
            // meanwhile, as for a deleted meta. That job may wait out a client pause.
            // A field whose TTL has passed but that the server has not reclaimed yet reads
            // as absent with no event told: the job is queued now (`broken_meta_found`).
            // (A board never incremented has no sorted set yet: it answers as empty.)
            Err(e) => match broken_meta_found(ctx, db, &base, &key) {
                Some(meta) if matches!(zset.kind(), KeyKind::Zset | KeyKind::Empty) => Some(meta),
                _ => return Err(e),
            },
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
        memory::known(|k| k.note(db, &base, meta, MetaOrigin::Read));
        let board = Board::with_meta(ctx, acl, zset, base, meta, now, transit)?;
        Ok(Some(board).filter(|_| !removed_meanwhile()))
    }

    /// The board of sorted set `zset` and meta `meta`, with the slots still being
    /// subtracted, or for a quarantined board the totals computed from its slot hashes:
    /// summed here when they are few, else the timer's (see `repair`); until the timer's are
    /// done, a large quarantined board answers from its sorted set, the board as tally last
    /// left it.
    fn with_meta(
        ctx: &Context,
        acl: &Acl,
        zset: Key,
        base: Vec<u8>,
        meta: Meta,
        now: i64,
        transit: &Transit,
    ) -> Result<Board> {
        let db = selected_db(ctx);
        let quarantined = memory::quarantine(|q| q.contains(db, &base));
        let view = if quarantined {
            quarantined_view(ctx, acl, db, &base, &meta, now, transit)?
        } else {
            None
        };
        let mut pending = match view {
            Some(_) => Vec::new(),
            None => open_pending(ctx, acl, &base, &meta, now, transit)?,
        };
        // A large oldest slot being subtracted: its next totals answer (see `next`), on a
        // primary as on a replica (which follows the primary's effects: `replica`), once
        // the members changed since they were last set are set again from the keys. The
        // slots that left the window after it are still counted in them: they stay
        // pending, corrected by the reads.
        let from_next = match pending.first() {
            Some((index, _)) if !quarantined && memory::nexts(|n| n.any()) => {
                next::settle(ctx, db, &base, None);
                memory::nexts(|n| n.ready(db, &base, *index).is_some())
            }
            _ => false,
        };
        if from_next {
            pending.remove(0);
        }
        Ok(Board {
            zset,
            db,
            base,
            meta,
            pending: pending.into_iter().map(|(_, slot)| slot).collect(),
            view,
            from_next,
        })
    }

    /// The next totals of the board, when it answers from them (see `next`).
    pub(super) fn with_next<T>(&self, f: impl FnOnce(&RankedSet) -> T) -> Option<T> {
        if !self.from_next {
            return None;
        }
        memory::nexts(|n| Some(f(&n.get(self.db, &self.base)?.totals)))
    }

    /// `member`'s exact window total (0 if absent).
    pub(super) fn total_of(&self, member: &[u8]) -> i64 {
        if let Some(totals) = &self.view {
            return totals.get(member);
        }
        self.corrected(member, self.raw_total(member))
    }

    /// `member`'s window total from its total before the pending slots are corrected
    /// (`raw`, see [`Board::raw_total`]).
    pub(super) fn corrected(&self, member: &[u8], raw: i64) -> i64 {
        if self.pending.is_empty() || raw <= 0 {
            return raw;
        }
        match RStr::new(member) {
            Some(member) => raw.saturating_sub(pending_in(&self.pending, &member)),
            None => 0,
        }
    }

    /// `member`'s total before the pending slots are corrected: in the next totals when
    /// the board answers from them, else in the sorted set (0 if absent).
    pub(super) fn raw_total(&self, member: &[u8]) -> i64 {
        if let Some(total) = self.with_next(|next| next.get(member)) {
            return total;
        }
        RStr::new(member)
            .and_then(|m| self.zset.zscore(&m))
            .map_or(0, score_to_total)
    }

    /// The reverse walk of the totals before the pending slots are corrected, as
    /// `(member, raw total)` (see [`Board::raw_total`]).
    pub(super) fn raw_walk(&mut self) -> Box<dyn Iterator<Item = (Vec<u8>, i64)> + '_> {
        if !self.from_next {
            return Box::new(walk(&mut self.zset));
        }
        // A page at a time: the walk's caller reads keys between two rows, and the state
        // is never held while the server is called.
        let (db, base) = (self.db, &self.base);
        let mut offset = 0usize;
        let mut page = std::collections::VecDeque::new();
        Box::new(std::iter::from_fn(move || {
            if page.is_empty() {
                memory::nexts(|n| {
                    if let Some(next) = n.get(db, base) {
                        let rows = next.totals.top(offset, NEXT_WALK_PAGE);
                        page.extend(rows.map(|(m, t)| (m.to_vec(), t)));
                    }
                });
                offset = offset.saturating_add(page.len());
            }
            page.pop_front()
        }))
    }

    /// The members of the pending slots with their raw and exact totals, when those slots
    /// hold at most [`CORRECTED_BY_MEMBER`] fields (see `crate::rank::model::Pending`).
    pub(super) fn pending_members(&self) -> Option<Pending> {
        if self.pending.iter().map(Key::len).sum::<usize>() > CORRECTED_BY_MEMBER {
            return None;
        }
        let mut touched: HashSet<Vec<u8>> = HashSet::new();
        for slot in &self.pending {
            slot.hscan(|member, _| {
                touched.insert(member.to_vec());
            });
        }
        Some(Pending::new(touched.into_iter().map(|member| {
            let raw = self.raw_total(&member);
            let exact = self.corrected(&member, raw);
            (member, raw, exact)
        })))
    }

    /// The position of `key` (a member and its window total) while slots are pending,
    /// from the raw order corrected for the pending members alone: `None` when they are
    /// too many (see [`Board::pending_members`]).
    pub(super) fn pending_rank(
        &self,
        ctx: &Context,
        name: &RedisString,
        key: (i64, &[u8]),
    ) -> Option<usize> {
        let pending = self.pending_members()?;
        if let Some(rank) = self.with_next(|next| corrected_rank(&mut &*next, &pending, key)) {
            return Some(rank);
        }
        Some(corrected_rank(&mut ZsetOrder { ctx, name }, &pending, key))
    }

    /// TSRANK.AROUND's rows for `key` while slots are pending, as [`Board::pending_rank`]
    /// reads the order.
    pub(super) fn pending_around(
        &self,
        ctx: &Context,
        name: &RedisString,
        key: (i64, &[u8]),
        count: usize,
    ) -> Option<Vec<(Vec<u8>, i64)>> {
        let pending = self.pending_members()?;
        let from_next = |next: &RankedSet| corrected_around(&mut &*next, &pending, key, count);
        if let Some(rows) = self.with_next(from_next) {
            return Some(rows);
        }
        Some(corrected_around(
            &mut ZsetOrder { ctx, name },
            &pending,
            key,
            count,
        ))
    }

    /// The reverse walk of the sorted set as `(member, raw total)`, the member as the
    /// module string the server made (a reply sends it without a copy).
    pub(super) fn walk_str(&mut self) -> impl Iterator<Item = (RStr, i64)> + '_ {
        let mut walk = self.zset.zrev_iter();
        std::iter::from_fn(move || walk.next_str()).map(|(m, s)| (m, score_to_total(s)))
    }
}

/// The window totals a read of a quarantined board answers from: summed from the live
/// slot hashes when they hold few fields (or while the cluster slot moves), the timer's
/// when they are done (the caller may read every live slot), else `None`.
fn quarantined_view(
    ctx: &Context,
    acl: &Acl,
    db: c_int,
    base: &[u8],
    meta: &Meta,
    now: i64,
    transit: &Transit,
) -> Result<Option<Rc<Totals>>> {
    let Some(range) = meta.live_range(now) else {
        return Ok(Some(Rc::new(Totals::default())));
    };
    let few =
        repair::fields_in(ctx, base, range, repair::SUMMED_BY_READS) <= repair::SUMMED_BY_READS;
    if few || transit.active() {
        let totals = live_totals(ctx, acl, base, meta, meta.slots(), now, transit)?;
        return Ok(Some(Rc::new(totals.finish())));
    }
    if memory::quarantine(|q| q.is_rebuilding(db, base)) {
        // Rebuilt in steps (see `repair`): the sorted set is exact for every member a
        // write or the timer has set, and the timer is busy with it.
        return Ok(None);
    }
    let Some(totals) = memory::quarantine(|q| q.ready_view(db, base, range)) else {
        // The timer computes them (it visits quarantined boards only when asked to: a
        // visit opens the board's keys, which can expire them lazily).
        expiry::schedule(ctx, &meta_key(base), now);
        return Ok(None);
    };
    for index in range.0..=range.1 {
        acl.check_bytes(&slot_key(base, index), false)?;
    }
    Ok(Some(totals))
}

/// The reverse walk of a board's sorted set as `(member, raw total)`.
pub(super) fn walk(zset: &mut Key) -> impl Iterator<Item = (Vec<u8>, i64)> + '_ {
    zset.zrev_iter().map(|(m, s)| (m, score_to_total(s)))
}

/// A board's sorted set as the raw order of `crate::rank::model::corrected_rank`:
/// positions by ZCOUNT and, inside a group of equal scores, a binary search of one-row
/// ZREVRANGEs (O(log^2 N), no pass over a large group); rows by ZREVRANGE.
struct ZsetOrder<'a> {
    ctx: &'a Context,
    name: &'a RedisString,
}

impl RawOrder for ZsetOrder<'_> {
    fn ahead_of(&mut self, total: i64, member: &[u8]) -> usize {
        let name = self.name.as_slice();
        let above = zcount_above(self.ctx, name, total);
        let (mut lo, mut hi) = (0, zcount_at(self.ctx, name, total));
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let at = above + mid;
            let ahead = zrevrange(self.ctx, name, at, at)
                .first()
                .is_some_and(|(m, _)| m.as_slice() > member);
            if ahead {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        above + lo
    }

    fn rows(&mut self, from: usize, len: usize) -> Vec<(Vec<u8>, i64)> {
        if len == 0 {
            return Vec::new();
        }
        let last = from.saturating_add(len - 1);
        let rows = zrevrange(self.ctx, self.name.as_slice(), from, last).into_iter();
        rows.map(|(m, score)| (m, score_to_total(score))).collect()
    }
}
