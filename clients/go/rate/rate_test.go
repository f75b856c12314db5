package rate_test

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tally-redis/tally/clients/go/internal/testserver"
	"github.com/tally-redis/tally/clients/go/rate"
)

var pool = testserver.NewPool()

var ctx = context.Background()

func TestMain(m *testing.M) {
	code := m.Run()
	if err := pool.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

func eq(t *testing.T, got, want interface{}) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
}

// within checks lo <= d <= hi.
func within(t *testing.T, what string, d, lo, hi time.Duration) {
	t.Helper()
	if d < lo || d > hi {
		t.Fatalf("%s %v not in [%v, %v]", what, d, lo, hi)
	}
}

func eachServer(t *testing.T, f func(t *testing.T, rdb *redis.Client, key func(string) string)) {
	for _, kind := range testserver.Kinds() {
		for _, protocol := range []int{2, 3} {
			t.Run(fmt.Sprintf("%s/resp%d", kind.Name, protocol), func(t *testing.T) {
				rdb := pool.Get(t, kind).Client(protocol)
				defer rdb.Close()
				f(t, rdb, testserver.Keys())
			})
		}
	}
}

func allow(t *testing.T, f func() (*rate.Result, error)) rate.Result {
	t.Helper()
	res, err := f()
	if err != nil {
		t.Fatal(err)
	}
	return *res
}

// The answers at a rate slow enough (10 an hour: one every 6 minutes) that the time the
// test takes changes nothing but the waits, which are checked against the time that
// passed since the burst began, measured around it.
func TestSemantics(t *testing.T) {
	eachServer(t, func(t *testing.T, rdb *redis.Client, key func(string) string) {
		l := rate.NewLimiter(rdb)
		limit := rate.PerHour(10)
		k := key("subject")
		const T = 6 * time.Minute
		eq(t, allow(t, func() (*rate.Result, error) { return l.AllowN(ctx, k, limit, 0) }),
			rate.Result{Limit: limit, Allowed: 0, Remaining: 10, RetryAfter: -1, ResetAfter: 0})
		start := time.Now()
		eq(t, allow(t, func() (*rate.Result, error) { return l.Allow(ctx, k, limit) }),
			rate.Result{Limit: limit, Allowed: 1, Remaining: 9, RetryAfter: -1, ResetAfter: T})
		eq(t, rdb.Exists(ctx, "rate:"+k).Val(), int64(1))

		res := allow(t, func() (*rate.Result, error) { return l.AllowN(ctx, k, limit, 2) })
		elapsed := time.Since(start)
		within(t, "ResetAfter", res.ResetAfter, 3*T-elapsed, 3*T+time.Millisecond)
		res.ResetAfter = 0
		eq(t, res, rate.Result{Limit: limit, Allowed: 2, Remaining: 7, RetryAfter: -1})

		// More than fits: nothing admitted, nothing written.
		res = allow(t, func() (*rate.Result, error) { return l.AllowN(ctx, k, limit, 8) })
		elapsed = time.Since(start)
		within(t, "RetryAfter", res.RetryAfter, T-elapsed, T+time.Millisecond)
		within(t, "ResetAfter", res.ResetAfter, 3*T-elapsed, 3*T+time.Millisecond)
		eq(t, []int{res.Allowed, res.Remaining}, []int{0, 0})
		// More than a whole burst: the wait redis_rate reports (no wait lets it in).
		res = allow(t, func() (*rate.Result, error) { return l.AllowN(ctx, k, limit, 100) })
		elapsed = time.Since(start)
		within(t, "RetryAfter", res.RetryAfter, 93*T-elapsed, 93*T+time.Millisecond)

		// At most: what fits of what is asked.
		res = allow(t, func() (*rate.Result, error) { return l.AllowAtMost(ctx, k, limit, 5) })
		eq(t, []int{res.Allowed, res.Remaining}, []int{5, 2})
		res = allow(t, func() (*rate.Result, error) { return l.AllowAtMost(ctx, k, limit, 5) })
		elapsed = time.Since(start)
		within(t, "ResetAfter", res.ResetAfter, 10*T-elapsed, 10*T+time.Millisecond)
		eq(t, []interface{}{res.Allowed, res.Remaining, res.RetryAfter}, []interface{}{2, 0, time.Duration(-1)})
		res = allow(t, func() (*rate.Result, error) { return l.AllowAtMost(ctx, k, limit, 5) })
		elapsed = time.Since(start)
		within(t, "RetryAfter", res.RetryAfter, T-elapsed, T+time.Millisecond)
		eq(t, []int{res.Allowed, res.Remaining}, []int{0, 0})
		res = allow(t, func() (*rate.Result, error) { return l.AllowAtMost(ctx, k, limit, 0) })
		within(t, "RetryAfter", res.RetryAfter, T-time.Since(start), T+time.Millisecond)
		eq(t, []int{res.Allowed, res.Remaining}, []int{0, 0})

		if err := l.Reset(ctx, k); err != nil {
			t.Fatal(err)
		}
		eq(t, allow(t, func() (*rate.Result, error) { return l.AllowAtMost(ctx, k, limit, 0) }),
			rate.Result{Limit: limit, Allowed: 0, Remaining: 10, RetryAfter: -1, ResetAfter: 0})
		eq(t, allow(t, func() (*rate.Result, error) { return l.AllowAtMost(ctx, k, limit, 20) }),
			rate.Result{Limit: limit, Allowed: 10, Remaining: 0, RetryAfter: -1, ResetAfter: 10 * T})
	})
}

