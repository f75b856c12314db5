//! Whether a hash has fields with TTLs of their own (hash-field expiry: Redis 7.4+,
//! Valkey 9): what the read caches ask before keeping a copy of a hash, and what a
//! leaderboard asks before trusting its meta.
//!
//! Why the caches ask: a field whose time has passed counts in the hash's length (and
//! stays in scans) until the server reclaims it, and no event fires at the moment it
//! expires. A cache that trusts the length would keep counting it; a hash with field TTLs
//! is therefore never cached, and every read of it goes to the hash, whose field reads
//! treat an expired field as absent.
//!
//! Owns: that question. May not touch: command logic.

use std::cell::Cell;
use std::ffi::{CStr, CString};
use std::ptr;

use redis_module::{CallOptionsBuilder, CallReply, CallResult, Context};

use crate::layout::MARKER_FIELD;

use super::Key;
use crate::host::server::api;

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

/// True if the server has field TTLs at all, asked once with one `HPTTL` of one field of
/// `name` (Redis 7.0 answers that the command is unknown).
fn server_has_field_ttls(ctx: &Context, name: &[u8]) -> bool {
    if let Some(known) = SERVER_HAS_FIELD_TTLS.with(Cell::get) {
        return known;
    }
    let known = any_ttl(ctx, name, &[MARKER_FIELD.as_bytes()]).is_some();
    SERVER_HAS_FIELD_TTLS.with(|h| h.set(Some(known)));
    known
}

/// Whether the selected database holds any key with a field TTL, from the server's own
/// count in `INFO keyspace` (`keys_with_volatile_items` on Valkey 9, `subexpiry` on Redis
/// 7.4+), read through the module API, so no command runs and nothing shows in the user's
/// `INFO commandstats`; `None` where the server does not say. A key whose fields' time has
/// passed but that the server has not reclaimed yet still counts, so `Some(false)` means
/// no field anywhere in the database has a TTL: no `HPTTL` needs to name any field.
///
/// Why: Valkey 9 has no module call answering for a whole hash at once, and `HPTTL` of
/// every field costs about 1 µs a field, so without this a large hash could never be
/// cached there (a `STATS.GET` of a 2000-period window merged every period on every call).
fn db_has_field_ttls(ctx: &Context) -> Option<bool> {
    let db = crate::host::server::selected_db(ctx);
    let field = CString::new(format!("db{db}")).ok()?;
    // NULL context: the data is not tied to the command's automatic memory (the commands
    // do not enable it, so anything made through it would outlive the call); it is freed
    // below. `ServerInfoGetFieldC` makes no string: it points into the data.
    // SAFETY: the section is a NUL-terminated literal; the server returns fresh data or
    // NULL.
    let data = unsafe { api!(RedisModule_GetServerInfo)(ptr::null_mut(), c"keyspace".as_ptr()) };
    if data.is_null() {
        return None;
    }
    // SAFETY: `data` is live until freed below; `field` is NUL-terminated. The value (or
    // NULL) points into `data` and is copied before the free.
    let line = unsafe {
        let value = api!(RedisModule_ServerInfoGetFieldC)(data, field.as_ptr());
        (!value.is_null()).then(|| CStr::from_ptr(value).to_bytes().to_vec())
    };
    // SAFETY: `data` came from `GetServerInfo` with a NULL context and is freed once.
    unsafe { api!(RedisModule_FreeServerInfo)(ptr::null_mut(), data) };
    let line = String::from_utf8(line?).ok()?;
    line.split(',').find_map(|kv| {
        let (name, count) = kv.split_once('=')?;
        matches!(name, "keys_with_volatile_items" | "subexpiry")
            .then(|| count.trim().parse::<u64>().ok().map(|n| n > 0))
            .flatten()
    })
}

impl Key {
    /// True if one of `fields` of this hash (`name`) has a TTL, or that cannot be ruled
    /// out. Where the server offers `HashFieldMinExpire` (Redis 8) the key itself answers
    /// for all its fields at once, in O(1) and without a command run through
    /// `RedisModule_Call` (which shows in the user's `INFO commandstats` and `SLOWLOG`);
    /// Valkey 9 has field TTLs but no such call: there the database's count of keys with
    /// field TTLs answers when it is 0, else `HPTTL` runs.
    pub fn fields_have_ttls(&self, ctx: &Context, name: &[u8], fields: &[&[u8]]) -> bool {
        if self.ptr.is_null() {
            return false;
        }
        if let Some(any) = self.any_field_expires() {
            return any;
        }
        server_has_field_ttls(ctx, name)
            && db_has_field_ttls(ctx) != Some(false)
            && any_ttl(ctx, name, fields).unwrap_or(false)
    }

    /// True if some field of this hash has a TTL (or that cannot be ruled out), as
    /// [`Key::fields_have_ttls`] of every field; without `HashFieldMinExpire`, in a
    /// database where some key has field TTLs, a hash of more than `max_fields_asked`
    /// fields is taken as having some: the caller bounds what one question may cost.
    pub fn has_field_ttls(&self, ctx: &Context, name: &[u8], max_fields_asked: usize) -> bool {
        if self.ptr.is_null() {
            return false;
        }
        if let Some(any) = self.any_field_expires() {
            return any;
        }
        if !server_has_field_ttls(ctx, name) {
            return false;
        }
        if db_has_field_ttls(ctx) == Some(false) {
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
