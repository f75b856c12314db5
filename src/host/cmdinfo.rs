//! Commands as the server sees them: the table entry type, registration (name, flags,
//! arity, key specs, ACL category and documentation, all from one [`Command`]), the entry
//! point that turns a handler's result into a reply, and the keys-position API.
//!
//! Arity, key specs and docs are set with the raw `RedisModule_SetCommandInfo` (the crate's
//! `#[command]` macro needs `RedisModule_SetCommandACLCategories`, which Redis 7.0 lacks);
//! the server then checks arity itself, before calling the handler.
//!
//! Owns: raw calls about commands. May not touch: keys, command logic.

use std::ffi::CStr;
use std::mem::{size_of, zeroed};
use std::os::raw::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;

use redis_module::{raw, Context, RedisString};

use crate::cmddocs::{self, Arg, Doc, Kind};
use crate::error::{Error, Result};
use crate::host::reply::{reply_int, send_error, Reply};
use crate::host::server::{api, borrowed_bytes};

/// Where a command's key is found.
pub enum KeyAt {
    /// At a fixed argument position (1 = first argument after the command name).
    Index(c_int),
    /// The argument right after `keyword`, searched from position `from`.
    AfterKeyword(&'static CStr, c_int),
    /// The arguments after position `pos`, as many as the integer at `pos` says
    /// (`numkeys key [key ...]`).
    Counted(c_int),
}

pub struct KeySpec {
    pub at: KeyAt,
    /// `REDISMODULE_CMD_KEY_*` flags (RO/RW and ACCESS/UPDATE/INSERT/DELETE).
    pub flags: u32,
}

pub const READ: u32 = raw::REDISMODULE_CMD_KEY_RO | raw::REDISMODULE_CMD_KEY_ACCESS;
pub const UPDATE: u32 = raw::REDISMODULE_CMD_KEY_RW | raw::REDISMODULE_CMD_KEY_UPDATE;
pub const INSERT: u32 = raw::REDISMODULE_CMD_KEY_RW | raw::REDISMODULE_CMD_KEY_INSERT;

/// The first argument is the command's only key.
pub const fn first_key(flags: u32) -> KeySpec {
    KeySpec {
        at: KeyAt::Index(1),
        flags,
    }
}

/// A command body: `(ctx, key, arguments after the key)`.
pub type Handler = fn(&Context, &RedisString, &[&[u8]]) -> Result<Reply>;

/// The C entry point the server calls (generated per command by `command!`).
pub type Entry =
    extern "C" fn(*mut raw::RedisModuleCtx, *mut *mut raw::RedisModuleString, c_int) -> c_int;

/// One command: everything the server is told about it.
pub struct Command {
    pub name: &'static CStr,
    pub entry: Entry,
    /// Argument count with the name; negative: at least that many.
    pub arity: c_int,
    /// `RedisModule_CreateCommand` flags (`"write deny-oom"`, `"readonly"`, ...).
    pub flags: &'static CStr,
    pub keys: &'static [KeySpec],
    /// ACL category: `c"read"` or `c"write"`.
    pub acl: &'static CStr,
    /// What `COMMAND DOCS` answers: a constant beside the handler, checked at compile time
    /// by `command!`.
    pub doc: &'static Doc,
}

/// One command's line of its family's table, written beside its handler:
/// `command!(name => handler, arity, flags, keys, acl, doc)` makes a [`Command`] with its
/// own C entry point calling [`dispatch`] with the handler. A line without its doc does not
/// compile, and neither does a doc that fails `cmddocs::check` (a `const` evaluated for
/// every line), so the server never meets one.
macro_rules! command {
    ($name:literal => $handler:path, $arity:expr, $flags:literal, $keys:expr, $acl:literal, $doc:expr $(,)?) => {
        $crate::host::cmdinfo::Command {
            name: $name,
            entry: {
                extern "C" fn entry(
                    ctx: *mut redis_module::raw::RedisModuleCtx,
                    argv: *mut *mut redis_module::raw::RedisModuleString,
                    argc: std::os::raw::c_int,
                ) -> std::os::raw::c_int {
                    // SAFETY: the server's context and `argc` argument strings for this
                    // call.
                    unsafe { $crate::host::cmdinfo::dispatch(ctx, argv, argc, $handler) }
                }
                entry
            },
            arity: $arity,
            flags: $flags,
            keys: $keys,
            acl: $acl,
            doc: {
                const _: () = $crate::cmddocs::check($name, $doc, $keys.len());
                $doc
            },
        }
    };
}
pub(crate) use command;

/// Arguments (after the key) borrowed without a heap allocation.
const STACK_ARGS: usize = 16;
/// ... into a smaller array when there are this many or fewer.
const FEW_ARGS: usize = 4;

/// An argument's bytes, borrowed as long as the argument vector is.
///
/// # Safety
/// `arg` is a live module string that outlives the vector holding it.
unsafe fn bytes(arg: &*mut raw::RedisModuleString) -> &[u8] {
    // SAFETY: the caller's contract.
    unsafe { borrowed_bytes(*arg) }
}

/// Runs `body` with `rest` (at most `N`) borrowed into a stack array.
///
/// # Safety
/// Every string of `rest` is a live module string that outlives `rest`.
unsafe fn body_on_stack<const N: usize>(
    context: &Context,
    key: &RedisString,
    rest: &[*mut raw::RedisModuleString],
    body: Handler,
) -> Result<Reply> {
    let mut on_stack: [&[u8]; N] = [&[]; N];
    let slots = on_stack.get_mut(..rest.len()).unwrap_or_default();
    for (slot, arg) in slots.iter_mut().zip(rest) {
        // SAFETY: the caller's contract.
        *slot = unsafe { bytes(arg) };
    }
    body(context, key, slots)
}

/// Runs a command body: sends its reply or error, and turns a panic (a bug) into an error
/// reply instead of aborting the server. The server has checked the arity already.
///
/// # Safety
/// `ctx` is the live context of the command, and `argv` holds `argc` live argument
/// strings for the call (a command's entry point passes on what the server gave it).
pub unsafe fn dispatch(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
    body: Handler,
) -> c_int {
    let context = Context::new(ctx);
    let argv: &[*mut raw::RedisModuleString] = match usize::try_from(argc) {
        // SAFETY: the server passes `argc` live argument strings for this call.
        Ok(len) if !argv.is_null() => unsafe { std::slice::from_raw_parts(argv, len) },
        _ => &[],
    };
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let Some(&key) = argv.get(1) else {
            // SAFETY: the argument strings live for this call.
            let name = argv.first().map(|&a| unsafe { borrowed_bytes(a) });
            let name = String::from_utf8_lossy(name.unwrap_or_default()).into_owned();
            return Err(Error::Arity(name));
        };
        // The key as the handlers take it and the other arguments, all borrowed from the
        // server for this call: the key's string is neither retained nor freed (never
        // dropped), since it outlives the call anyway.
        let key = std::mem::ManuallyDrop::new(RedisString::from_redis_module_string(ctx, key));
        let rest = argv.get(2..).unwrap_or_default();
        // Most commands have a few arguments: borrowed into a stack array, not a Vec (a
        // small one for the usual reads, whose filling costs a store per slot).
        if rest.len() <= FEW_ARGS {
            // SAFETY: the server's argument strings live for this call (our contract).
            unsafe { body_on_stack::<FEW_ARGS>(&context, &key, rest, body) }
        } else if rest.len() <= STACK_ARGS {
            // SAFETY: as above.
            unsafe { body_on_stack::<STACK_ARGS>(&context, &key, rest, body) }
        } else {
            // SAFETY: as above.
            let rest: Vec<&[u8]> = rest.iter().map(|arg| unsafe { bytes(arg) }).collect();
            body(&context, &key, &rest)
        }
    }));
    match outcome {
        Ok(Ok(reply)) => match reply {
            // The usual reply, sent without `Reply::send`'s dispatch and not dropped (an
            // integer holds nothing to free).
            Reply::Int(value) => {
                reply_int(&context, value);
                std::mem::forget(reply);
            }
            reply => reply.send(&context),
        },
        Ok(Err(error)) => send_error(&context, &error.to_string()),
        Err(_) => send_error(
            &context,
            "ERR internal error in tally (the command was not applied)",
        ),
    }
    raw::REDISMODULE_OK as c_int
}

