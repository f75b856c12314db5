// Package rate is a drop-in for go-redis's redis_rate (v10) on tally: the same Limit,
// PerSecond, PerMinute, PerHour, NewLimiter, Allow, AllowN, AllowAtMost, Reset and
// Result, with the same semantics (GCRA: Rate events per Period, Burst of them at
// once), each call one TSTHROTTLE.ALLOW instead of a Lua script. Without Lua a key
// can live on any node of a cluster, and a replica holds exactly the primary's state.
//
// Moving from redis_rate is a change of import path:
//
//	import redis_rate "github.com/tally-redis/tally/clients/go/rate"
//
// Keys are named as redis_rate names them ("rate:" + key), so ACL key patterns stay
// valid. Their value differs (tally stores the theoretical arrival time in Unix
// nanoseconds where redis_rate's script stores seconds since 2017 as a float): a key
// redis_rate's script wrote answers WRONGTYPE to this package until it expires (at
// most one burst window after its last request), so switch a limiter over once its
// keys have expired or after Reset of each.
//
// Times in a Result are whole milliseconds, rounded up (redis_rate's have
// microseconds): waiting RetryAfter is always enough.
package rate

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

const redisPrefix = "rate:"

// rediser is what a Limiter needs of a go-redis client: *redis.Client,
// *redis.ClusterClient, *redis.Ring (any redis.UniversalClient) and redis.Pipeliner
// have both methods.
type rediser interface {
	Process(ctx context.Context, cmd redis.Cmder) error
	Del(ctx context.Context, keys ...string) *redis.IntCmd
}

// Limit is Rate events per Period, Burst of them at once.
type Limit struct {
	Rate   int
	Burst  int
	Period time.Duration
}

func (l Limit) String() string {
	return fmt.Sprintf("%d req/%s (burst %d)", l.Rate, fmtDur(l.Period), l.Burst)
}

// IsZero reports whether l is the zero Limit.
func (l Limit) IsZero() bool {
	return l == Limit{}
}

func fmtDur(d time.Duration) string {
	switch d {
	case time.Second:
		return "s"
	case time.Minute:
		return "m"
	case time.Hour:
		return "h"
	}
	return d.String()
}

// PerSecond is rate events a second, in bursts of up to rate.
func PerSecond(rate int) Limit {
	return Limit{Rate: rate, Period: time.Second, Burst: rate}
}

// PerMinute is rate events a minute, in bursts of up to rate.
func PerMinute(rate int) Limit {
	return Limit{Rate: rate, Period: time.Minute, Burst: rate}
}

// PerHour is rate events an hour, in bursts of up to rate.
func PerHour(rate int) Limit {
	return Limit{Rate: rate, Period: time.Hour, Burst: rate}
}

// Limiter controls how frequently events are allowed to happen.
type Limiter struct {
	rdb rediser
}

// NewLimiter returns a new Limiter.
func NewLimiter(rdb rediser) *Limiter {
	return &Limiter{rdb: rdb}
}

// Result is the answer of a Limiter call.
type Result struct {
	// Limit is the limit that was used to obtain this result.
	Limit Limit

	// Allowed is the number of events that may happen at time now.
	Allowed int

	// Remaining is the maximum number of requests that could be permitted
	// instantaneously for this key given the current state (0 when the call was
	// refused).
	Remaining int

	// RetryAfter is the time until the next request will be permitted: -1 unless the
	// rate limit has been exceeded.
	RetryAfter time.Duration

	// ResetAfter is the time until the limiter returns to its initial state for the
	// key, when Limit and Remaining will be equal.
	ResetAfter time.Duration
}

// Allow is a shortcut for AllowN(ctx, key, limit, 1).
func (l Limiter) Allow(ctx context.Context, key string, limit Limit) (*Result, error) {
	return l.AllowN(ctx, key, limit, 1)
}

// AllowN reports whether n events may happen at time now: all n are admitted, or none.
// n = 0 only reads the state.
func (l Limiter) AllowN(ctx context.Context, key string, limit Limit, n int) (*Result, error) {
	g, err := gcraOf(limit)
	if err != nil {
		return nil, err
	}
	if g.empty {
		return g.nothingFits(n), nil
	}
	r, err := l.allow(ctx, key, g, n)
	if err != nil {
		return nil, err
	}
	if !r.allowed {
		return g.refused(r, g.interval*time.Duration(n)), nil
	}
	return &Result{Limit: limit, Allowed: n, Remaining: r.remaining, RetryAfter: -1, ResetAfter: r.resetAfter}, nil
}

// atMostTries bounds AllowAtMost's calls: under contention a second call may find
// less room than the first reported; it then tries again with what is left.
const atMostTries = 4

