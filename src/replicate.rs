//! Effects sent to replicas and the AOF. Commands that read the clock are never
//! propagated as typed: each records the plain writes it made (absolute values, not
//! increments) and emits them as native commands, so a replica or an AOF reload holds
//! exactly the primary's data. Several effects of one command or timer pass reach the
//! replica wrapped in MULTI/EXEC by Redis.

use redis_module::Context;

/// The writes one operation made to one hash key.
#[derive(Default)]
pub struct HashEffects {
    set: Vec<(Vec<u8>, Vec<u8>)>,
    del: Vec<Vec<u8>>,
    deleted_key: bool,
}

impl HashEffects {
    pub fn set(&mut self, field: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) {
        let field = field.into();
        self.del.retain(|f| *f != field);
        self.set.retain(|(f, _)| *f != field);
        self.set.push((field, value.into()));
    }

    pub fn del(&mut self, field: impl Into<Vec<u8>>) {
        let field = field.into();
        self.set.retain(|(f, _)| *f != field);
        self.del.push(field);
    }

    /// The whole key went away: nothing else needs sending.
    pub fn delete_key(&mut self) {
        self.deleted_key = true;
    }

    pub fn is_empty(&self) -> bool {
        self.set.is_empty() && self.del.is_empty() && !self.deleted_key
    }

    /// Sends the effects for `key`: `DEL`, or `HDEL` then `HSET`.
    pub fn emit(&self, ctx: &Context, key: &[u8]) {
        if self.deleted_key {
            ctx.replicate("DEL", &[key][..]);
            return;
        }
        if !self.del.is_empty() {
            let mut args: Vec<&[u8]> = Vec::with_capacity(self.del.len() + 1);
            args.push(key);
            args.extend(self.del.iter().map(Vec::as_slice));
            ctx.replicate("HDEL", &args[..]);
        }
        if !self.set.is_empty() {
            let mut args: Vec<&[u8]> = Vec::with_capacity(self.set.len() * 2 + 1);
            args.push(key);
            for (field, value) in &self.set {
                args.push(field);
                args.push(value);
            }
            ctx.replicate("HSET", &args[..]);
        }
    }
}
