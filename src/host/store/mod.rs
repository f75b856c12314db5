//! The only code that opens keys. A thin, panic-free layer over the module key API
//! (several times faster than `ctx.call`): RAII handles that close keys and free
//! strings, and binary-safe hash and sorted-set operations.
//!
//! Owns: every raw call on keys, module strings, scans and ACL checks. May not touch:
//! command logic, replication (writes made here are not propagated by Redis: callers
//! record them as `crate::host::replicate::Effects` so replicas and the AOF get deterministic
//! commands).
//!
//! Every function tolerates a missing key (it then does nothing and reports "absent").

pub mod acl;
pub mod field_ttl;
pub mod scan;
pub mod string;
pub mod zset;

use std::ffi::c_void;
use std::os::raw::{c_char, c_int};
use std::ptr;

use redis_module::raw;
use std::ffi::CStr;

use redis_module::{Context, NotifyEvent, RedisString};

use crate::host::server::api;
pub use crate::host::server::borrowed_bytes;

/// An owned `RedisModuleString`, freed on drop.
pub struct RStr(*mut raw::RedisModuleString);

impl RStr {
    /// [`RStr::new`], with the error a command answers when the server makes no string.
    pub fn try_new(bytes: &[u8]) -> crate::error::Result<RStr> {
        RStr::new(bytes).ok_or(crate::error::Error::Internal("the server made no string"))
    }

    pub fn new(bytes: &[u8]) -> Option<RStr> {
        // SAFETY: the pointer and length describe `bytes`, which the server copies; a
        // NULL context makes a string we own and free on drop.
        let inner = unsafe {
            api!(RedisModule_CreateString)(
                ptr::null_mut(),
                bytes.as_ptr().cast::<c_char>(),
                bytes.len(),
            )
        };
        (!inner.is_null()).then(|| RStr(inner))
    }

    pub fn from_i64(value: i64) -> Option<RStr> {
        // SAFETY: a NULL context makes a string we own and free on drop.
        let inner = unsafe { api!(RedisModule_CreateStringFromLongLong)(ptr::null_mut(), value) };
        (!inner.is_null()).then(|| RStr(inner))
    }

    /// Takes ownership of a string the server handed over.
    ///
    /// # Safety
    /// `inner` is NULL or a module string the caller owns and hands over (nothing else
    /// frees it).
    unsafe fn owned(inner: *mut raw::RedisModuleString) -> Option<RStr> {
        (!inner.is_null()).then(|| RStr(inner))
    }

    pub fn as_ptr(&self) -> *mut raw::RedisModuleString {
        self.0
    }

    /// The same string, shared (one more reference, each freed on its own drop).
    pub fn share(&self) -> RStr {
        // SAFETY: a live string we own; a NULL context retains it outside any auto memory.
        unsafe { api!(RedisModule_RetainString)(ptr::null_mut(), self.0) };
        RStr(self.0)
    }

    /// The string's bytes, valid while it lives.
    pub fn as_bytes(&self) -> &[u8] {
        // SAFETY: `self` owns the string for at least the returned borrow.
        unsafe { borrowed_bytes(self.0) }
    }
}

impl std::fmt::Debug for RStr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RStr({:?})", String::from_utf8_lossy(self.as_bytes()))
    }
}

