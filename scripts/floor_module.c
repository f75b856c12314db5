/*
 * benchfloor: a benchmark aid for scripts/bench.sh, never loaded in production.
 *
 * It measures what the server charges any module read command before the command does any
 * work of its own: dispatch into a module, opening a key, reading the clock and replying
 * one integer. make bench loads it next to tally and reports its commands against HGET in
 * the rows "floor: module read ...", so tally's read rows (TSCOUNTER.SUM of one window)
 * can be compared against the least a module read can cost on the same server.
 *
 *   FLOOR.READ key arg     the clock (RedisModule_Milliseconds), OpenKey READ, ValueLength,
 *                          CloseKey, an integer reply
 *   FLOOR.READNC key arg   the same without the clock
 *   FLOOR.HGET key field   the clock, OpenKey READ, one field read with RedisModule_HashGet
 *                          and parsed as an integer, CloseKey, an integer reply: the least a
 *                          module pays to read one value stored in a hash
 *   FLOOR.HWRITE key field1 field2 field3
 *                          the clock, OpenKey WRITE, the three fields read with one
 *                          RedisModule_HashGet, field2 and field3 set back to the values read
 *                          with one RedisModule_HashSet, HSET key field2 value2 field3 value3
 *                          replicated, a hash keyspace event, an integer reply: what a module
 *                          write of STATS.ADD's shape (its marker and the period's two fields
 *                          read, the two written and replicated as effects) costs with the
 *                          module API, whatever it computes in between
 *   FLOOR.REPLICATE zkey hkey member
 *                          two RedisModule_Replicate calls (ZINCRBY zkey 1 member, HINCRBY
 *                          hkey member 1) and nothing else, replying 1: what replicating a
 *                          leaderboard increment's two effects costs a module (the server
 *                          looks the command name up and builds an argument vector per
 *                          call, replicas or not; a native write pays nothing there)
 *
 * Loaded with the argument SUBSCRIBE, it also subscribes to the keyspace event classes tally
 * subscribes to (src/host/events.rs, keyspace_classes; a unit test keeps the two lists equal)
 * with an empty callback: the "host tax" rows compare native writes on other keys under
 * tally against this, what any module that follows those events costs the server.
 *
 * Both take a key and one ignored argument (arity 3, as TSCOUNTER.SUM ring 5m) so the
 * server parses as many arguments. The reply depends on the key's length and the clock
 * and is never 0 or 1: the server formats it like SUM's reply, not as a shared integer.
 *
 * Built by scripts/bench.sh: cc -O2 -fPIC -shared -I<redis-module crate>/src/include.
 */
#include <strings.h>

#include "redismodule.h"

/* length * 1000 + 100 + (now & 1): never a shared 0/1 reply object. */
static long long floor_reply(RedisModuleCtx *ctx, RedisModuleString *keyname, long long now) {
    RedisModuleKey *key = RedisModule_OpenKey(ctx, keyname, REDISMODULE_READ);
    long long len = key ? (long long)RedisModule_ValueLength(key) : 0;
    if (key) RedisModule_CloseKey(key);
    return len * 1000 + 100 + (now & 1);
}

static int FloorRead(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 3) return RedisModule_WrongArity(ctx);
    long long now = RedisModule_Milliseconds();
    return RedisModule_ReplyWithLongLong(ctx, floor_reply(ctx, argv[1], now));
}

static int FloorReadNoClock(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 3) return RedisModule_WrongArity(ctx);
    return RedisModule_ReplyWithLongLong(ctx, floor_reply(ctx, argv[1], 0));
}

static int FloorHashGet(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 3) return RedisModule_WrongArity(ctx);
    long long now = RedisModule_Milliseconds();
    long long value = 0;
    RedisModuleKey *key = RedisModule_OpenKey(ctx, argv[1], REDISMODULE_READ);
    if (key && RedisModule_KeyType(key) == REDISMODULE_KEYTYPE_HASH) {
        RedisModuleString *field = NULL;
        RedisModule_HashGet(key, REDISMODULE_HASH_NONE, argv[2], &field, NULL);
        if (field) {
            if (RedisModule_StringToLongLong(field, &value) != REDISMODULE_OK) value = 0;
            RedisModule_FreeString(ctx, field);
        }
    }
    if (key) RedisModule_CloseKey(key);
    return RedisModule_ReplyWithLongLong(ctx, value * 1000 + 100 + (now & 1));
}

