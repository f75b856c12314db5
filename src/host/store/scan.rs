//! Scans: of the keyspace (the expiry schedule's start-up scan) and of one hash (whole, or
//! resumable across timer ticks). Cursors are destroyed on drop.

use std::ffi::c_void;

use redis_module::{raw, Context};

use super::{borrowed_bytes, Key};
use crate::host::server::api;

/// A server scan cursor, destroyed on drop.
struct Cursor(*mut raw::RedisModuleScanCursor);

impl Cursor {
    fn new() -> Cursor {
        // SAFETY: no arguments; returns a new cursor we own.
        Cursor(unsafe { api!(RedisModule_ScanCursorCreate)() })
    }
}

impl Drop for Cursor {
    fn drop(&mut self) {
        // SAFETY: we created the cursor and destroy it once.
        unsafe { api!(RedisModule_ScanCursorDestroy)(self.0) };
    }
}

/// A keyspace scan of the selected database that can pause between steps. As with
/// `SCAN`, every key present for the whole scan is returned at least once.
pub struct KeyspaceCursor(Cursor);

impl KeyspaceCursor {
    pub fn new() -> KeyspaceCursor {
        KeyspaceCursor(Cursor::new())
    }

    /// One scan step of the database selected in `ctx`: calls `found` with each key name.
    /// Returns false when the database is done.
    pub fn step(&mut self, ctx: &Context, mut found: impl FnMut(&[u8])) -> bool {
        extern "C" fn each(
            _ctx: *mut raw::RedisModuleCtx,
            name: *mut raw::RedisModuleString,
            _key: *mut raw::RedisModuleKey,
            data: *mut c_void,
        ) {
            // SAFETY: `data` is the `&mut dyn FnMut` passed below, alive for the scan
            // call; `name` is lent by the server for this callback.
            let found = unsafe { &mut *data.cast::<&mut dyn FnMut(&[u8])>() };
            // SAFETY: as above.
            let name = unsafe { borrowed_bytes(name) };
            found(name);
        }
        let mut found: &mut dyn FnMut(&[u8]) = &mut found;
        let data = (&mut found as *mut &mut dyn FnMut(&[u8])).cast::<c_void>();
        // SAFETY: live context and cursor; `each` only uses `data` during this call.
        unsafe { api!(RedisModule_Scan)(ctx.ctx, (self.0).0, Some(each), data) != 0 }
    }

    /// Starts over (for the next database).
    pub fn restart(&mut self) {
        // SAFETY: a live cursor we own.
        unsafe { api!(RedisModule_ScanCursorRestart)((self.0).0) };
    }
}

/// One `ScanKey` step over `key` with a callback getting each field and value.
fn scan_key_step(key: &Key, cursor: &Cursor, f: &mut dyn FnMut(&[u8], &[u8])) -> bool {
    if key.ptr.is_null() {
        return false;
    }
    extern "C" fn each(
        _key: *mut raw::RedisModuleKey,
        field: *mut raw::RedisModuleString,
        value: *mut raw::RedisModuleString,
        data: *mut c_void,
    ) {
        // SAFETY: `data` is the `&mut dyn FnMut` passed below, alive for the scan call;
        // field and value are lent by the server for this callback.
        let f = unsafe { &mut *data.cast::<&mut dyn FnMut(&[u8], &[u8])>() };
        // SAFETY: as above.
        let field = unsafe { borrowed_bytes(field) };
        // SAFETY: as above.
        let value = unsafe { borrowed_bytes(value) };
        f(field, value);
    }
    let mut f = f;
    let data = (&mut f as *mut &mut dyn FnMut(&[u8], &[u8])).cast::<c_void>();
    // SAFETY: open key and live cursor; `each` only uses `data` during this call.
    unsafe { api!(RedisModule_ScanKey)(key.ptr, cursor.0, Some(each), data) != 0 }
}

impl Key {
    /// Calls `f(field, value)` for every field of a hash. Do not modify the hash meanwhile.
    pub fn hscan(&self, mut f: impl FnMut(&[u8], &[u8])) {
        let cursor = Cursor::new();
        while scan_key_step(self, &cursor, &mut f) {}
    }
}

/// A hash scan that can pause between steps and resume later, even across timer ticks
/// (the cursor holds only a position, never a pointer into the hash). Fields may be
/// deleted between steps: as with `HSCAN`, every field present for the whole scan is
/// returned at least once.
pub struct HashCursor(Cursor);

impl HashCursor {
    pub fn new() -> HashCursor {
        HashCursor(Cursor::new())
    }

    /// One scan step over `key`: appends the `(field, value)` pairs it returned to `out`.
    /// Returns false when the scan is complete. The hash is not touched meanwhile; callers
    /// modify it between steps.
    pub fn step(&mut self, key: &Key, out: &mut Vec<(Vec<u8>, Vec<u8>)>) -> bool {
        scan_key_step(key, &self.0, &mut |field, value| {
            out.push((field.to_vec(), value.to_vec()))
        })
    }
}
