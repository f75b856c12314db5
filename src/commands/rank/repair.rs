//! Rebuilding a small quarantined leaderboard before a write: its totals become the sums
//! of its live slot hashes (the recount at once, `slots::live_totals`, as a read of a
//! small quarantined board sums them) and the slots that left the window go.
//!
//! Owns: that rebuild. May not touch: the meta hash (the caller saves the new range via
//! `meta`; `meta::mark_edited` clears `_edited`); replicates only through [`Effects`].

use redis_module::Context;

use crate::error::Result;
use crate::expiry;
use crate::host::replicate::Effects;
use crate::host::server::selected_db;
use crate::host::store::acl::Acl;
use crate::host::store::{Key, KeyKind, RStr};
use crate::rank::{meta_key, slot_key, Meta};

use super::meta::mark_edited;
use super::slots::live_totals;
use super::state;
use super::transit::Transit;

/// Members per replicated `ZADD` of a rebuild (a board may have millions).
const ZADD_CHUNK: usize = 256;

/// Rebuilds the quarantined board `base` (sorted set `zset`, meta `meta`, whose range
/// is updated here): the totals become the sums of the live slot hashes, slots that left
/// the window are deleted, and the board leaves quarantine. The caller holds write
/// permission on every key touched (checked here for the slots). Costs one pass over the
/// board's stored data, once.
pub(super) fn repair(
    ctx: &Context,
    acl: &Acl,
    zset: &Key,
    base: &[u8],
    meta: &mut Meta,
    now: i64,
    transit: &Transit,
) -> Result<()> {
    let totals = live_totals(ctx, acl, base, meta, meta.slots(), now, transit)?.abandon();
    let mut gone = Vec::new();
    if let Some((start, end)) = meta.pending_range(now) {
        for index in start..=end {
            let name = slot_key(base, index);
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
    let mut effects = Effects::new();
    effects.command(c"DEL").arg(base);
    let rows: Vec<(i64, &[u8])> = totals
        .rows()
        .filter_map(|(member, total)| {
            let m = RStr::new(member)?;
            zset.zadd(&m, total as f64);
            Some((total, member))
        })
        .collect();
    for chunk in rows.chunks(ZADD_CHUNK) {
        effects.command(c"ZADD").arg(base);
        for &(total, member) in chunk {
            effects.int(total).arg(member);
        }
    }
    for name in &gone {
        effects.command(c"DEL").arg(name);
    }
    effects.emit(ctx);
    let db = selected_db(ctx);
    state::with(|s| s.lift_quarantine(db, base));
    // The timer frees the totals it computed for the quarantined board, in steps.
    expiry::schedule(ctx, &meta_key(base), now);
    mark_edited(ctx, base, false);
    Ok(())
}
