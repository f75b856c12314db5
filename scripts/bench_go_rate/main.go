// The driver of scripts/bench_go_rate.sh: the server's time per Allow for the Go client's
// rate package (one TSTHROTTLE.ALLOW) against go-redis's redis_rate (EVALSHA of its GCRA
// script), both driven through their own Allow on the same server, a hot key and 100k
// keys, from INFO commandstats after CONFIG RESETSTAT. Built by the script in a scratch
// module that requires redis_rate at a pinned version.
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	redis_rate "github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/tally-redis/tally/clients/go/rate"
)

var (
	addr    = flag.String("addr", "127.0.0.1:6379", "server")
	seconds = flag.Float64("seconds", 1.5, "duration of a measured run")
	rounds  = flag.Int("rounds", 3, "measured runs per row; the best counts")
	workers = flag.Int("c", 50, "concurrent callers")
	keys    = flag.Int("keys", 100000, "keys of the random-key rows")
)

var ctx = context.Background()

type allowFunc func(key string) error

// usecPerCall is the usec_per_call and calls of cmdstat_<name>.
func usecPerCall(rdb *redis.Client, name string) (float64, int64, error) {
	stats, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, 0, err
	}
	m := regexp.MustCompile(`cmdstat_` + regexp.QuoteMeta(name) + `:calls=(\d+),usec=\d+,usec_per_call=([0-9.]+)`).FindStringSubmatch(stats)
	if m == nil {
		return 0, 0, fmt.Errorf("no cmdstat_%s in INFO commandstats", name)
	}
	calls, _ := strconv.ParseInt(m[1], 10, 64)
	usec, _ := strconv.ParseFloat(m[2], 64)
	return usec, calls, nil
}

// measure runs allow from every worker for the run's duration, after CONFIG RESETSTAT:
// the server's usec per call of the command `name` and the calls per second.
func measure(rdb *redis.Client, name string, allow allowFunc, key func(r *rand.Rand) string) (float64, float64, error) {
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		return 0, 0, err
	}
	var failed atomic.Value
	var wg sync.WaitGroup
	deadline := time.Now().Add(time.Duration(*seconds * float64(time.Second)))
	began := time.Now()
	for w := 0; w < *workers; w++ {
		wg.Add(1)
		go func(seed int64) {
			defer wg.Done()
			r := rand.New(rand.NewSource(seed))
			for time.Now().Before(deadline) {
				if err := allow(key(r)); err != nil {
					failed.Store(err)
					return
				}
			}
		}(int64(w) + time.Now().UnixNano())
	}
	wg.Wait()
	took := time.Since(began)
	if err, ok := failed.Load().(error); ok {
		return 0, 0, err
	}
	usec, calls, err := usecPerCall(rdb, name)
	return usec, float64(calls) / took.Seconds(), err
}

func main() {
	flag.Parse()
	opts := &redis.Options{Addr: *addr, PoolSize: *workers}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	ours := rate.NewLimiter(rdb)
	theirs := redis_rate.NewLimiter(rdb)
	limit := rate.PerMinute(30)
	theirLimit := redis_rate.PerMinute(30)
	sides := []struct {
		name, cmd, prefix string
		allow             allowFunc
	}{
		{"rate", "tsthrottle.allow", "t:", func(key string) error { _, err := ours.Allow(ctx, key, limit); return err }},
		{"redis_rate", "evalsha", "l:", func(key string) error { _, err := theirs.Allow(ctx, key, theirLimit); return err }},
	}
	rows := []struct {
		name string
		key  func(prefix string) func(r *rand.Rand) string
	}{
		{"hot key", func(prefix string) func(*rand.Rand) string {
			return func(*rand.Rand) string { return prefix + "hot" }
		}},
		{fmt.Sprintf("%dk keys", *keys/1000), func(prefix string) func(*rand.Rand) string {
			return func(r *rand.Rand) string { return prefix + strconv.Itoa(r.Intn(*keys)) }
		}},
	}
	// Warm-up: redis_rate's script loaded (its first EVALSHA falls back to EVAL), the
	// connections open.
	for _, side := range sides {
		for i := 0; i < 1000; i++ {
			if err := side.allow(side.prefix + "warm"); err != nil {
				fmt.Fprintln(os.Stderr, "bench:", side.name, err)
				os.Exit(1)
			}
		}
	}
	fmt.Printf("%-14s %12s %14s %7s %12s %14s\n", "row", "rate us", "redis_rate us", "ratio", "rate calls/s", "redis_rate c/s")
	for _, row := range rows {
		best := make([]float64, len(sides))
		rps := make([]float64, len(sides))
		// Alternate the sides, so both see the same machine over the rounds.
		for round := 0; round < *rounds; round++ {
			for i, side := range sides {
				usec, perSecond, err := measure(rdb, side.cmd, side.allow, row.key(side.prefix))
				if err != nil {
					fmt.Fprintln(os.Stderr, "bench:", side.name, row.name, err)
					os.Exit(1)
				}
				if round == 0 || usec < best[i] {
					best[i], rps[i] = usec, perSecond
				}
			}
		}
		fmt.Printf("%-14s %12.2f %14.2f %7.2f %12.0f %14.0f\n", row.name, best[0], best[1], best[0]/best[1], rps[0], rps[1])
	}
}
