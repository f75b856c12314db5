//! The reads games and apps build standings from: TSRANK.AROUND (a member and its
//! neighbours in TOP's order), TSRANK.RANK ... TIES (the competition rank: members with a
//! strictly higher total) and TSRANK.MSCORE (several members' totals at once). Exact on a
//! primary like every read, from whichever totals the board answers from: its sorted set
//! (positions and counts by the server's own rank operations, O(log N)), a quarantined
//! board's computed totals, its next totals, or, while slots that left the window are
//! still being subtracted, positions in the raw order corrected for the members of those
//! slots alone (`Board::pending_around`, `crate::rank::model::corrected_rank`); only when
//! those slots hold very many counts, the raw order corrected member by member as TOP
//! reads it.
//!
//! Owns: those three answers. May not touch: writes of any kind (every key is opened
//! read-only, the derived keys through the caller's ACL, by `read`'s opening).

use redis_module::{Context, ContextFlags, RedisString};

use crate::args::{parse_i64, set_once, Args};
use crate::cmddocs::{integer, pure_token, string, Doc, KEY};
use crate::error::{Error, Result};
use crate::host::cmdinfo::{command, first_key, Command, READ};
use crate::host::reply::Reply;
use crate::host::server::command_now_ms;
use crate::host::store::zset::{zcount_above, zrevrange, zrevrank};
use crate::rank::model::{
    above_adjusted, above_corrected, around_count, around_span, rank_adjusted, score_to_total,
    top_adjusted,
};

use super::board::Board;
use super::read::{open_for_read, open_member, TopShape};
use super::slots::corrector;

pub const AROUND: Command = command! {
    c"tsrank.around" => around, -4, c"readonly", &[first_key(READ)], c"read", &AROUND_DOC
};

const AROUND_DOC: Doc = Doc {
    summary: c"List a member and the members ranked just above and below it in a leaderboard",
    complexity: c"O(log(N) + M) where N is the number of members and M is count; O(N) while a slot that left the window is still being subtracted",
    args: &[
        KEY,
        string(c"member"),
        integer(c"count"),
        pure_token(c"withscores", c"WITHSCORES").optional(),
    ],
};

/// TSRANK.AROUND key member count [WITHSCORES]
pub fn around(ctx: &Context, name: &RedisString, rest: &[&[u8]]) -> Result<Reply> {
    let [member, count, options @ ..] = rest else {
        return Err(Error::Arity("tsrank.around".into()));
    };
    let count = around_count(parse_i64(count)?)?;
    let mut args = Args::new(options);
    let mut withscores = None;
    while !args.is_done() {
        match args.next_keyword()?.as_str() {
            "WITHSCORES" => set_once(&mut withscores, true)?,
            _ => return Err(Error::Syntax),
        }
    }
    let shape = TopShape {
        withscores: withscores.is_some(),
        resp3: ctx.get_flags().contains(ContextFlags::FLAGS_RESP3),
        count: count.saturating_mul(2).saturating_add(1),
    };
    let Some((mut board, total)) = open_member(ctx, name, member)? else {
        return Ok(Reply::Array(Vec::new()));
    };
    let rows = neighbours(ctx, name, &mut board, (total, member), count);
    Ok(shape.reply(rows.into_iter().map(|(m, t)| (Reply::Bulk(m), t))))
}

/// The rows of leaderboard order from `count` above `member` (whose window total is
/// `total`) to `count` below it.
fn neighbours(
    ctx: &Context,
    name: &RedisString,
    board: &mut Board,
    (total, member): (i64, &[u8]),
    count: usize,
) -> Vec<(Vec<u8>, i64)> {
    let owned = |rows: &mut dyn Iterator<Item = (&[u8], i64)>| {
        rows.map(|(m, t)| (m.to_vec(), t)).collect::<Vec<_>>()
    };
    if let Some(totals) = &board.view {
        let (offset, len) = around_span(totals.rank(total, member), count);
        return owned(&mut totals.top(offset, len));
    }
    if board.pending.is_empty() {
        let from_next = board.with_next(|next| {
            let rank = next.rank(member)?;
            let (offset, len) = around_span(rank, count);
            Some(owned(&mut next.top(offset, len)))
        });
        if let Some(rows) = from_next {
            return rows.unwrap_or_default();
        }
        // The sorted set is exact: ZREVRANK, then ZREVRANGE of the span, O(log N + count).
        if let Some(rank) = zrevrank(ctx, name.as_slice(), member) {
            let (offset, len) = around_span(rank, count);
            let last = offset.saturating_add(len).saturating_sub(1);
            let rows = zrevrange(ctx, name.as_slice(), offset, last).into_iter();
            let rows = rows.map(|(m, score)| (m, score_to_total(score)));
            return rows.take_while(|(_, t)| *t > 0).collect();
        }
    }
    // Slots that left the window are still being subtracted. With few pending members,
    // positions in the raw order corrected for those members alone; with many (their next
    // totals not ready yet), the raw order corrected member by member, as TOP reads it.
    if let Some(rows) = board.pending_around(ctx, name, (total, member), count) {
        return rows;
    }
    let pending = std::mem::take(&mut board.pending);
    let adjust = corrector(&pending);
    let rank = rank_adjusted(board.raw_walk(), (total, member), &adjust);
    let (offset, len) = around_span(usize::try_from(rank).unwrap_or(0), count);
    let rows = top_adjusted(board.raw_walk(), offset.saturating_add(len), adjust);
    rows.into_iter().skip(offset).collect()
}

