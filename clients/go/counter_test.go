package tally_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	tally "github.com/tally-redis/tally/clients/go"
)

// minuteAgo is the start of a whole minute two to three minutes ago: writes AT it (and
// a few seconds later) stay in a counter's 1s:3600 and 1m:1440 resolutions for the
// test, and a minute slot holds them all.
func minuteAgo() time.Time {
	return time.Now().Truncate(time.Minute).Add(-2 * time.Minute)
}

func TestCounter(t *testing.T) {
	eachServer(t, func(t *testing.T, rdb *redis.Client, key func(string) string) {
		tl := tally.New(rdb)
		c := tl.Counter(key("c"))
		ts := minuteAgo()
		res := []tally.Resolution{{Span: time.Second, Samples: 3600}, {Span: time.Minute, Samples: 1440}}
		eq(t, val(t, c.Create(ctx, res...)), "OK")
		fails(t, c.Create(ctx).Err(), "ERR key already exists")

		eq(t, val(t, c.IncrBy(ctx, 5, tally.At(ts))), int64(5))
		eq(t, val(t, c.Incr(ctx, tally.At(ts))), int64(6))
		eq(t, val(t, c.IncrBy(ctx, 3, tally.At(ts.Add(time.Second)))), int64(3))
		at := tally.At(ts.Add(time.Second))
		eq(t, val(t, c.Sum(ctx, []time.Duration{time.Second}, at)), []int64{3})
		eq(t, val(t, c.Sum(ctx, []time.Duration{time.Second, 2 * time.Second, time.Minute, time.Hour}, at)), []int64{3, 9, 9, 9})

		eq(t, val(t, c.Range(ctx, time.Second, tally.From(ts), tally.To(ts.Add(2*time.Second)))),
			[]tally.Slot{{Start: ts, Count: 6}, {Start: ts.Add(time.Second), Count: 3}})
		eq(t, val(t, c.Range(ctx, time.Second, tally.From(ts), tally.To(ts.Add(2*time.Second)), tally.Empty())),
			[]tally.Slot{{Start: ts, Count: 6}, {Start: ts.Add(time.Second), Count: 3}, {Start: ts.Add(2 * time.Second), Count: 0}})
		eq(t, val(t, c.Range(ctx, time.Minute)), []tally.Slot{{Start: ts, Count: 9}})

		info := val(t, c.Info(ctx))
		if info.Memory <= 0 {
			t.Fatalf("memory %d", info.Memory)
		}
		info.Memory = 0
		eq(t, info, tally.CounterInfo{Resolutions: res, Slots: 3, First: ts, Last: ts.Add(time.Second)})
		_, err := tl.Counter(key("none")).Info(ctx).Result()
		eq(t, err, redis.Nil)
		eq(t, val(t, tl.Counter(key("none")).Sum(ctx, []time.Duration{time.Minute})), []int64{0})

		// Errors: the server's text; a key of another type; what the client refuses
		// before sending.
		fails(t, c.Sum(ctx, []time.Duration{240 * time.Hour}, at).Err(), "ERR window '10d' is longer than any resolution keeps (at most 1d)")
		rdb.Set(ctx, key("str"), "x", 0)
		fails(t, tl.Counter(key("str")).Incr(ctx).Err(), "WRONGTYPE Operation against a key holding the wrong kind of value")
		fails(t, c.Sum(ctx, []time.Duration{1500 * time.Microsecond}).Err(),
			"tally: duration 1.5ms is not a positive whole number of milliseconds")
		fails(t, c.Incr(ctx, tally.Window(time.Minute)).Err(), "tally: TSCOUNTER.INCR takes no Window option")
		eq(t, val(t, c.Sum(ctx, []time.Duration{time.Hour}, at)), []int64{9})
	})
}

func TestCounterLimit(t *testing.T) {
	eachServer(t, func(t *testing.T, rdb *redis.Client, key func(string) string) {
		tl := tally.New(rdb)
		c := tl.Counter(key("login"))
		ts := minuteAgo()
		eq(t, val(t, c.Create(ctx, tally.Resolution{Span: time.Second, Samples: 3600}, tally.Resolution{Span: time.Minute, Samples: 1440})), "OK")
		windows := []tally.WindowLimit{{Window: time.Second, Max: 4}, {Window: time.Minute, Max: 10}}
		at := tally.At(ts.Add(time.Second))
		eq(t, val(t, c.Limit(ctx, 3, windows, tally.At(ts))), tally.Decision{Allowed: true, Sums: []int64{3, 3}})
		eq(t, val(t, c.Limit(ctx, 4, windows, at)), tally.Decision{Allowed: true, Sums: []int64{4, 7}})
		// The 1s window is full until ts+2s; the 1m window's sum falls at ts+1m.
		eq(t, val(t, c.Limit(ctx, 1, windows, at, tally.Details())), tally.Decision{
			Allowed: false, RetryAfter: time.Second, Sums: []int64{4, 7},
			Windows: []tally.WindowState{{Sum: 4, Remaining: 0, Reset: time.Second}, {Sum: 7, Remaining: 3, Reset: 59 * time.Second}},
		})
		eq(t, val(t, c.Limit(ctx, 11, windows, at)), tally.Decision{Allowed: false, RetryAfter: tally.Never, Sums: []int64{4, 7}})
		// The same rules over two counters at once, auto-created with the default
		// resolutions (1s:120 the finest): at the start of this minute.
		user, ip := key("{u}:user"), key("{u}:ip")
		limits := []tally.KeyLimit{
			{Key: user, Windows: []tally.WindowLimit{{Window: time.Minute, Max: 2}}},
			{Key: ip, Windows: []tally.WindowLimit{{Window: time.Minute, Max: 5}, {Window: time.Hour, Max: 100}}},
		}
		now := tally.At(time.Now().Truncate(time.Minute))
		eq(t, val(t, tl.MLimit(ctx, 1, limits, now)), tally.MultiDecision{Allowed: true, Sums: map[string][]int64{user: {1}, ip: {1, 1}}})
		eq(t, val(t, tl.MLimit(ctx, 1, limits, now, tally.Details())), tally.MultiDecision{
			Allowed: true,
			Sums:    map[string][]int64{user: {2}, ip: {2, 2}},
			Windows: map[string][]tally.WindowState{
				user: {{Sum: 2, Remaining: 0, Reset: time.Minute}},
				ip:   {{Sum: 2, Remaining: 3, Reset: time.Minute}, {Sum: 2, Remaining: 98, Reset: time.Hour}},
			},
		})
		eq(t, val(t, tl.MLimit(ctx, 1, limits, now)), tally.MultiDecision{Allowed: false, RetryAfter: time.Minute, Sums: map[string][]int64{user: {2}, ip: {2, 2}}})
		eq(t, val(t, tl.MSum(ctx, []string{user, ip, key("{u}:none")}, []time.Duration{time.Minute, time.Hour}, now)), []int64{4, 4})
		eq(t, val(t, tl.MSum(ctx, []string{user}, []time.Duration{time.Minute}, now)), []int64{2})
		fails(t, tl.MLimit(ctx, 1, nil).Err(), "tally: MLimit needs at least one key")
	})
}
