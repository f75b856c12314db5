//! Whether a hash has fields with TTLs of their own (hash-field expiry: Redis 7.4+,
//! Valkey 9), and how close the server is to `maxmemory`: what the read caches ask before
//! keeping a copy of a hash.
//!
//! Why the caches ask: a field whose time has passed counts in the hash's length (and
//! stays in scans) until the server reclaims it, and no event fires at the moment it
//! expires. A cache that trusts the length would keep counting it; a hash with field TTLs
//! is therefore never cached, and every read of it goes to the hash, whose field reads
//! treat an expired field as absent.
//!
//! Owns: these two questions. May not touch: command logic.

use std::cell::Cell;

use redis_module::{raw, CallOptionsBuilder, CallReply, CallResult, Context};

use super::Key;

thread_local! {
    /// Whether the server has field TTLs at all: unknown until first asked (Redis 7.0 has
    /// none; one `HPTTL` of one field tells).
    static SERVER_HAS_FIELD_TTLS: Cell<Option<bool>> = const { Cell::new(None) };
}

/// `HPTTL name FIELDS n field...`: `Some(true)` if some field has a TTL (-1: none; -2: no
/// such field, reclaimed meanwhile), `None` if the server has no such command.
fn any_ttl(ctx: &Context, name: &[u8], fields: &[&[u8]]) -> Option<bool> {
    let count = fields.len().to_string();
    let mut args: Vec<&[u8]> = Vec::with_capacity(fields.len() + 3);
    args.extend([name, b"FIELDS".as_slice(), count.as_bytes()]);
    args.extend(fields);
    let options = CallOptionsBuilder::new().errors_as_replies().build();
    let reply: CallResult = ctx.call_ext("HPTTL", &options, &args[..]);
    match reply {
        Ok(CallReply::Array(ttls)) => {
            Some(!ttls.iter().all(
                |ttl| matches!(ttl, Ok(CallReply::I64(ttl)) if matches!(ttl.to_i64(), -1 | -2)),
            ))
        }
        Err(e)
            if e.to_utf8_string()
                .is_some_and(|m| m.to_ascii_lowercase().contains("unknown command")) =>
        {
            None
        }
        _ => Some(true),
    }
}

impl Key {
    /// True if some field of this hash has a TTL (or that cannot be ruled out). O(1) where
    /// the server offers `HashFieldMinExpire`; otherwise (Valkey 9) one `HPTTL` over every
    /// field, and a hash of more than `max_fields_asked` fields is taken as having some:
    /// the caller bounds what one question may cost.
    pub fn has_field_ttls(&self, ctx: &Context, name: &[u8], max_fields_asked: usize) -> bool {
        if self.ptr.is_null() {
            return false;
        }
        if let Some(any) = self.any_field_expires() {
            return any;
        }
        let supported = match SERVER_HAS_FIELD_TTLS.with(Cell::get) {
            Some(known) => known,
            None => {
                let known = any_ttl(ctx, name, &[b"_tally"]).is_some();
                SERVER_HAS_FIELD_TTLS.with(|h| h.set(Some(known)));
                known
            }
        };
        if !supported {
            return false;
        }
        if self.len() > max_fields_asked {
            return true;
        }
        let mut fields: Vec<Vec<u8>> = Vec::with_capacity(self.len());
        self.hscan(|field, _| fields.push(field.to_vec()));
        if fields.is_empty() {
            return false;
        }
        let fields: Vec<&[u8]> = fields.iter().map(Vec::as_slice).collect();
        any_ttl(ctx, name, &fields).unwrap_or(false)
    }
}

/// How full the server is against `maxmemory` (1.0: at the limit; 0 without a limit).
pub fn used_memory_ratio() -> f32 {
    // SAFETY: reads a function-pointer static the crate set during `RedisModule_Init`
    // (absent on servers without the function); nothing writes it afterwards.
    match unsafe { raw::RedisModule_GetUsedMemoryRatio } {
        // SAFETY: no arguments; reads the server's memory counters.
        Some(ratio) => unsafe { ratio() },
        None => 0.0,
    }
}
