//! Key permissions of the calling user, for keys a command touches that the server does
//! not know about (a leaderboard's derived keys, the only ones): the server checks only
//! declared keys.

use std::os::raw::c_int;

use redis_module::{raw, AclPermissions, Context};

use super::{Key, RStr};
use crate::error::{Error, Result};
use crate::host::server::api;

/// The calling user's key permissions. In a timer or job there is no user: nothing to
/// check.
pub struct Acl {
    user: *mut raw::RedisModuleUser,
}

impl Acl {
    pub fn of(ctx: &Context) -> Result<Acl> {
        // SAFETY: live context; returns NULL (no client) or a string we own.
        let name = unsafe { RStr::owned(api!(RedisModule_GetCurrentUserName)(ctx.ctx)) };
        let Some(name) = name else {
            return Ok(Acl {
                user: std::ptr::null_mut(),
            });
        };
        // SAFETY: live string; returns NULL or a user handle we own and free on drop.
        let user = unsafe { api!(RedisModule_GetModuleUserFromUserName)(name.as_ptr()) };
        if user.is_null() {
            return Err(Error::NoPerm(
                "this user does not exist or is disabled".into(),
            ));
        }
        Ok(Acl { user })
    }

    /// NOPERM unless the user may read (and, with `write`, modify) the key `name`.
    pub fn check(&self, name: &RStr, write: bool) -> Result<()> {
        if self.user.is_null() {
            return Ok(());
        }
        let mut perms = AclPermissions::ACCESS;
        if write {
            perms |= AclPermissions::INSERT | AclPermissions::UPDATE | AclPermissions::DELETE;
        }
        // SAFETY: a live user handle and key name string.
        let status = unsafe {
            api!(RedisModule_ACLCheckKeyPermissions)(self.user, name.as_ptr(), perms.bits())
        };
        if status != raw::REDISMODULE_OK as c_int {
            return Err(Error::NoPerm(format!(
                "this user has no permissions to access the key '{}' of this leaderboard",
                String::from_utf8_lossy(name.as_bytes())
            )));
        }
        Ok(())
    }

    /// [`Acl::check`] of a name given as bytes.
    pub fn check_bytes(&self, name: &[u8], write: bool) -> Result<()> {
        self.check(&RStr::try_new(name)?, write)
    }

    /// Checks `name` and opens it.
    pub fn open(&self, ctx: &Context, name: &[u8], write: bool) -> Result<Key> {
        self.open_str(ctx, &RStr::try_new(name)?, write)
    }

    /// [`Acl::open`] of a name the caller keeps as a module string.
    pub fn open_str(&self, ctx: &Context, name: &RStr, write: bool) -> Result<Key> {
        self.check(name, write)?;
        Ok(Key::open_str(ctx, name, write))
    }
}

impl Drop for Acl {
    fn drop(&mut self) {
        if !self.user.is_null() {
            // SAFETY: we own the user handle and free it once.
            unsafe { api!(RedisModule_FreeModuleUser)(self.user) };
        }
    }
}