// AllowAtMost reports whether at most n events may happen at time now: it admits
// min(n, what fits now) and answers how many in Allowed. It sends one
// TSTHROTTLE.ALLOW when all n fit; otherwise a second one for what the first found
// room for (a third or fourth only when other clients took that room in between).
func (l Limiter) AllowAtMost(ctx context.Context, key string, limit Limit, n int) (*Result, error) {
	g, err := gcraOf(limit)
	if err != nil {
		return nil, err
	}
	if g.empty {
		// redis_rate: less than one request fits, so the wait is one interval.
		return g.nothingFits(1), nil
	}
	want := n
	var r reply
	for try := 0; try < atMostTries; try++ {
		if r, err = l.allow(ctx, key, g, want); err != nil {
			return nil, err
		}
		if r.allowed && (want > 0 || r.remaining >= 1) {
			return &Result{Limit: limit, Allowed: want, Remaining: r.remaining, RetryAfter: -1, ResetAfter: r.resetAfter}, nil
		}
		// Refused (or a check with no room): r.remaining requests of 1 fit now.
		if r.remaining < 1 || want == 0 {
			break
		}
		want = r.remaining
	}
	// Nothing fits: the wait is until one request does.
	return g.refused(r, g.interval), nil
}

// Reset gets a key and reset all limitations and previous usages
func (l *Limiter) Reset(ctx context.Context, key string) error {
	return l.rdb.Del(ctx, redisPrefix+key).Err()
}

// gcra is a Limit as TSTHROTTLE.ALLOW takes it.
type gcra struct {
	limit    Limit
	maxBurst int64
	count    int64
	periodMs int64
	interval time.Duration // period / rate, as the server computes it
	tau      time.Duration // interval * burst
	empty    bool          // Burst < 1: no request ever fits
}

// gcraOf maps redis_rate's limit onto TSTHROTTLE's arguments. redis_rate admits a
// request when its new TAT minus Burst intervals is not after now; TSTHROTTLE.ALLOW
// when it minus (max_burst + 1) intervals is not: max_burst = Burst - 1. TSTHROTTLE
// takes the period in whole milliseconds: a Period that is not one is scaled up with
// the count, which keeps the interval (period / count) the same.
func gcraOf(limit Limit) (gcra, error) {
	g := gcra{limit: limit}
	if limit.Rate <= 0 || limit.Period <= 0 {
		return g, fmt.Errorf("rate: invalid limit %v: Rate and Period must be positive", limit)
	}
	ns := int64(limit.Period)
	div := gcd(ns, int64(time.Millisecond))
	scale := int64(time.Millisecond) / div
	g.periodMs = ns / div
	g.count = int64(limit.Rate) * scale
	if g.count/scale != int64(limit.Rate) {
		return g, fmt.Errorf("rate: invalid limit %v: out of range", limit)
	}
	g.interval = time.Duration(ns / int64(limit.Rate))
	if limit.Burst < 1 {
		g.empty = true
		return g, nil
	}
	g.maxBurst = int64(limit.Burst) - 1
	g.tau = g.interval * time.Duration(limit.Burst)
	return g, nil
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// nothingFits is redis_rate's answer for a Burst below 1 (its window holds no request,
// so it never writes): a check is allowed 0, anything more is refused. No command is
// sent.
func (g gcra) nothingFits(n int) *Result {
	if n <= 0 {
		return &Result{Limit: g.limit, RetryAfter: -1}
	}
	return &Result{Limit: g.limit, RetryAfter: g.interval * time.Duration(n)}
}

// refused is redis_rate's answer to a refused request of weight `increment` (in
// intervals): 0 allowed, 0 remaining, the wait until its new TAT minus the burst
// window is now. TSTHROTTLE.ALLOW answers that wait itself (retry_after_ms) except
// for a request heavier than a whole burst (-1): then it is reset_after + increment -
// tau, which redis_rate reports though no wait lets such a request through.
func (g gcra) refused(r reply, increment time.Duration) *Result {
	retry := r.resetAfter + increment - g.tau
	if r.retryAfter >= 0 && increment == g.interval*time.Duration(r.quantity) {
		retry = r.retryAfter
	}
	if retry < 0 {
		retry = 0
	}
	return &Result{Limit: g.limit, RetryAfter: retry, ResetAfter: r.resetAfter}
}

type reply struct {
	quantity   int
	allowed    bool
	remaining  int
	retryAfter time.Duration
	resetAfter time.Duration
}

func (l Limiter) allow(ctx context.Context, key string, g gcra, n int) (reply, error) {
	cmd := redis.NewIntSliceCmd(ctx, "TSTHROTTLE.ALLOW", redisPrefix+key,
		g.maxBurst, g.count, strconv.FormatInt(g.periodMs, 10)+"ms", "QUANTITY", n)
	cmd.SetFirstKeyPos(1)
	_ = l.rdb.Process(ctx, cmd)
	v, err := cmd.Result()
	if err != nil {
		return reply{}, err
	}
	if len(v) != 5 {
		return reply{}, fmt.Errorf("rate: unexpected TSTHROTTLE.ALLOW reply %v", v)
	}
	r := reply{
		quantity:   n,
		allowed:    v[0] == 1,
		remaining:  int(v[2]),
		retryAfter: time.Duration(v[3]) * time.Millisecond,
		resetAfter: time.Duration(v[4]) * time.Millisecond,
	}
	if v[3] < 0 {
		r.retryAfter = -1
	}
	return r, nil
}
