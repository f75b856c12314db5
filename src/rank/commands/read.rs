//! The read commands: TSRANK.TOP, TSRANK.SCORE, TSRANK.RANK, TSRANK.INFO and
//! TSRANK.HISTORY. Exact on a primary even while an expired slot is still being
//! subtracted (see `crate::rank::model`).
//!
//! Owns: the answers. May not touch: writes of any kind (opens every key read-only, the
//! derived keys through the caller's [`Acl`]).

use std::collections::HashMap;

use redis_module::{Context, ContextFlags, RedisString, RedisValue};

use crate::args::set_once;
use crate::args::Args;
use crate::cmddocs::{integer, pure_token, string, Doc, KEY, WINDOW};
use crate::error::{Error, Result};
use crate::host::cmdinfo::{command, first_key, Command, READ};
use crate::host::reply::Reply;
use crate::host::server::command_now_ms;
use crate::host::store::acl::Acl;
use crate::host::store::{KeyKind, RStr};
use crate::rank::model::{meta_key, rank_adjusted, slot_key, top_adjusted, window_error, Meta};
use crate::window::slot_start;

use super::board::Board;
use super::slots::{live_totals, pending_in};
use super::transit::{check_cluster, Transit};

pub const TOP: Command = command! {
    c"tsrank.top" => top, -3, c"readonly", &[first_key(READ)], c"read", &TOP_DOC
};

const TOP_DOC: Doc = Doc {
    summary: c"List a leaderboard's members with the highest totals over the window",
    complexity: c"O(log(N) + M) where N is the number of members and M is OFFSET + count; with a WINDOW shorter than the board's, or while a slot that left the window is being subtracted, O(C) in the counts of the slots read",
    args: &[
        KEY,
        integer(c"count"),
        integer(c"offset").token(c"OFFSET").optional(),
        pure_token(c"withscores", c"WITHSCORES").optional(),
        WINDOW,
    ],
};

/// TSRANK.TOP key count [OFFSET offset] [WITHSCORES] [WINDOW dur]
pub fn top(ctx: &Context, name: &RedisString, rest: &[&[u8]]) -> Result<Reply> {
    let mut args = Args::new(rest);
    let count = args.next_i64_in(0.., "count is an integer >= 0")?;
    let (mut offset, mut withscores, mut window) = (None, None, None);
    while !args.is_done() {
        match args.next_keyword()?.as_str() {
            "OFFSET" => set_once(
                &mut offset,
                args.next_i64_in(0.., "OFFSET is an integer >= 0")?,
            )?,
            "WITHSCORES" => set_once(&mut withscores, true)?,
            "WINDOW" => set_once(&mut window, args.next_duration()?)?,
            _ => return Err(Error::Syntax),
        }
    }
    let offset = offset.unwrap_or(0);
    if count < 0 || offset < 0 {
        return Err(Error::NotInteger);
    }
    let now = command_now_ms();
    let (acl, transit, board) = open_for_read(ctx, name, now)?;
    let Some(mut board) = board else {
        return Ok(Reply::Array(Vec::new()));
    };
    let meta = board.meta;
    let sub_slots = sub_window(&meta, window)?.filter(|&d| d < meta.slots());
    let (offset, count) = (offset as usize, count as usize);
    let resp3 = ctx.get_flags().contains(ContextFlags::FLAGS_RESP3);
    let shape = TopShape {
        withscores: withscores.is_some(),
        resp3,
        count,
    };
    let plain = board.view.is_none() && board.pending.is_empty() && !board.from_next;
    if sub_slots.is_none() && plain {
        // The common case: the sorted set is exact, read it as ZREVRANGE does.
        let rows = board
            .walk_str()
            .take_while(|(_, total)| *total > 0)
            .skip(offset)
            .take(count)
            .map(|(member, total)| (Reply::Str(member), total));
        return Ok(shape.reply(rows));
    }
    let rows: Vec<(Vec<u8>, i64)> = if let Some(slots) = sub_slots {
        let totals = live_totals(ctx, &acl, &board.base, &meta, slots, now, &transit)?.finish();
        let rows = totals.top(offset, count);
        rows.map(|(m, t)| (m.to_vec(), t)).collect()
    } else if let Some(totals) = &board.view {
        let rows = totals.top(offset, count);
        rows.map(|(m, t)| (m.to_vec(), t)).collect()
    } else if let Some(rows) = board
        .pending
        .is_empty()
        .then(|| {
            board.with_next(|next| {
                let rows = next.top(offset, count);
                rows.map(|(m, t)| (m.to_vec(), t)).collect()
            })
        })
        .flatten()
    {
        rows
    } else {
        let want = offset.saturating_add(count).min(board.zset.len());
        let pending = std::mem::take(&mut board.pending);
        let adjust = |member: &[u8], raw: i64| match RStr::new(member) {
            Some(m) => raw.saturating_sub(pending_in(&pending, &m)),
            None => raw,
        };
        top_adjusted(board.raw_walk(), want, adjust)
            .into_iter()
            .skip(offset)
            .collect()
    };
    Ok(shape.reply(rows.into_iter().map(|(m, t)| (Reply::Bulk(m), t))))
}

