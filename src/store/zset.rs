//! Sorted-set operations on an open [`Key`] (the crate wraps none of them), plus the two
//! helpers the leaderboard needs on its hashes: field operations on an already built
//! [`RStr`] (one member string serves a read and a write, on the hot path), and a hash
//! scan that can stop and resume (bounded expiry steps over a million-member slot).
//!
//! Every function tolerates a missing key or API function (it then does nothing and
//! reports "absent"), so nothing here can panic.

use std::ffi::c_void;
use std::os::raw::c_int;
use std::ptr;

use redis_module::raw;

use super::{str_bytes, Key, RStr};

const OK: c_int = raw::REDISMODULE_OK as c_int;

impl Key {
    /// Score of `member` in a sorted set; `None` if absent (or not a sorted set).
    pub fn zscore(&self, member: &RStr) -> Option<f64> {
        if self.ptr.is_null() {
            return None;
        }
        let score_of = unsafe { raw::RedisModule_ZsetScore }?;
        let mut score = 0f64;
        (unsafe { score_of(self.ptr, member.as_ptr(), &mut score) } == OK).then_some(score)
    }

    /// Sets `member`'s score (adds the member if needed; creates the key if empty).
    pub fn zadd(&self, member: &RStr, score: f64) -> bool {
        if self.ptr.is_null() {
            return false;
        }
        let Some(add) = (unsafe { raw::RedisModule_ZsetAdd }) else {
            return false;
        };
        unsafe { add(self.ptr, score, member.as_ptr(), ptr::null_mut()) == OK }
    }

    /// Removes `member`; true if it was there. An emptied sorted set disappears.
    pub fn zrem(&self, member: &RStr) -> bool {
        if self.ptr.is_null() {
            return false;
        }
        let Some(rem) = (unsafe { raw::RedisModule_ZsetRem }) else {
            return false;
        };
        let mut deleted: c_int = 0;
        unsafe { rem(self.ptr, member.as_ptr(), &mut deleted) == OK && deleted != 0 }
    }

    /// Walks a sorted set from the highest score down, ties by member descending: the
    /// order of `ZREVRANGE`. Empty for a missing key or another type.
    pub fn zrev_iter(&self) -> ZRevIter<'_> {
        let started = !self.ptr.is_null()
            && match unsafe { raw::RedisModule_ZsetLastInScoreRange } {
                Some(last) => unsafe {
                    last(self.ptr, f64::NEG_INFINITY, f64::INFINITY, 0, 0) == OK
                },
                None => false,
            };
        ZRevIter {
            key: self,
            started,
            done: !started,
        }
    }
}

/// Reverse walk over a sorted set; stops the module's range iterator on drop.
pub struct ZRevIter<'a> {
    key: &'a Key,
    started: bool,
    done: bool,
}

impl ZRevIter<'_> {
    /// The next `(member, score)` with the member still as a module string.
    pub fn next_str(&mut self) -> Option<(RStr, f64)> {
        if self.done {
            return None;
        }
        let (Some(current), Some(prev), Some(end)) = (
            unsafe { raw::RedisModule_ZsetRangeCurrentElement },
            unsafe { raw::RedisModule_ZsetRangePrev },
            unsafe { raw::RedisModule_ZsetRangeEndReached },
        ) else {
            self.done = true;
            return None;
        };
        if unsafe { end(self.key.ptr) } != 0 {
            self.done = true;
            return None;
        }
        let mut score = 0f64;
        let element = unsafe { current(self.key.ptr, &mut score) };
        if element.is_null() {
            self.done = true;
            return None;
        }
        let element = RStr(element); // a new string we own
        if unsafe { prev(self.key.ptr) } == 0 {
            self.done = true;
        }
        Some((element, score))
    }
}

impl Iterator for ZRevIter<'_> {
    type Item = (Vec<u8>, f64);

    fn next(&mut self) -> Option<Self::Item> {
        self.next_str()
            .map(|(m, s)| (str_bytes(m.as_ptr()).to_vec(), s))
    }
}

impl Drop for ZRevIter<'_> {
    fn drop(&mut self) {
        if self.started {
            if let Some(stop) = unsafe { raw::RedisModule_ZsetRangeStop } {
                unsafe { stop(self.key.ptr) };
            }
        }
    }
}

/// A hash scan that can pause between steps and resume later, even across timer ticks
/// (the cursor holds only a position, never a pointer into the hash). Fields may be
/// deleted between steps: as with `HSCAN`, every field present for the whole scan is
/// returned at least once. Destroyed on drop.
pub struct HashCursor(*mut raw::RedisModuleScanCursor);

impl HashCursor {
    pub fn new() -> Option<HashCursor> {
        let create = unsafe { raw::RedisModule_ScanCursorCreate }?;
        let cursor = unsafe { create() };
        (!cursor.is_null()).then_some(HashCursor(cursor))
    }

    /// One scan step over `key`: appends the `(field, value)` pairs it returned to `out`.
    /// Returns false when the scan is complete. The hash is not touched meanwhile; callers
    /// modify it between steps.
    pub fn step(&mut self, key: &Key, out: &mut Vec<(Vec<u8>, Vec<u8>)>) -> bool {
        if key.ptr.is_null() {
            return false;
        }
        let Some(scan) = (unsafe { raw::RedisModule_ScanKey }) else {
            return false;
        };
        extern "C" fn each(
            _key: *mut raw::RedisModuleKey,
            field: *mut raw::RedisModuleString,
            value: *mut raw::RedisModuleString,
            data: *mut c_void,
        ) {
            let out = unsafe { &mut *data.cast::<Vec<(Vec<u8>, Vec<u8>)>>() };
            out.push((str_bytes(field).to_vec(), str_bytes(value).to_vec()));
        }
        let data = (out as *mut Vec<(Vec<u8>, Vec<u8>)>).cast::<c_void>();
        unsafe { scan(key.ptr, self.0, Some(each), data) != 0 }
    }
}

impl Drop for HashCursor {
    fn drop(&mut self) {
        if let Some(destroy) = unsafe { raw::RedisModule_ScanCursorDestroy } {
            unsafe { destroy(self.0) };
        }
    }
}