/// Registers a command with everything its entry says.
pub fn register(ctx: &Context, command: &Command) -> std::result::Result<(), String> {
    let name = command.name.to_string_lossy();
    // Legacy key range 1 1 1 (the first argument) for servers that route by it; the key
    // specs below refine it. A counted list of keys has no legacy range (0 0 0): the
    // command answers the server's keys-position requests itself (`getkeys-api`).
    let legacy = match command.keys.first() {
        Some(KeySpec {
            at: KeyAt::Counted(_),
            ..
        }) => 0,
        _ => 1,
    };
    // SAFETY: live load context, NUL-terminated name and flags, a C entry point that
    // lives as long as the module.
    let status = unsafe {
        api!(RedisModule_CreateCommand)(
            ctx.ctx,
            command.name.as_ptr(),
            Some(command.entry),
            command.flags.as_ptr(),
            legacy,
            legacy,
            legacy,
        )
    };
    if status != raw::REDISMODULE_OK as c_int {
        return Err(format!("cannot register command {name}"));
    }
    // SAFETY: live load context and a NUL-terminated name.
    let cmd = unsafe { api!(RedisModule_GetCommand)(ctx.ctx, command.name.as_ptr()) };
    if cmd.is_null() {
        return Err(format!("command {name} is not registered"));
    }
    // SAFETY: `cmd` is the registered command the server just returned.
    unsafe { set_info(cmd, command.arity, command.keys, command.doc) }
        .map_err(|()| format!("RedisModule_SetCommandInfo failed for {name}"))?;
    // SAFETY: as above.
    unsafe { set_acl_category(cmd, command.acl) };
    Ok(())
}