impl PartialEq for RStr {
    fn eq(&self, other: &RStr) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Drop for RStr {
    fn drop(&mut self) {
        // SAFETY: we own the string (created with a NULL context) and free it once.
        unsafe { api!(RedisModule_FreeString)(ptr::null_mut(), self.0) };
    }
}

/// Fires the keyspace event `event` of class `class` on the key `name` (clients see it when
/// `notify-keyspace-events` includes the class; modules always do).
pub fn notify(ctx: &Context, class: NotifyEvent, event: &CStr, name: &RedisString) {
    crate::host::events::raise_own_event(event, || {
        // SAFETY: live context, NUL-terminated event name, a live key name string.
        unsafe {
            api!(RedisModule_NotifyKeyspaceEvent)(ctx.ctx, class.bits(), event.as_ptr(), name.inner)
        }
    });
}

/// [`notify`] for a key named by bytes (a derived or declared key other than the first).
pub fn notify_bytes(ctx: &Context, class: NotifyEvent, event: &CStr, name: &[u8]) {
    if let Some(name) = RStr::new(name) {
        crate::host::events::raise_own_event(event, || {
            // SAFETY: as above.
            unsafe {
                api!(RedisModule_NotifyKeyspaceEvent)(
                    ctx.ctx,
                    class.bits(),
                    event.as_ptr(),
                    name.as_ptr(),
                )
            }
        });
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyKind {
    Empty,
    Hash,
    Zset,
    Other,
}

/// Fields set per `RedisModule_HashSet` call by [`Key::hset_many`].
pub const HSET_BATCH: usize = 8;

/// Length of the probe field of [`Key::use_hashtable_encoding`]: above any sensible
/// `hash-max-listpack-value` (default 64).
const ENCODING_PROBE_LEN: usize = 1024;

/// Calls `RedisModule_HashSet` or `RedisModule_HashGet` with up to [`HSET_BATCH`] pairs
/// (`args`: field, value or out pointer, ...): a NULL field ends the list (the last
/// argument passed is always NULL).
///
/// # Safety
/// `key` is an open key; up to the first NULL field, each pair is what `function` takes.
unsafe fn call_with_pairs(
    function: unsafe extern "C" fn(*mut raw::RedisModuleKey, c_int, ...) -> c_int,
    key: *mut raw::RedisModuleKey,
    args: [*mut c_void; 2 * HSET_BATCH],
) -> c_int {
    let [a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15] = args;
    let flags = raw::REDISMODULE_HASH_NONE as c_int;
    let end = ptr::null_mut::<c_void>();
    // SAFETY: the caller's contract.
    unsafe {
        function(
            key, flags, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, end,
        )
    }
}

/// An open key, closed on drop.
pub struct Key {
    ptr: *mut raw::RedisModuleKey,
}

impl Key {
    /// Opens `name` for reading, or reading and writing.
    pub fn open(ctx: &Context, name: &RedisString, write: bool) -> Key {
        // SAFETY: live context; a command's key argument.
        unsafe { Key::open_raw(ctx.ctx, name.inner, write) }
    }

    /// Opens a key named by bytes (derived keys, keys found by the scheduler).
    pub fn open_bytes(ctx: &Context, name: &[u8], write: bool) -> Option<Key> {
        let name = RStr::new(name)?;
        // SAFETY: live context; a string we own.
        Some(unsafe { Key::open_raw(ctx.ctx, name.as_ptr(), write) })
    }

    /// Opens a key for reading without touching its LRU/LFU (background visits and scans
    /// must not make idle keys look used to eviction).
    pub fn open_bytes_untouched(ctx: &Context, name: &[u8]) -> Option<Key> {
        let name = RStr::new(name)?;
        let mode = raw::REDISMODULE_READ | raw::REDISMODULE_OPEN_KEY_NOTOUCH;
        // SAFETY: live context; a string we own.
        Some(unsafe { Key::open_mode(ctx.ctx, name.as_ptr(), mode as c_int) })
    }

    /// Opens a key whose name is already a module string (derived names are built once
    /// and serve both the ACL check and the open).
    pub fn open_str(ctx: &Context, name: &RStr, write: bool) -> Key {
        // SAFETY: live context; a string we own.
        unsafe { Key::open_raw(ctx.ctx, name.as_ptr(), write) }
    }

    /// # Safety
    /// `ctx` is a live context and `name` a live module string.
    unsafe fn open_raw(
        ctx: *mut raw::RedisModuleCtx,
        name: *mut raw::RedisModuleString,
        write: bool,
    ) -> Key {
        let mode = if write {
            raw::REDISMODULE_READ | raw::REDISMODULE_WRITE
        } else {
            raw::REDISMODULE_READ
        };
        // SAFETY: the caller's contract.
        unsafe { Key::open_mode(ctx, name, mode as c_int) }
    }

    /// # Safety
    /// `ctx` is a live context and `name` a live module string.
    unsafe fn open_mode(
        ctx: *mut raw::RedisModuleCtx,
        name: *mut raw::RedisModuleString,
        mode: c_int,
    ) -> Key {
        // SAFETY: `ctx` and `name` are live for the call (our contract); OpenKey returns
        // NULL or a key handle we own and close on drop.
        let ptr = unsafe { api!(RedisModule_OpenKey)(ctx, name, mode) };
        if !ptr.is_null() {
            // After the open, which may have expired the key (its event untracked it):
            // from now on its keyspace events reach the families.
            // SAFETY: as above.
            let db = unsafe { api!(RedisModule_GetSelectedDb)(ctx) };
            // SAFETY: `name` is live for the call.
            crate::host::events::track(db, unsafe { borrowed_bytes(name) });
        }
        Key {
            ptr: ptr.cast::<raw::RedisModuleKey>(),
        }
    }

    /// True if the key exists and has a TTL.
    pub fn has_ttl(&self) -> bool {
        if self.ptr.is_null() {
            return false;
        }
        // SAFETY: `self.ptr` is an open key handle.
        let ttl = unsafe { api!(RedisModule_GetExpire)(self.ptr) };
        ttl != raw::REDISMODULE_NO_EXPIRE as i64
    }

    /// Whether any field of the hash has a TTL of its own (hash field expiry), where the
    /// server answers that without running a command (`RedisModule_HashFieldMinExpire`,
    /// Redis 8.0+): `Some(true)` if one has; `None` where the server lacks the call (Redis
    /// 7.0 has no field TTLs; Valkey 9 has them but no module call for them).
    pub fn any_field_expires(&self) -> Option<bool> {
        // SAFETY: reads a function-pointer static the crate set during `RedisModule_Init`
        // (absent on servers without the function); nothing writes it afterwards.
        let min_expire = unsafe { raw::RedisModule_HashFieldMinExpire }?;
        if self.ptr.is_null() {
            return Some(false);
        }
        // SAFETY: `self.ptr` is an open key handle; the call answers "no expiry" for a key
        // that is not a hash.
        let earliest = unsafe { min_expire(self.ptr) };
        Some(earliest != raw::REDISMODULE_NO_EXPIRE as i64)
    }

    pub fn kind(&self) -> KeyKind {
        if self.ptr.is_null() {
            return KeyKind::Empty;
        }
        // SAFETY: `self.ptr` is an open key handle.
        match unsafe { api!(RedisModule_KeyType)(self.ptr) } as isize {
            raw::REDISMODULE_KEYTYPE_EMPTY => KeyKind::Empty,
            raw::REDISMODULE_KEYTYPE_HASH => KeyKind::Hash,
            raw::REDISMODULE_KEYTYPE_ZSET => KeyKind::Zset,
            _ => KeyKind::Other,
        }
    }

    /// Number of fields (hash) or members (zset); 0 for a missing key.
    pub fn len(&self) -> usize {
        if self.ptr.is_null() {
            return 0;
        }
        // SAFETY: `self.ptr` is an open key handle.
        unsafe { api!(RedisModule_ValueLength)(self.ptr) }
    }

    /// Calls `f` with the value of `field`, if present. The primitive of every hash read.
    fn hash_get_raw<T>(&self, field: &RStr, f: impl FnOnce(&RStr) -> T) -> Option<T> {
        if self.ptr.is_null() {
            return None;
        }
        let mut value: *mut raw::RedisModuleString = ptr::null_mut();
        // SAFETY: open key, live field string, one out pointer, NULL-terminated varargs.
        unsafe {
            api!(RedisModule_HashGet)(
                self.ptr,
                raw::REDISMODULE_HASH_NONE as c_int,
                field.as_ptr(),
                &mut value as *mut *mut raw::RedisModuleString,
                ptr::null_mut::<c_void>(),
            )
        };
        // SAFETY: HashGet hands us ownership (no automatic memory).
        let value = unsafe { RStr::owned(value) }?;
        Some(f(&value))
    }

    /// The values of several fields, up to [`HSET_BATCH`] per `RedisModule_HashGet` call:
    /// `f(i, value)` for the `i`-th field (`None`: missing).
    pub fn hget_many<'s>(
        &self,
        fields: impl IntoIterator<Item = &'s RStr>,
        mut f: impl FnMut(usize, Option<&RStr>),
    ) {
        let mut fields = fields.into_iter().peekable();
        let mut done = 0;
        while fields.peek().is_some() {
            let mut names = [ptr::null_mut::<raw::RedisModuleString>(); HSET_BATCH];
            let mut values = [ptr::null_mut::<raw::RedisModuleString>(); HSET_BATCH];
            let mut n = 0;
            for (name, field) in names.iter_mut().zip(fields.by_ref()) {
                *name = field.as_ptr();
                n += 1;
            }
            if !self.ptr.is_null() {
                // Each field is followed by a pointer to its own out slot.
                let mut args = [ptr::null_mut::<c_void>(); 2 * HSET_BATCH];
                for ((pair, &name), value) in args.chunks_exact_mut(2).zip(&names).zip(&mut values)
                {
                    if let [f, v] = pair {
                        *f = name.cast();
                        *v = ptr::from_mut(value).cast();
                    }
                }
                // SAFETY: open key, live field strings up to the first NULL one, each with
                // a live out slot.
                unsafe { call_with_pairs(api!(RedisModule_HashGet), self.ptr, args) };
            }
            // HashGet hands us ownership of each value (no automatic memory).
            for (i, &value) in values.iter().take(n).enumerate() {
                // SAFETY: as above.
                f(done + i, unsafe { RStr::owned(value) }.as_ref());
            }
            done += n;
        }
    }

    /// Sets a field to `value`, or deletes it (`None`). The primitive of every hash write;
    /// returns the number of fields changed.
    fn hash_set_raw(&self, field: &RStr, value: Option<&RStr>) -> c_int {
        self.hash_set_flags(raw::REDISMODULE_HASH_NONE as c_int, field, value)
    }

    /// Sets up to [`HSET_BATCH`] fields per `RedisModule_HashSet` call (one call's fixed
    /// cost, mostly the empty-key check, instead of one per field). Pairs past the batch
    /// size take further calls.
    pub fn hset_many<'s>(&self, pairs: impl IntoIterator<Item = (&'s RStr, &'s RStr)>) {
        if self.ptr.is_null() {
            return;
        }
        let mut pairs = pairs.into_iter().peekable();
        while pairs.peek().is_some() {
            // Unused pairs are NULL fields: the server stops reading at the first one.
            let mut args = [ptr::null_mut::<raw::RedisModuleString>(); 2 * HSET_BATCH];
            for (slot, (field, value)) in args.chunks_exact_mut(2).zip(pairs.by_ref()) {
                if let [f, v] = slot {
                    *f = field.as_ptr();
                    *v = value.as_ptr();
                }
            }
            // SAFETY: open key, live field and value strings up to the first NULL field.
            unsafe { call_with_pairs(api!(RedisModule_HashSet), self.ptr, args.map(|a| a.cast())) };
        }
    }

    fn hash_set_flags(&self, flags: c_int, field: &RStr, value: Option<&RStr>) -> c_int {
        if self.ptr.is_null() {
            return 0;
        }
        let value = value.map_or(
            raw::REDISMODULE_HASH_DELETE as *mut raw::RedisModuleString,
            RStr::as_ptr,
        );
        // SAFETY: open key, live field string, a live value string or the DELETE marker,
        // NULL-terminated varargs.
        unsafe {
            api!(RedisModule_HashSet)(
                self.ptr,
                flags,
                field.as_ptr(),
                value,
                ptr::null_mut::<c_void>(),
            )
        }
    }

    /// Moves a hash from the listpack encoding to the hashtable one, which the server keeps
    /// while the key lives. Why: a listpack is searched from its start for every field, so
    /// a hot hash written field by field pays for its whole length on each lookup.
    /// `RedisModule_HashSet` converts a hash before storing a field longer than
    /// `hash-max-listpack-value`: a probe field that long is added (only if absent) and
    /// removed at once. The data is unchanged, so nothing is replicated or notified.
    /// Nothing happens to a hash in the hashtable encoding already (or if the configured
    /// limit exceeds the probe).
    pub fn use_hashtable_encoding(&self) {
        let probe = [b'_'; ENCODING_PROBE_LEN];
        let (Some(field), Some(value)) = (RStr::new(&probe), RStr::new(b"")) else {
            return;
        };
        // NX: a user's own field of that name stays; COUNT_ALL: count an insertion (the
        // plain count is of fields replaced).
        let flags = (raw::REDISMODULE_HASH_NX | raw::REDISMODULE_HASH_COUNT_ALL) as c_int;
        if self.hash_set_flags(flags, &field, Some(&value)) > 0 {
            self.hdel_str(&field);
        }
    }

    /// Reads three fields with one `RedisModule_HashGet` and calls `f` with their values
    /// (no copies): a write that needs its settings and two fields asks once.
    pub fn hget3_with<T>(&self, fields: [&RStr; 3], f: impl FnOnce([Option<&[u8]>; 3]) -> T) -> T {
        let mut values: [*mut raw::RedisModuleString; 3] = [ptr::null_mut(); 3];
        if !self.ptr.is_null() {
            let [a, b, c] = &mut values;
            // SAFETY: open key, three live field strings each followed by its out pointer,
            // NULL-terminated varargs.
            unsafe {
                api!(RedisModule_HashGet)(
                    self.ptr,
                    raw::REDISMODULE_HASH_NONE as c_int,
                    fields[0].as_ptr(),
                    a as *mut *mut raw::RedisModuleString,
                    fields[1].as_ptr(),
                    b as *mut *mut raw::RedisModuleString,
                    fields[2].as_ptr(),
                    c as *mut *mut raw::RedisModuleString,
                    ptr::null_mut::<c_void>(),
                )
            };
        }
        // SAFETY: HashGet hands us ownership of each value found (no automatic memory).
        let owned = values.map(|value| unsafe { RStr::owned(value) });
        f([0, 1, 2].map(|i| owned.get(i).and_then(Option::as_ref).map(RStr::as_bytes)))
    }

    /// Calls `f` with the bytes of a hash field's value, if present (no copy).
    pub fn hget_with<T>(&self, field: &RStr, f: impl FnOnce(&[u8]) -> T) -> Option<T> {
        self.hash_get_raw(field, |v| f(v.as_bytes()))
    }

    /// A hash field's integer value: `None` if missing, `Some(None)` if not an integer.
    pub fn hget_i64_str(&self, field: &RStr) -> Option<Option<i64>> {
        self.hash_get_raw(field, |v| crate::args::parse_i64(v.as_bytes()).ok())
    }

    /// Deletes a hash field; true if it existed. An emptied hash disappears.
    pub fn hdel_str(&self, field: &RStr) -> bool {
        self.hash_set_raw(field, None) > 0
    }

    pub fn hget(&self, field: &[u8]) -> Option<Vec<u8>> {
        self.hget_with(&RStr::new(field)?, <[u8]>::to_vec)
    }

    /// Sets a hash field to a module string (creates the key if empty).
    pub fn hset_str_value(&self, field: &RStr, value: &RStr) {
        self.hash_set_raw(field, Some(value));
    }

    pub fn hset(&self, field: &[u8], value: &[u8]) {
        if let (Some(field), Some(value)) = (RStr::new(field), RStr::new(value)) {
            self.hash_set_raw(&field, Some(&value));
        }
    }

    /// Deletes a field; true if it existed.
    pub fn hdel(&self, field: &[u8]) -> bool {
        RStr::new(field).is_some_and(|field| self.hdel_str(&field))
    }

    /// Deletes the whole key.
    pub fn delete(&self) {
        if self.ptr.is_null() {
            return;
        }
        // SAFETY: `self.ptr` is a key opened for writing (DeleteKey refuses others).
        unsafe { api!(RedisModule_DeleteKey)(self.ptr) };
    }

    /// Deletes the whole key, freeing a big value in the background (as `UNLINK`), so
    /// dropping an object a user filled with foreign fields does not stall the server.
    pub fn unlink(&self) {
        if self.ptr.is_null() {
            return;
        }
        // SAFETY: `self.ptr` is a key opened for writing (UnlinkKey refuses others).
        unsafe { api!(RedisModule_UnlinkKey)(self.ptr) };
    }
}

impl Drop for Key {
    fn drop(&mut self) {
        if self.ptr.is_null() {
            return;
        }
        // SAFETY: we opened this handle and close it once.
        unsafe { api!(RedisModule_CloseKey)(self.ptr) };
    }
}

/// `MEMORY USAGE` of a key, in bytes (0 if unavailable). Run through `RedisModule_Call`,
/// so it shows as `memory|usage` in the user's `INFO commandstats` and `SLOWLOG`: no
/// server (Redis 7.0, 8.2, Valkey 9) offers a module call for a key's size
/// (`RedisModule_MallocSize*` measure only the module's own allocations), and `*.INFO`
/// answers exactly what `MEMORY USAGE` does.
pub fn memory_usage(ctx: &Context, name: &[u8]) -> i64 {
    match ctx.call("MEMORY", &[&b"USAGE"[..], name][..]) {
        Ok(redis_module::RedisValue::Integer(n)) => n,
        _ => 0,
    }
}
