package tally_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	tally "github.com/tally-redis/tally/clients/go"
)

// The reference's example: 30 a minute with bursts of 15, at given times.
func TestThrottle(t *testing.T) {
	eachServer(t, func(t *testing.T, rdb *redis.Client, key func(string) string) {
		tl := tally.New(rdb)
		th := tl.Throttle(key("user123"))
		t0 := time.UnixMilli(1795050000000)
		allow := func(q int64, at time.Time) tally.ThrottleDecision {
			return val(t, th.Allow(ctx, 15, 30, time.Minute, tally.Quantity(q), tally.At(at)))
		}
		eq(t, val(t, th.Allow(ctx, 15, 30, time.Minute, tally.At(t0))),
			tally.ThrottleDecision{Allowed: true, Limit: 16, Remaining: 15, ResetAfter: 2 * time.Second})
		eq(t, allow(15, t0), tally.ThrottleDecision{Allowed: true, Limit: 16, Remaining: 0, ResetAfter: 32 * time.Second})
		half := t0.Add(500 * time.Millisecond)
		eq(t, allow(1, half), tally.ThrottleDecision{Limit: 16, RetryAfter: 1500 * time.Millisecond, ResetAfter: 31500 * time.Millisecond})
		eq(t, allow(17, half), tally.ThrottleDecision{Limit: 16, RetryAfter: tally.Never, ResetAfter: 31500 * time.Millisecond})
		eq(t, rdb.Get(ctx, th.Key()).Val(), "1795050032000000000")
		eq(t, allow(0, t0.Add(4*time.Second)), tally.ThrottleDecision{Allowed: true, Limit: 16, Remaining: 2, ResetAfter: 28 * time.Second})

		// On the server's clock: a fresh subject, its key expiring when it is full again
		// (PXAT of its TAT in ns, rounded up to the ms).
		fresh := tl.Throttle(key("api:key42"))
		before := time.Now()
		eq(t, val(t, fresh.Allow(ctx, 4, 10, time.Second)), tally.ThrottleDecision{Allowed: true, Limit: 5, Remaining: 4, ResetAfter: 100 * time.Millisecond})
		ttl := rdb.PTTL(ctx, fresh.Key()).Val()
		elapsed := time.Since(before)
		// Gone (-2) only once its 100 ms have passed; else what is left of them.
		if ttl == -2 && elapsed < 99*time.Millisecond || ttl != -2 && (ttl <= 0 || ttl > 101*time.Millisecond || ttl < 100*time.Millisecond-elapsed-time.Millisecond) {
			t.Fatalf("PTTL %v after %v", ttl, elapsed)
		}

		fails(t, th.Allow(ctx, 15, 0, time.Minute).Err(), "ERR value is not an integer or out of range: count is an integer >= 1")
		fails(t, th.Allow(ctx, 0, 2000000, time.Millisecond).Err(), "ERR rate is too high")
		rdb.Set(ctx, key("name"), "alice", 0)
		fails(t, tl.Throttle(key("name")).Allow(ctx, 15, 30, time.Minute).Err(), "WRONGTYPE Operation against a key holding the wrong kind of value")
	})
}

// Every method works in a pipeline and a transaction: its Cmd answers after Exec.
func TestPipeline(t *testing.T) {
	eachServer(t, func(t *testing.T, rdb *redis.Client, key func(string) string) {
		for _, pipe := range []redis.Pipeliner{rdb.Pipeline(), rdb.TxPipeline()} {
			tl := tally.New(pipe)
			c := tl.Counter(key("hits"))
			ts := time.Now().Truncate(time.Second)
			incr := c.IncrBy(ctx, 2, tally.At(ts))
			sum := c.Sum(ctx, []time.Duration{time.Second, time.Minute}, tally.At(ts))
			top := tl.Leaderboard(key("board")).IncrBy(ctx, []tally.Entry{{Member: "m", Score: 4}})
			thr := tl.Throttle(key("thr")).Allow(ctx, 0, 1, time.Second, tally.At(ts))
			bad := c.Sum(ctx, nil, tally.Details())
			nilInfo := tl.Stats(key("none")).Info(ctx)
			if _, err := pipe.Exec(ctx); err != redis.Nil {
				t.Fatalf("Exec: %v", err)
			}
			eq(t, val(t, incr), int64(2))
			eq(t, val(t, sum), []int64{2, 2})
			eq(t, val(t, top), []int64{4})
			eq(t, val(t, thr), tally.ThrottleDecision{Allowed: true, Limit: 1, ResetAfter: time.Second})
			fails(t, bad.Err(), "tally: TSCOUNTER.SUM takes no Details option")
			eq(t, nilInfo.Err(), redis.Nil)
			rdb.Del(ctx, key("hits"), key("board"), key("thr"))
		}
	})
}
