package tally

import (
	"context"
	"strconv"
	"time"
)

// Throttle is one limited subject (TSTHROTTLE.*): its key, a native string, holds when
// the subject's earlier requests are paid off, and expires once it is back to a full
// burst.
type Throttle struct {
	t   *Tally
	key string
}

// Key is the subject's key.
func (th *Throttle) Key() string { return th.key }

// ThrottleDecision is TSTHROTTLE.ALLOW's answer. Times are rounded up to the
// millisecond: waiting that long is enough.
type ThrottleDecision struct {
	// Allowed: the request was admitted (and stored).
	Allowed bool
	// Limit is maxBurst + 1, the requests that fit at once.
	Limit int64
	// Remaining is how many more requests of 1 fit now.
	Remaining int64
	// RetryAfter is 0 when allowed; else the wait before the same request fits, or
	// Never when its quantity is more than a whole burst.
	RetryAfter time.Duration
	// ResetAfter is the wait until the subject is back to a full burst.
	ResetAfter time.Duration
}

func parseThrottle(v interface{}) (ThrottleDecision, error) {
	var d ThrottleDecision
	cells, err := parseInts(v)
	if err != nil || len(cells) != 5 {
		return d, errShape
	}
	d.Allowed = cells[0] == 1
	d.Limit = cells[1]
	d.Remaining = cells[2]
	d.RetryAfter = retryAfter(cells[3])
	d.ResetAfter = time.Duration(cells[4]) * time.Millisecond
	return d, nil
}

// Allow is TSTHROTTLE.ALLOW: it admits a request at count per period with bursts of
// maxBurst beyond it (maxBurst + 1 fit at once, then one more every period / count),
// by the generic cell rate algorithm. A refused request writes nothing. Options:
// Quantity (default 1; 0 only checks), At.
func (th *Throttle) Allow(ctx context.Context, maxBurst, count int64, period time.Duration, opts ...Option) *Cmd[ThrottleDecision] {
	// The period goes with its unit: the server refuses a bare number there.
	ms, err := millis(period)
	call := newCall("TSTHROTTLE.ALLOW", th.key, maxBurst, count, strconv.FormatInt(ms, 10)+"ms")
	call.fail(err)
	o := call.options(opts, "Quantity", "At")
	if o.quantity != nil {
		call.add("QUANTITY", *o.quantity)
	}
	call.at(o)
	return send(ctx, th.t, call, parseThrottle)
}