pub const RANK: Command = command! {
    c"tsrank.rank" => rank, -3, c"readonly", &[first_key(READ)], c"read", &RANK_DOC
};

const RANK_DOC: Doc = Doc {
    summary: c"Get a member's rank in a leaderboard, 0 for the highest total; with TIES, how many members have a higher total",
    complexity: c"O(log(N)) where N is the number of members; O(N) while a slot that left the window is still being subtracted",
    args: &[
        KEY,
        string(c"member"),
        pure_token(c"ties", c"TIES").optional(),
    ],
};

/// TSRANK.RANK key member [TIES]: without TIES, the position in TOP's order (`read`).
pub fn rank(ctx: &Context, name: &RedisString, rest: &[&[u8]]) -> Result<Reply> {
    match rest {
        [_] => super::read::rank(ctx, name, rest),
        [member, ties] if ties.eq_ignore_ascii_case(b"TIES") => tie_rank(ctx, name, member),
        [_, _] => Err(Error::Syntax),
        _ => Err(Error::Arity("tsrank.rank".into())),
    }
}

/// TSRANK.RANK key member TIES: how many members have a strictly higher window total, or
/// nil when `member` has none.
fn tie_rank(ctx: &Context, name: &RedisString, member: &[u8]) -> Result<Reply> {
    let Some((mut board, total)) = open_member(ctx, name, member)? else {
        return Ok(Reply::Nil);
    };
    let above = if let Some(totals) = &board.view {
        totals.above(total)
    } else if let Some(above) = board
        .pending
        .is_empty()
        .then(|| board.with_next(|next| next.above(total)))
        .flatten()
    {
        above
    } else if board.pending.is_empty() {
        // The sorted set is exact: ZCOUNT, O(log N).
        zcount_above(ctx, name.as_slice(), total)
    } else if let Some(pending) = board.pending_members() {
        // Slots that left the window are still being subtracted, and hold few members:
        // every other member's raw total is exact, so count the raw totals above (ZCOUNT,
        // or the next totals) and correct the pending members alone.
        let raw_above = board
            .with_next(|next| next.above(total))
            .unwrap_or_else(|| zcount_above(ctx, name.as_slice(), total));
        above_corrected(raw_above, pending.totals(), total)
    } else {
        // Large pending slots (their next totals not ready yet): the raw order corrected
        // member by member, as RANK reads it.
        let pending = std::mem::take(&mut board.pending);
        above_adjusted(board.raw_walk(), total, corrector(&pending))
    };
    Ok(Reply::Int(i64::try_from(above).unwrap_or(i64::MAX)))
}

pub const MSCORE: Command = command! {
    c"tsrank.mscore" => mscore, -3, c"readonly", &[first_key(READ)], c"read", &MSCORE_DOC
};

const MSCORE_DOC: Doc = Doc {
    summary: c"Get several members' totals over a leaderboard's window",
    complexity: c"O(M) where M is the number of members asked, plus O(M * P) for the P slots that left the window and are still being subtracted",
    args: &[KEY, string(c"member").multiple()],
};

/// TSRANK.MSCORE key member [member ...]: each member's window total, or nil, in order.
pub fn mscore(ctx: &Context, name: &RedisString, rest: &[&[u8]]) -> Result<Reply> {
    if rest.is_empty() {
        return Err(Error::Arity("tsrank.mscore".into()));
    }
    let (_, _, board) = open_for_read(ctx, name, command_now_ms())?;
    let totals = rest.iter().map(|member| match &board {
        Some(board) => match board.total_of(member) {
            total @ 1.. => Reply::Int(total),
            _ => Reply::Nil,
        },
        None => Reply::Nil,
    });
    Ok(Reply::Array(totals.collect()))
}
