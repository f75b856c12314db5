//! Native string keys that hold one small value in place (a throttle's TAT): opened
//! without tracking (tally keeps nothing in memory for them, so their keyspace events need
//! not reach the families), read and rewritten through the string's own buffer (no module
//! string made per call), and given an absolute expiry.
//!
//! Owns: raw calls on string keys. May not touch: command logic, replication.

use std::os::raw::c_int;
use std::ptr;

use redis_module::{raw, Context, RedisString};

use super::Key;
use crate::host::server::api;

/// What a key holds, for a value kept as a native string.
pub enum StringValue<'a> {
    Missing,
    String(&'a [u8]),
    /// A key of another type.
    Other,
}

impl Key {
    /// Opens a command's key that tally keeps no state for, for reading (and writing).
    pub fn open_untracked(ctx: &Context, name: &RedisString, write: bool) -> Key {
        let mode = if write {
            raw::REDISMODULE_READ | raw::REDISMODULE_WRITE
        } else {
            raw::REDISMODULE_READ
        };
        // SAFETY: live context and a command's key argument; OpenKey returns NULL or a
        // key handle we own and close on drop.
        let ptr = unsafe { api!(RedisModule_OpenKey)(ctx.ctx, name.inner, mode as c_int) };
        Key {
            ptr: ptr.cast::<raw::RedisModuleKey>(),
        }
    }

    /// The key's value if it is a string, borrowed while the handle is open.
    pub fn string_value(&self) -> StringValue<'_> {
        if self.ptr.is_null() {
            return StringValue::Missing;
        }
        // SAFETY: `self.ptr` is an open key handle.
        let kind = unsafe { api!(RedisModule_KeyType)(self.ptr) } as isize;
        match kind {
            raw::REDISMODULE_KEYTYPE_EMPTY => return StringValue::Missing,
            raw::REDISMODULE_KEYTYPE_STRING => {}
            _ => return StringValue::Other,
        }
        let mut len = 0usize;
        // SAFETY: an open string key; the buffer is the value's own, valid until the key
        // is written or closed (the borrow of `self` keeps it open, and nothing writes
        // through a `&self`). A read of an encoded value (a number stored as an integer)
        // makes it a plain string once, with the same bytes.
        let data = unsafe {
            api!(RedisModule_StringDMA)(self.ptr, &mut len, raw::REDISMODULE_READ as c_int)
        };
        if data.is_null() {
            return StringValue::Other;
        }
        // SAFETY: as above: `len` readable bytes at `data`.
        StringValue::String(unsafe { std::slice::from_raw_parts(data.cast::<u8>(), len) })
    }

    /// Writes `value` as the key's string (creating it), in place when the old value has
    /// the same length. False if the server refused (the key is of another type).
    pub fn set_string(&self, value: &[u8]) -> bool {
        if self.ptr.is_null() {
            return false;
        }
        // SAFETY: a key opened for writing; Truncate creates an empty key as a string of
        // that length and refuses other types.
        if unsafe { api!(RedisModule_StringTruncate)(self.ptr, value.len()) }
            != raw::REDISMODULE_OK as c_int
        {
            return false;
        }
        let mut len = 0usize;
        // SAFETY: an open string key, asked for its buffer to write.
        let data = unsafe {
            api!(RedisModule_StringDMA)(
                self.ptr,
                &mut len,
                (raw::REDISMODULE_READ | raw::REDISMODULE_WRITE) as c_int,
            )
        };
        if data.is_null() || len != value.len() {
            return false;
        }
        // SAFETY: the server's buffer of `len` writable bytes, `value` as long, distinct.
        unsafe { ptr::copy_nonoverlapping(value.as_ptr(), data.cast::<u8>(), len) };
        true
    }

    /// Sets the key to expire at `unix_ms`.
    pub fn expire_at(&self, unix_ms: i64) {
        if self.ptr.is_null() {
            return;
        }
        // SAFETY: a key opened for writing that exists.
        unsafe { api!(RedisModule_SetAbsExpire)(self.ptr, unix_ms) };
    }
}
