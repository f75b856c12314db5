//! Leaderboards in a cluster: a board's name must keep its derived keys in its slot, and
//! is that slot moving between nodes right now? Owns only the questions; the leaderboard
//! code that asks decides what to do (an error, TRYAGAIN, wait).

use std::cell::Cell;

use redis_module::{Context, ContextFlags, RedisValue};

use crate::error::{Error, Result};
use crate::rank::model::has_hash_tag;

/// In cluster mode the derived keys must hash like `key`: only a hash tag guarantees it.
pub(super) fn check_cluster(flags: &ContextFlags, name: &[u8]) -> Result<()> {
    if flags.contains(ContextFlags::CLUSTER) && !has_hash_tag(name) {
        return Err(Error::Invalid(
            "in cluster mode a leaderboard key must contain a hash tag, e.g. '{board}', so that its derived keys share its slot".into(),
        ));
    }
    Ok(())
}

/// True if `key`'s cluster slot is being resharded to or from this node (MIGRATING or
/// IMPORTING). MIGRATE moves keys one batch at a time, so for a while a leaderboard's keys
/// sit on two nodes: the source must not delete the derived keys when the main key leaves
/// (they travel too), and neither node may create or count on a derived key that may be
/// on the other one.
///
/// The module API has no per-slot state, so this reads the `myself` line of
/// `CLUSTER NODES` (`[slot->-node]` migrating, `[slot-<-node]` importing). That costs a
/// few microseconds: callers ask only when a key they need is missing ([`Transit`]).
pub(super) fn slot_in_transit(ctx: &Context, key: &[u8]) -> bool {
    if !ctx.get_flags().contains(ContextFlags::CLUSTER) {
        return false;
    }
    let args: [&[u8]; 2] = [b"KEYSLOT", key];
    let Ok(RedisValue::Integer(slot)) = ctx.call("CLUSTER", &args[..]) else {
        return false;
    };
    let nodes: Vec<u8> = match ctx.call("CLUSTER", &["NODES"][..]) {
        Ok(RedisValue::BulkString(s)) | Ok(RedisValue::SimpleString(s)) => s.into_bytes(),
        Ok(RedisValue::StringBuffer(b)) => b,
        Ok(RedisValue::BulkRedisString(s)) => s.as_slice().to_vec(),
        Ok(RedisValue::VerbatimString((_, b))) => b,
        _ => return false,
    };
    let migrating = format!("[{slot}->-");
    let importing = format!("[{slot}-<-");
    nodes
        .split(|&b| b == b'\n')
        .filter(|line| line.windows(6).any(|w| w == b"myself"))
        .any(|line| {
            line.windows(migrating.len())
                .any(|w| w == migrating.as_bytes() || w == importing.as_bytes())
        })
}

/// Per command: is the board's slot being resharded? Asked at most once, and only when a
/// key the command needs (or would create) is missing, so the common case pays nothing.
///
/// While the slot moves, a derived key missing here may be on the other node: reading
/// without it would give a wrong answer, and creating it would make the later MIGRATE of
/// the other copy fail with BUSYKEY and abort the reshard. Such commands answer TRYAGAIN
/// (Redis's own error for multi-key requests during resharding, which cluster clients
/// retry) and write nothing.
pub(super) struct Transit<'a> {
    ctx: &'a Context,
    key: &'a [u8],
    cluster: bool,
    known: Cell<Option<bool>>,
}

impl<'a> Transit<'a> {
    pub(super) fn new(ctx: &'a Context, flags: &ContextFlags, key: &'a [u8]) -> Self {
        Transit {
            ctx,
            key,
            cluster: flags.contains(ContextFlags::CLUSTER),
            known: Cell::new(None),
        }
    }

    pub(super) fn active(&self) -> bool {
        if !self.cluster {
            return false;
        }
        if let Some(known) = self.known.get() {
            return known;
        }
        let active = slot_in_transit(self.ctx, self.key);
        self.known.set(Some(active));
        active
    }

    /// A key of the board is missing (or would be created): TRYAGAIN while the slot moves.
    pub(super) fn missing(&self) -> Result<()> {
        if self.active() {
            return Err(Error::TryAgain(
                "this leaderboard is being moved between cluster nodes (resharding)".into(),
            ));
        }
        Ok(())
    }
}