/// How TOP (and AROUND) lays out its rows (at most `count`).
pub(super) struct TopShape {
    pub(super) withscores: bool,
    pub(super) resp3: bool,
    pub(super) count: usize,
}

impl TopShape {
    /// `member` or `member, total` per row; RESP3 pairs as arrays.
    pub(super) fn reply(&self, rows: impl Iterator<Item = (Reply, i64)>) -> Reply {
        let per_row = if self.withscores && !self.resp3 { 2 } else { 1 };
        let mut out = Vec::with_capacity(self.count.min(1024) * per_row);
        for (member, total) in rows {
            match (self.withscores, self.resp3) {
                (false, _) => out.push(member),
                (true, true) => out.push(Reply::Array(vec![member, Reply::Int(total)])),
                (true, false) => {
                    out.push(member);
                    out.push(Reply::Int(total));
                }
            }
        }
        Reply::Array(out)
    }
}

/// The number of slots of `WINDOW dur` (TOP and HISTORY): a multiple of the board's SLOT,
/// at most its WINDOW. `None`: no `WINDOW` given.
fn sub_window(meta: &Meta, window: Option<i64>) -> Result<Option<i64>> {
    window.map(|dur| meta.sub_window_slots(dur)).transpose()
}

pub const HISTORY: Command = command! {
    c"tsrank.history" => history, -3, c"readonly", &[first_key(READ)], c"read", &HISTORY_DOC
};

const HISTORY_DOC: Doc = Doc {
    summary: c"List a member's counts per slot over a leaderboard's window, oldest first",
    complexity: c"O(S) where S is the number of slots in the window (or in WINDOW's duration)",
    args: &[KEY, string(c"member"), WINDOW],
};

/// TSRANK.HISTORY key member [WINDOW dur]: `member`'s non-zero counts per slot, oldest
/// first, read from the slot hashes of the window (or of its latest `dur`). A slot that
/// has left the window is never listed, even while its expiry is still running.
pub fn history(ctx: &Context, name: &RedisString, rest: &[&[u8]]) -> Result<Reply> {
    let [member, options @ ..] = rest else {
        return Err(Error::Arity("tsrank.history".into()));
    };
    let mut args = Args::new(options);
    let mut window = None;
    while !args.is_done() {
        match args.next_keyword()?.as_str() {
            "WINDOW" => set_once(&mut window, args.next_duration()?)?,
            _ => return Err(Error::Syntax),
        }
    }
    let now = command_now_ms();
    let (acl, transit, board) = open_for_read(ctx, name, now)?;
    let Some(board) = board else {
        return Ok(Reply::Array(Vec::new()));
    };
    let meta = board.meta;
    let slots = sub_window(&meta, window)?.unwrap_or_else(|| meta.slots());
    let (Some((first, last)), Some(member)) = (meta.recent_range(now, slots), RStr::new(member))
    else {
        return Ok(Reply::Array(Vec::new()));
    };
    let mut rows = Vec::new();
    for index in first..=last {
        let slot = acl.open(ctx, &slot_key(&board.base, index), false)?;
        match slot.kind() {
            KeyKind::Hash => {}
            // A gap, or on the other node during a reshard.
            KeyKind::Empty => {
                transit.missing()?;
                continue;
            }
            _ => continue,
        }
        // Values that are not positive integers (a user's edits) count as nothing, as
        // in the totals.
        if let Some(Some(count @ 1..)) = slot.hget_i64_str(&member) {
            rows.push((Reply::Int(slot_start(index, meta.slot)), Reply::Int(count)));
        }
    }
    Ok(Reply::pairs(rows))
}

/// The common start of the read commands: cluster check, the caller's ACL, the transit
/// probe and the board at `name` (`None`: no leaderboard there).
pub(super) fn open_for_read<'a>(
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

/// The board at `name` and `member`'s window total, for the reads about one member
/// (`None`: no leaderboard there, or no total for `member`).
pub(super) fn open_member(
    ctx: &Context,
    name: &RedisString,
    member: &[u8],
) -> Result<Option<(Board, i64)>> {
    let (_, _, board) = open_for_read(ctx, name, command_now_ms())?;
    Ok(board.and_then(|board| {
        let total = board.total_of(member);
        (total > 0).then_some((board, total))
    }))
}