/// Sets arity, key specs and documentation of a registered command.
///
/// # Safety
/// `cmd` is a command the server returned from `RedisModule_GetCommand`.
unsafe fn set_info(
    cmd: *mut raw::RedisModuleCommand,
    arity: c_int,
    keys: &[KeySpec],
    doc: &Doc,
) -> std::result::Result<(), ()> {
    // One spec per key, then a zeroed terminator.
    let mut specs: Vec<raw::RedisModuleCommandKeySpec> = Vec::with_capacity(keys.len() + 1);
    for key in keys {
        // SAFETY: a plain C struct for which all-zero is the documented "unset" value.
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
            KeyAt::Counted(pos) => {
                spec.begin_search_type =
                    raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_INDEX;
                spec.bs.index.pos = pos;
            }
        }
        if let KeyAt::Counted(_) = key.at {
            // The count is the search's start; the keys follow it, one after another.
            spec.find_keys_type = raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_KEYNUM;
            spec.fk.keynum.keynumidx = 0;
            spec.fk.keynum.firstkey = 1;
            spec.fk.keynum.keystep = 1;
        } else {
            spec.find_keys_type = raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_RANGE;
            spec.fk.range.lastkey = 0;
            spec.fk.range.keystep = 1;
            spec.fk.range.limit = 0;
        }
        specs.push(spec);
    }
    // SAFETY: as above: the all-zero spec terminates the list.
    specs.push(unsafe { zeroed() });
    let version = raw::RedisModuleCommandInfoVersion {
        version: 1,
        sizeof_historyentry: size_of::<raw::RedisModuleCommandHistoryEntry>(),
        sizeof_keyspec: size_of::<raw::RedisModuleCommandKeySpec>(),
        sizeof_arg: size_of::<raw::RedisModuleCommandArg>(),
    };
    // SAFETY: as above: all-zero is "unset" for every field we do not fill.
    let mut info: raw::RedisModuleCommandInfo = unsafe { zeroed() };
    info.version = &version;
    info.arity = arity;
    info.key_specs = specs.as_mut_ptr();
    info.summary = doc.summary.as_ptr();
    info.complexity = doc.complexity.as_ptr();
    info.since = cmddocs::VERSION_C.as_ptr();
    let mut arrays = Vec::new();
    info.args = arg_array(doc.args, &mut arrays);
    // SAFETY: a registered command; `info`, `version`, `specs` and the argument arrays
    // (held by `arrays`, their strings static) outlive the call: the server copies them
    // all (`moduleCopyCommandArgs` duplicates every string and array), so they are freed
    // after it.
    let status = unsafe { api!(RedisModule_SetCommandInfo)(cmd, &info) };
    (status == raw::REDISMODULE_OK as c_int)
        .then_some(())
        .ok_or(())
}

