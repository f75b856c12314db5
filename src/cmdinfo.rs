//! Arity and key specs for `COMMAND INFO` / `COMMAND GETKEYS` / cluster routing, set with
//! the raw `RedisModule_SetCommandInfo` (the crate's `#[command]` macro needs an API that
//! Redis 7.0 lacks, see ENGINEERING.md).

use std::ffi::{CStr, CString};
use std::mem::{size_of, zeroed};
use std::os::raw::c_int;
use std::ptr;

use redis_module::raw;
use redis_module::Context;

/// Where a command's key is found.
pub enum KeyAt {
    /// At a fixed argument position (1 = first argument after the command name).
    Index(c_int),
    /// The argument right after `keyword`, searched from position `from`.
    AfterKeyword(&'static CStr, c_int),
}

pub struct KeySpec {
    pub at: KeyAt,
    /// `REDISMODULE_CMD_KEY_*` flags (RO/RW and ACCESS/UPDATE/INSERT/DELETE).
    pub flags: u32,
}

pub const READ: u32 = raw::REDISMODULE_CMD_KEY_RO | raw::REDISMODULE_CMD_KEY_ACCESS;
pub const UPDATE: u32 = raw::REDISMODULE_CMD_KEY_RW | raw::REDISMODULE_CMD_KEY_UPDATE;
pub const INSERT: u32 = raw::REDISMODULE_CMD_KEY_RW | raw::REDISMODULE_CMD_KEY_INSERT;

/// Sets arity and key specs of a registered command. On servers without the API
/// (before 7.0) the legacy first/last/step given at registration stay in force.
pub fn set(ctx: &Context, command: &str, arity: c_int, keys: &[KeySpec]) -> Result<(), String> {
    let (Some(get_command), Some(set_info)) = (unsafe { raw::RedisModule_GetCommand }, unsafe {
        raw::RedisModule_SetCommandInfo
    }) else {
        return Ok(());
    };
    let name = CString::new(command).map_err(|e| e.to_string())?;
    let cmd = unsafe { get_command(ctx.ctx, name.as_ptr()) };
    if cmd.is_null() {
        return Err(format!("command {command} is not registered"));
    }
    // One spec per key, then a zeroed terminator.
    let mut specs: Vec<raw::RedisModuleCommandKeySpec> = Vec::with_capacity(keys.len() + 1);
    for key in keys {
        let mut spec: raw::RedisModuleCommandKeySpec = unsafe { zeroed() };
        spec.flags = u64::from(key.flags);
        match key.at {
            KeyAt::Index(pos) => {
                spec.begin_search_type =
                    raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_INDEX;
                spec.bs.index.pos = pos;
            }
            KeyAt::AfterKeyword(keyword, from) => {
                spec.begin_search_type =
                    raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_KEYWORD;
                spec.bs.keyword.keyword = keyword.as_ptr();
                spec.bs.keyword.startfrom = from;
            }
        }
        spec.find_keys_type = raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_RANGE;
        spec.fk.range.lastkey = 0;
        spec.fk.range.keystep = 1;
        spec.fk.range.limit = 0;
        specs.push(spec);
    }
    specs.push(unsafe { zeroed() });
    let version = raw::RedisModuleCommandInfoVersion {
        version: 1,
        sizeof_historyentry: size_of::<raw::RedisModuleCommandHistoryEntry>(),
        sizeof_keyspec: size_of::<raw::RedisModuleCommandKeySpec>(),
        sizeof_arg: size_of::<raw::RedisModuleCommandArg>(),
    };
    let mut info: raw::RedisModuleCommandInfo = unsafe { zeroed() };
    info.version = &version;
    info.arity = arity;
    info.key_specs = specs.as_mut_ptr();
    info.args = ptr::null_mut();
    if unsafe { set_info(cmd, &info) } == raw::REDISMODULE_OK as c_int {
        Ok(())
    } else {
        Err(format!("RedisModule_SetCommandInfo failed for {command}"))
    }
}

/// Puts a command in the ACL category `@read` or `@write`, so `+@read`/`-@write` users see
/// tally commands like native ones. Only where the server has the API (Redis 7.2+,
/// Valkey); on 7.0 module commands have no category and key permissions (`%R~...`) apply.
pub fn set_acl_category(ctx: &Context, command: &str, writes: bool) {
    let (Some(get_command), Some(set_categories)) =
        (unsafe { raw::RedisModule_GetCommand }, unsafe {
            raw::RedisModule_SetCommandACLCategories
        })
    else {
        return;
    };
    let Ok(name) = CString::new(command) else {
        return;
    };
    let cmd = unsafe { get_command(ctx.ctx, name.as_ptr()) };
    if cmd.is_null() {
        return;
    }
    let category = if writes { c"write" } else { c"read" };
    unsafe { set_categories(cmd, category.as_ptr()) };
}
