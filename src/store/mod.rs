//! The only code that opens keys. A thin, panic-free layer over the module key API
//! (faster than `ctx.call`, see ENGINEERING.md): RAII handles that close keys and free
//! strings, and binary-safe hash and sorted-set operations.
//!
//! Writes made here are not propagated by Redis: callers record them as effects
//! (`crate::replicate`) so replicas and the AOF get deterministic commands.

pub mod zset;

use std::ffi::c_void;
use std::os::raw::{c_char, c_int};
use std::ptr;

use redis_module::raw;
use redis_module::{Context, RedisString};

/// An owned `RedisModuleString`, freed on drop.
pub struct RStr(*mut raw::RedisModuleString);

impl RStr {
    pub fn new(bytes: &[u8]) -> Option<RStr> {
        let create = unsafe { raw::RedisModule_CreateString }?;
        let inner = unsafe {
            create(
                ptr::null_mut(),
                bytes.as_ptr().cast::<c_char>(),
                bytes.len(),
            )
        };
        (!inner.is_null()).then_some(RStr(inner))
    }

    pub fn from_i64(value: i64) -> Option<RStr> {
        let create = unsafe { raw::RedisModule_CreateStringFromLongLong }?;
        let inner = unsafe { create(ptr::null_mut(), value) };
        (!inner.is_null()).then_some(RStr(inner))
    }

    pub fn as_ptr(&self) -> *mut raw::RedisModuleString {
        self.0
    }
}

impl Drop for RStr {
    fn drop(&mut self) {
        if let Some(free) = unsafe { raw::RedisModule_FreeString } {
            unsafe { free(ptr::null_mut(), self.0) };
        }
    }
}

/// The bytes of a module string (valid while the string lives).
pub fn str_bytes<'a>(s: *const raw::RedisModuleString) -> &'a [u8] {
    if s.is_null() {
        return &[];
    }
    let Some(ptr_len) = (unsafe { raw::RedisModule_StringPtrLen }) else {
        return &[];
    };
    let mut len = 0usize;
    let data = unsafe { ptr_len(s, &mut len) };
    if data.is_null() {
        return &[];
    }
    unsafe { std::slice::from_raw_parts(data.cast::<u8>(), len) }
}