/// The server's form of an argument list: one entry per argument (sub-arguments of a
/// block in arrays of their own), then an all-zero terminator. Every array built is kept in
/// `arrays` (moving a `Vec` there keeps its buffer, so the returned pointer stays valid).
fn arg_array(
    args: &[Arg],
    arrays: &mut Vec<Vec<raw::RedisModuleCommandArg>>,
) -> *mut raw::RedisModuleCommandArg {
    let mut array = Vec::with_capacity(args.len() + 1);
    for arg in args {
        // SAFETY: a plain C struct for which all-zero is the documented "unset" value.
        let mut entry: raw::RedisModuleCommandArg = unsafe { zeroed() };
        entry.name = arg.name.as_ptr();
        entry.type_ = match arg.kind {
            Kind::Key(_) => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_KEY,
            Kind::Integer => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER,
            Kind::Double => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_DOUBLE,
            Kind::String => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_STRING,
            Kind::PureToken => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_PURE_TOKEN,
            Kind::Block => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_BLOCK,
            Kind::OneOf => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_ONEOF,
        };
        // Only a key names a key spec; the server wants -1 (or 0) for the others.
        entry.key_spec_index = match arg.kind {
            Kind::Key(index) => index,
            _ => -1,
        };
        entry.token = arg.token.map_or(ptr::null(), CStr::as_ptr);
        let mut flags = raw::REDISMODULE_CMD_ARG_NONE;
        if arg.optional {
            flags |= raw::REDISMODULE_CMD_ARG_OPTIONAL;
        }
        if arg.multiple {
            flags |= raw::REDISMODULE_CMD_ARG_MULTIPLE;
        }
        entry.flags = flags as c_int;
        if !arg.args.is_empty() {
            entry.subargs = arg_array(arg.args, arrays);
        }
        array.push(entry);
    }
    // SAFETY: as above: the all-zero entry terminates the list.
    array.push(unsafe { zeroed() });
    let first = array.as_mut_ptr();
    arrays.push(array);
    first
}

/// Puts a command in the ACL category `@read` or `@write`, so `+@read`/`-@write` users see
/// tally commands like native ones. Only where the server has the API (Redis 7.2+,
/// Valkey); on 7.0 module commands have no category and key permissions (`%R~...`) apply.
/// The one optional module API function tally uses, hence read here without `api!`.
///
/// # Safety
/// `cmd` is a command the server returned from `RedisModule_GetCommand`.
unsafe fn set_acl_category(cmd: *mut raw::RedisModuleCommand, category: &CStr) {
    // SAFETY: reads a function-pointer static the crate set during `RedisModule_Init`.
    if let Some(set_categories) = unsafe { raw::RedisModule_SetCommandACLCategories } {
        // SAFETY: a registered command and a NUL-terminated category list.
        unsafe { set_categories(cmd, category.as_ptr()) };
    }
}

/// True when Redis calls the command only to learn its keys (flag `getkeys-api`).
pub fn is_keys_position_request(ctx: &Context) -> bool {
    // SAFETY: live context of the current command.
    (unsafe { api!(RedisModule_IsKeysPositionRequest)(ctx.ctx) }) != 0
}

/// Answers a keys-position request: argument `pos` (0 = command name) is a key.
pub fn key_at(ctx: &Context, pos: c_int) {
    // SAFETY: live context of the current command; the server bounds-checks `pos`.
    unsafe { api!(RedisModule_KeyAtPos)(ctx.ctx, pos) };
}

/// For a command whose argument 1 is `numkeys` (1 to `max`): when the server only asks
/// for its keys (`getkeys-api`), names arguments 2 to `numkeys + 1` as keys, as far as the
/// call has arguments (`after`: those after `numkeys`), and returns true. Redis 7.0 and
/// Valkey route cluster commands (and answer CROSSSLOT) by asking the module, since the
/// legacy key range cannot count keys; the key spec says the same for the others. A bad
/// `numkeys` names no key (the command then refuses it).
pub fn answered_counted_keys(ctx: &Context, numkeys: &[u8], after: usize, max: usize) -> bool {
    if !is_keys_position_request(ctx) {
        return false;
    }
    if let Ok(count) = crate::args::parse_key_count(numkeys, max) {
        for i in 0..count.min(after) {
            if let Ok(pos) = c_int::try_from(i + 2) {
                key_at(ctx, pos);
            }
        }
    }
    true
}
