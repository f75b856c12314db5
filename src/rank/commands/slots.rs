//! A board's slot hashes, read: a member's count in one, the slots still being subtracted
//! and the counts of the live slots.
//!
//! Owns: reading slot hashes (values that are not positive integers, a user's edits,
//! count as nothing). May not touch: writes of any kind. Every slot hash is opened through
//! the caller's [`Acl`].

use redis_module::Context;

use crate::error::Result;
use crate::host::store::acl::Acl;
use crate::host::store::{Key, KeyKind, RStr};
use crate::rank::model::{slot_key, Meta, TotalsBuilder};

use super::transit::Transit;

/// `member`'s count in a slot hash: values that are not positive integers (a user's
/// edits) count as nothing.
pub(super) fn count_in(slot: &Key, member: &RStr) -> i64 {
    slot.hget_i64_str(member).flatten().unwrap_or(0).max(0)
}

/// `member`'s counts in the slots still being subtracted.
pub(super) fn pending_in(pending: &[Key], member: &RStr) -> i64 {
    pending
        .iter()
        .map(|slot| count_in(slot, member))
        .fold(0i64, i64::saturating_add)
}

/// A member's window total from its raw total (`(member, raw) -> total`): less its counts
/// in the slots still being subtracted (a member the server cannot name keeps its raw
/// total).
pub(super) fn corrector(pending: &[Key]) -> impl Fn(&[u8], i64) -> i64 + '_ {
    move |member, raw| match RStr::new(member) {
        Some(member) => raw.saturating_sub(pending_in(pending, &member)),
        None => raw,
    }
}

/// Opens the slot hashes of `base` that left the window but are not fully subtracted,
/// with their slot indexes (see [`open_range`]). A valid meta spans less than two windows
/// (`Meta::span_fits`), which bounds the walk.
pub(super) fn open_pending(
    ctx: &Context,
    acl: &Acl,
    base: &[u8],
    meta: &Meta,
    now: i64,
    transit: &Transit,
) -> Result<Vec<(i64, Key)>> {
    open_range(ctx, acl, base, (meta.pending_range(now), None), transit)
}

/// Opens the slot hashes of `base` in `range` (`first ..= last`; none without one) for
/// reading, through the caller's ACL, leaving out slot `except`, with their slot indexes.
/// One that is missing may be a gap (a slot never written) or, during a reshard, on the
/// other node: then the caller cannot answer here (TRYAGAIN).
pub(super) fn open_range(
    ctx: &Context,
    acl: &Acl,
    base: &[u8],
    (range, except): (Option<(i64, i64)>, Option<i64>),
    transit: &Transit,
) -> Result<Vec<(i64, Key)>> {
    let mut opened = Vec::new();
    let Some((first, last)) = range else {
        return Ok(opened);
    };
    for index in first..=last {
        if Some(index) == except {
            continue;
        }
        let key = acl.open(ctx, &slot_key(base, index), false)?;
        match key.kind() {
            KeyKind::Hash => opened.push((index, key)),
            KeyKind::Empty => transit.missing()?,
            _ => {}
        }
    }
    Ok(opened)
}

/// The recount of the latest `slots` slots at once: their slot hashes summed into totals
/// (values that are not positive integers, a user's edits, count as nothing), unordered
/// until finished. The timer's recount of a large board sums the same way, in steps
/// (`repair`).
pub(super) fn live_totals(
    ctx: &Context,
    acl: &Acl,
    base: &[u8],
    meta: &Meta,
    slots: i64,
    now: i64,
    transit: &Transit,
) -> Result<TotalsBuilder> {
    let mut totals = TotalsBuilder::new();
    let Some((first, last)) = meta.recent_range(now, slots) else {
        return Ok(totals);
    };
    for index in first..=last {
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
        key.hscan(|member, count| totals.add(member, count));
    }
    Ok(totals)
}
