//! A mutex lock that survives a poisoned mutex (a test that panicked while holding it must
//! not fail every later test).

use std::sync::{Mutex, MutexGuard};

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