fn str_to_i64(s: *const raw::RedisModuleString) -> Option<i64> {
    let to_ll = unsafe { raw::RedisModule_StringToLongLong }?;
    let mut value: std::os::raw::c_longlong = 0;
    (unsafe { to_ll(s, &mut value) } == raw::REDISMODULE_OK as c_int).then_some(value)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyKind {
    Empty,
    Hash,
    Zset,
    Other,
}

/// An open key, closed on drop.
pub struct Key {
    ptr: *mut raw::RedisModuleKey,
}

impl Key {
    /// Opens `name` for reading, or reading and writing.
    pub fn open(ctx: &Context, name: &RedisString, write: bool) -> Key {
        Key::open_raw(ctx.ctx, name.inner, write)
    }

    /// Opens a key named by bytes (derived keys, keys found by the scheduler).
    pub fn open_bytes(ctx: &Context, name: &[u8], write: bool) -> Option<Key> {
        let name = RStr::new(name)?;
        Some(Key::open_raw(ctx.ctx, name.as_ptr(), write))
    }

    /// Opens a key for reading without touching its LRU/LFU (background visits and scans
    /// must not make idle keys look used to eviction).
    pub fn open_bytes_untouched(ctx: &Context, name: &[u8]) -> Option<Key> {
        let name = RStr::new(name)?;
        let mode = raw::REDISMODULE_READ | raw::REDISMODULE_OPEN_KEY_NOTOUCH;
        Some(Key::open_mode(ctx.ctx, name.as_ptr(), mode as c_int))
    }

    /// Opens a key whose name is already a module string (derived names are built once
    /// and serve both the ACL check and the open).
    pub fn open_str(ctx: &Context, name: &RStr, write: bool) -> Key {
        Key::open_raw(ctx.ctx, name.as_ptr(), write)
    }

    fn open_raw(
        ctx: *mut raw::RedisModuleCtx,
        name: *mut raw::RedisModuleString,
        write: bool,
    ) -> Key {
        let mode = if write {
            raw::REDISMODULE_READ | raw::REDISMODULE_WRITE
        } else {
            raw::REDISMODULE_READ
        };
        Key::open_mode(ctx, name, mode as c_int)
    }

    fn open_mode(
        ctx: *mut raw::RedisModuleCtx,
        name: *mut raw::RedisModuleString,
        mode: c_int,
    ) -> Key {
        // SAFETY: `ctx` and `name` are live for the call; OpenKey returns NULL or a key
        // handle we own and close on drop.
        let ptr = match unsafe { raw::RedisModule_OpenKey } {
            Some(open) => unsafe { open(ctx, name, mode) }.cast::<raw::RedisModuleKey>(),
            None => ptr::null_mut(),
        };
        Key { ptr }
    }

    pub fn kind(&self) -> KeyKind {
        if self.ptr.is_null() {
            return KeyKind::Empty;
        }
        let Some(key_type) = (unsafe { raw::RedisModule_KeyType }) else {
            return KeyKind::Other;
        };
        match unsafe { key_type(self.ptr) } as isize {
            raw::REDISMODULE_KEYTYPE_EMPTY => KeyKind::Empty,
            raw::REDISMODULE_KEYTYPE_HASH => KeyKind::Hash,
            raw::REDISMODULE_KEYTYPE_ZSET => KeyKind::Zset,
            _ => KeyKind::Other,
        }
    }

    pub fn raw(&self) -> *mut raw::RedisModuleKey {
        self.ptr
    }

    /// Number of fields (hash) or members (zset); 0 for a missing key.
    pub fn len(&self) -> usize {
        if self.ptr.is_null() {
            return 0;
        }
        match unsafe { raw::RedisModule_ValueLength } {
            Some(len) => unsafe { len(self.ptr) },
            None => 0,
        }
    }

    /// Calls `f` with the value of `field`, if present. The primitive of every hash read.
    fn hash_get_raw<T>(
        &self,
        field: &RStr,
        f: impl FnOnce(*mut raw::RedisModuleString) -> T,
    ) -> Option<T> {
        if self.ptr.is_null() {
            return None;
        }
        let get = unsafe { raw::RedisModule_HashGet }?;
        let mut value: *mut raw::RedisModuleString = ptr::null_mut();
        unsafe {
            get(
                self.ptr,
                raw::REDISMODULE_HASH_NONE as c_int,
                field.as_ptr(),
                &mut value as *mut *mut raw::RedisModuleString,
                ptr::null_mut::<c_void>(),
            )
        };
        if value.is_null() {
            return None;
        }
        let value = RStr(value); // HashGet hands us ownership (no auto memory).
        Some(f(value.as_ptr()))
    }

    /// Sets or deletes (`REDISMODULE_HASH_DELETE`) a field. The primitive of every hash
    /// write; returns the number of fields changed.
    fn hash_set_raw(&self, field: &RStr, value: *mut raw::RedisModuleString) -> c_int {
        if self.ptr.is_null() {
            return 0;
        }
        let Some(set) = (unsafe { raw::RedisModule_HashSet }) else {
            return 0;
        };
        unsafe {
            set(
                self.ptr,
                raw::REDISMODULE_HASH_NONE as c_int,
                field.as_ptr(),
                value,
                ptr::null_mut::<c_void>(),
            )
        }
    }

    /// Calls `f` with the bytes of a hash field's value, if present (no copy).
    pub fn hget_with<T>(&self, field: &RStr, f: impl FnOnce(&[u8]) -> T) -> Option<T> {
        self.hash_get_raw(field, |v| f(str_bytes(v)))
    }

    /// A hash field's integer value: `None` if missing, `Some(None)` if not an integer.
    pub fn hget_i64_str(&self, field: &RStr) -> Option<Option<i64>> {
        self.hash_get_raw(field, |v| str_to_i64(v))
    }

    /// Sets a hash field to an integer (creates the key if empty).
    pub fn hset_i64_str(&self, field: &RStr, value: i64) {
        if let Some(value) = RStr::from_i64(value) {
            self.hash_set_raw(field, value.as_ptr());
        }
    }

    /// Deletes a hash field; true if it existed. An emptied hash disappears.
    pub fn hdel_str(&self, field: &RStr) -> bool {
        self.hash_set_raw(
            field,
            raw::REDISMODULE_HASH_DELETE as *mut raw::RedisModuleString,
        ) > 0
    }

    pub fn hget(&self, field: &[u8]) -> Option<Vec<u8>> {
        self.hget_with(&RStr::new(field)?, <[u8]>::to_vec)
    }

    pub fn hset(&self, field: &[u8], value: &[u8]) {
        if let (Some(field), Some(value)) = (RStr::new(field), RStr::new(value)) {
            self.hash_set_raw(&field, value.as_ptr());
        }
    }

    /// Deletes a field; true if it existed.
    pub fn hdel(&self, field: &[u8]) -> bool {
        RStr::new(field).is_some_and(|field| self.hdel_str(&field))
    }

    /// Calls `f(field, value)` for every field of a hash. Do not modify the hash meanwhile.
    pub fn hscan(&self, mut f: impl FnMut(&[u8], &[u8])) {
        if self.ptr.is_null() {
            return;
        }
        let (Some(create), Some(scan), Some(destroy)) = (
            unsafe { raw::RedisModule_ScanCursorCreate },
            unsafe { raw::RedisModule_ScanKey },
            unsafe { raw::RedisModule_ScanCursorDestroy },
        ) else {
            return;
        };
        extern "C" fn each(
            _key: *mut raw::RedisModuleKey,
            field: *mut raw::RedisModuleString,
            value: *mut raw::RedisModuleString,
            data: *mut c_void,
        ) {
            let f = unsafe { &mut *data.cast::<&mut dyn FnMut(&[u8], &[u8])>() };
            f(str_bytes(field), str_bytes(value));
        }
        let mut f_dyn: &mut dyn FnMut(&[u8], &[u8]) = &mut f;
        let data = (&mut f_dyn as *mut &mut dyn FnMut(&[u8], &[u8])).cast::<c_void>();
        unsafe {
            let cursor = create();
            while scan(self.ptr, cursor, Some(each), data) != 0 {}
            destroy(cursor);
        }
    }

    /// Deletes the whole key.
    pub fn delete(&self) {
        if self.ptr.is_null() {
            return;
        }
        if let Some(delete) = unsafe { raw::RedisModule_DeleteKey } {
            unsafe { delete(self.ptr) };
        }
    }
}

impl Drop for Key {
    fn drop(&mut self) {
        if self.ptr.is_null() {
            return;
        }
        if let Some(close) = unsafe { raw::RedisModule_CloseKey } {
            unsafe { close(self.ptr) };
        }
    }
}