pub const SCORE: Command = command! {
    c"tsrank.score" => score, 3, c"readonly", &[first_key(READ)], c"read", &SCORE_DOC
};

const SCORE_DOC: Doc = Doc {
    summary: c"Get a member's total over a leaderboard's window",
    complexity:
        c"O(1), plus O(P) for the P slots that left the window and are still being subtracted",
    args: &[KEY, string(c"member")],
};

/// TSRANK.SCORE key member
pub fn score(ctx: &Context, name: &RedisString, rest: &[&[u8]]) -> Result<Reply> {
    let [member] = rest else {
        return Err(Error::Arity("tsrank.score".into()));
    };
    let (_, _, board) = open_for_read(ctx, name, command_now_ms())?;
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

/// TSRANK.RANK key member (with TIES: `standings::rank`)
pub fn rank(ctx: &Context, name: &RedisString, rest: &[&[u8]]) -> Result<Reply> {
    let [member] = rest else {
        return Err(Error::Arity("tsrank.rank".into()));
    };
    let Some((mut board, total)) = open_member(ctx, name, member)? else {
        return Ok(Reply::Nil);
    };
    if let Some(totals) = &board.view {
        return Ok(Reply::Int(totals.rank(total, member) as i64));
    }
    if board.pending.is_empty() {
        if let Some(rank) = board.with_next(|next| next.rank(member)) {
            return Ok(rank.map_or(Reply::Nil, |rank| Reply::Int(rank as i64)));
        }
        // Exact sorted set: ZREVRANK is O(log n).
        let args: [&[u8]; 2] = [name.as_slice(), member];
        if let Ok(RedisValue::Integer(rank)) = ctx.call("ZREVRANK", &args[..]) {
            return Ok(Reply::Int(rank));
        }
    }
    // Slots that left the window are still being subtracted: with few pending members,
    // the raw position corrected for them alone (`standings`), else the raw order corrected
    // member by member.
    if let Some(rank) = board.pending_rank(ctx, name, (total, member)) {
        return Ok(Reply::Int(i64::try_from(rank).unwrap_or(i64::MAX)));
    }
    let pending = std::mem::take(&mut board.pending);
    let adjust = |m: &[u8], raw: i64| match RStr::new(m) {
        Some(m) => raw.saturating_sub(pending_in(&pending, &m)),
        None => raw,
    };
    Ok(Reply::Int(rank_adjusted(
        board.raw_walk(),
        (total, member),
        adjust,
    )))
}

pub const INFO: Command = command! {
    c"tsrank.info" => info, 2, c"readonly", &[first_key(READ)], c"read", &INFO_DOC
};

const INFO_DOC: Doc = Doc {
    summary: c"Show a leaderboard's window, slot, members and live slots",
    complexity: c"O(S) where S is the number of slots in the window, plus O(C) in the counts of slots that left the window and are still being subtracted",
    args: &[KEY],
};

/// TSRANK.INFO key
pub fn info(ctx: &Context, name: &RedisString, rest: &[&[u8]]) -> Result<Reply> {
    if !rest.is_empty() {
        return Err(Error::Arity("tsrank.info".into()));
    }
    let now = command_now_ms();
    let (acl, transit, board) = open_for_read(ctx, name, now)?;
    let Some(board) = board else {
        // No main key and no meta here: during a reshard the meta hash of a board without
        // totals may still be on the other node.
        transit.missing()?;
        return Ok(Reply::Nil);
    };
    let meta = board.meta;
    let mut members = match (&board.view, board.with_next(|next| next.len())) {
        (Some(totals), _) => totals.len() as i64,
        (None, Some(len)) => len as i64,
        (None, None) => board.zset.len() as i64,
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
            let raw = board.raw_total(member);
            if raw > 0 && board.corrected(member, raw) <= 0 {
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
    // A board with CAPACITY: the sum of its live slots' errors (see
    // `crate::rank::model::capacity`), from their meta fields.
    let mut errors = Vec::new();
    if let (true, Some((start, end))) = (meta.is_bounded(), meta.live_range(now)) {
        let meta_hash = acl.open(ctx, &meta_key(&board.base), false)?;
        for index in start..=end {
            errors.push(super::meta_hash::read_error(&meta_hash, index));
        }
    }
    Ok(Reply::Map(vec![
        ("window", Reply::Int(meta.window)),
        ("slot", Reply::Int(meta.slot)),
        ("members", Reply::Int(members)),
        ("slots", Reply::Int(live)),
        ("oldest", oldest.map_or(Reply::Nil, Reply::Int)),
        ("capacity", Reply::Int(meta.capacity)),
        ("error", Reply::Int(window_error(errors))),
    ]))
}