// Limits that TSTHROTTLE.ALLOW does not take as they are: a period that is not a whole
// number of milliseconds, a burst other than the rate, a burst of 0, a bad rate.
func TestLimits(t *testing.T) {
	eachServer(t, func(t *testing.T, rdb *redis.Client, key func(string) string) {
		l := rate.NewLimiter(rdb)
		// 2 every 2.5 ms: an interval of 1.25 ms, so 4 at once take 5 ms to pay off.
		odd := rate.Limit{Rate: 2, Burst: 4, Period: 2500 * time.Microsecond}
		eq(t, allow(t, func() (*rate.Result, error) { return l.AllowN(ctx, key("odd"), odd, 4) }),
			rate.Result{Limit: odd, Allowed: 4, Remaining: 0, RetryAfter: -1, ResetAfter: 5 * time.Millisecond})
		burst := rate.Limit{Rate: 1, Burst: 3, Period: time.Hour}
		res := allow(t, func() (*rate.Result, error) { return l.AllowN(ctx, key("burst"), burst, 3) })
		eq(t, res, rate.Result{Limit: burst, Allowed: 3, Remaining: 0, RetryAfter: -1, ResetAfter: 3 * time.Hour})
		none := rate.Limit{Rate: 10, Burst: 0, Period: time.Second}
		eq(t, allow(t, func() (*rate.Result, error) { return l.Allow(ctx, key("none"), none) }),
			rate.Result{Limit: none, RetryAfter: 100 * time.Millisecond})
		eq(t, allow(t, func() (*rate.Result, error) { return l.AllowAtMost(ctx, key("none"), none, 0) }),
			rate.Result{Limit: none, RetryAfter: 100 * time.Millisecond})
		eq(t, allow(t, func() (*rate.Result, error) { return l.AllowN(ctx, key("none"), none, 0) }),
			rate.Result{Limit: none, RetryAfter: -1})
		eq(t, rdb.Exists(ctx, "rate:"+key("none")).Val(), int64(0))
		for _, bad := range []rate.Limit{{}, {Rate: 1, Burst: 1}, {Rate: -1, Burst: 1, Period: time.Second}} {
			if _, err := l.Allow(ctx, key("bad"), bad); err == nil || !strings.HasPrefix(err.Error(), "rate: invalid limit") {
				t.Fatalf("%v: %v", bad, err)
			}
		}
		rdb.Set(ctx, "rate:"+key("str"), "1.5", 0)
		if _, err := l.Allow(ctx, key("str"), rate.PerSecond(1)); err == nil || err.Error() != "WRONGTYPE Operation against a key holding the wrong kind of value" {
			t.Fatal(err)
		}
	})
}

// In a cluster every key goes to its own node in one command, no script involved;
// through a ring too.
func TestClusterAndRing(t *testing.T) {
	cl := pool.Cluster(t)
	for _, protocol := range []int{2, 3} {
		t.Run(fmt.Sprintf("cluster/resp%d", protocol), func(t *testing.T) {
			rdb := cl.Client(protocol)
			defer rdb.Close()
			key := testserver.Keys()
			for _, node := range cl.Nodes {
				c := node.Client(2)
				c.ConfigResetStat(ctx)
				c.Close()
			}
			l := rate.NewLimiter(rdb)
			for i := 0; i < 30; i++ {
				k := key(fmt.Sprint(i))
				for j := 0; j < 3; j++ {
					res, err := l.Allow(ctx, k, rate.PerMinute(2))
					if err != nil {
						t.Fatal(err)
					}
					eq(t, res.Allowed, []int{1, 1, 0}[j])
				}
			}
			calls := 0
			for _, node := range cl.Nodes {
				c := node.Client(2)
				stats := c.Info(ctx, "commandstats").Val()
				c.Close()
				if strings.Contains(stats, "cmdstat_eval") {
					t.Fatalf("a script ran on %s", node.Addr())
				}
				var n int
				if i := strings.Index(stats, "cmdstat_tsthrottle.allow:calls="); i >= 0 {
					fmt.Sscanf(stats[i+len("cmdstat_tsthrottle.allow:calls="):], "%d", &n)
				}
				if n == 0 {
					t.Fatalf("no TSTHROTTLE.ALLOW on %s: the keys did not spread", node.Addr())
				}
				calls += n
			}
			eq(t, calls, 90)
		})
	}
	t.Run("ring", func(t *testing.T) {
		var addrs = map[string]string{}
		for i, kind := range testserver.Kinds() {
			addrs[fmt.Sprint("shard", i)] = pool.Get(t, kind).Addr()
		}
		ring := redis.NewRing(&redis.RingOptions{Addrs: addrs})
		defer ring.Close()
		l := rate.NewLimiter(ring)
		key := testserver.Keys()
		for i := 0; i < 10; i++ {
			res, err := l.AllowN(ctx, key(fmt.Sprint(i)), rate.PerMinute(5), 5)
			if err != nil {
				t.Fatal(err)
			}
			eq(t, *res, rate.Result{Limit: rate.PerMinute(5), Allowed: 5, Remaining: 0, RetryAfter: -1, ResetAfter: time.Minute})
		}
	})
}