static int FloorHashWrite(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 5) return RedisModule_WrongArity(ctx);
    long long now = RedisModule_Milliseconds();
    long long reply = 0;
    RedisModuleKey *key = RedisModule_OpenKey(ctx, argv[1], REDISMODULE_READ | REDISMODULE_WRITE);
    if (key && RedisModule_KeyType(key) == REDISMODULE_KEYTYPE_HASH) {
        RedisModuleString *v1 = NULL, *v2 = NULL, *v3 = NULL;
        RedisModule_HashGet(key, REDISMODULE_HASH_NONE, argv[2], &v1, argv[3], &v2, argv[4], &v3,
                            NULL);
        if (v2 && v3) {
            RedisModule_HashSet(key, REDISMODULE_HASH_NONE, argv[3], v2, argv[4], v3, NULL);
            RedisModule_Replicate(ctx, "HSET", "sssss", argv[1], argv[3], v2, argv[4], v3);
            RedisModule_NotifyKeyspaceEvent(ctx, REDISMODULE_NOTIFY_HASH, "floor.hwrite", argv[1]);
            size_t len;
            RedisModule_StringPtrLen(v3, &len);
            reply = (long long)len;
        }
        if (v1) RedisModule_FreeString(ctx, v1);
        if (v2) RedisModule_FreeString(ctx, v2);
        if (v3) RedisModule_FreeString(ctx, v3);
    }
    if (key) RedisModule_CloseKey(key);
    return RedisModule_ReplyWithLongLong(ctx, reply * 1000 + 100 + (now & 1));
}

static int FloorReplicate(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 4) return RedisModule_WrongArity(ctx);
    RedisModule_Replicate(ctx, "ZINCRBY", "scs", argv[1], "1", argv[3]);
    RedisModule_Replicate(ctx, "HINCRBY", "ssc", argv[2], argv[3], "1");
    return RedisModule_ReplyWithLongLong(ctx, 1);
}

/* The classes tally subscribes to (src/host/events.rs, keyspace_classes). */
static const int TALLY_CLASSES = REDISMODULE_NOTIFY_GENERIC | REDISMODULE_NOTIFY_STRING |
                                 REDISMODULE_NOTIFY_SET | REDISMODULE_NOTIFY_HASH |
                                 REDISMODULE_NOTIFY_ZSET | REDISMODULE_NOTIFY_EXPIRED |
                                 REDISMODULE_NOTIFY_EVICTED;

static int EmptyNotification(RedisModuleCtx *ctx, int type, const char *event,
                             RedisModuleString *key) {
    (void)ctx;
    (void)type;
    (void)event;
    (void)key;
    return REDISMODULE_OK;
}

int RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (RedisModule_Init(ctx, "benchfloor", 1, REDISMODULE_APIVER_1) == REDISMODULE_ERR)
        return REDISMODULE_ERR;
    if (argc == 1) {
        size_t len;
        const char *arg = RedisModule_StringPtrLen(argv[0], &len);
        if (len != 9 || strncasecmp(arg, "subscribe", 9) != 0) return REDISMODULE_ERR;
        if (RedisModule_SubscribeToKeyspaceEvents(ctx, TALLY_CLASSES, EmptyNotification) ==
            REDISMODULE_ERR)
            return REDISMODULE_ERR;
    } else if (argc != 0) {
        return REDISMODULE_ERR;
    }
    if (RedisModule_CreateCommand(ctx, "floor.read", FloorRead, "readonly fast", 1, 1, 1) ==
        REDISMODULE_ERR)
        return REDISMODULE_ERR;
    if (RedisModule_CreateCommand(ctx, "floor.readnc", FloorReadNoClock, "readonly fast", 1, 1,
                                  1) == REDISMODULE_ERR)
        return REDISMODULE_ERR;
    if (RedisModule_CreateCommand(ctx, "floor.hget", FloorHashGet, "readonly fast", 1, 1, 1) ==
        REDISMODULE_ERR)
        return REDISMODULE_ERR;
    if (RedisModule_CreateCommand(ctx, "floor.hwrite", FloorHashWrite, "write fast", 1, 1, 1) ==
        REDISMODULE_ERR)
        return REDISMODULE_ERR;
    if (RedisModule_CreateCommand(ctx, "floor.replicate", FloorReplicate, "write fast", 1, 2, 1) ==
        REDISMODULE_ERR)
        return REDISMODULE_ERR;
    return REDISMODULE_OK;
}
