package tally_test

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	tally "github.com/tally-redis/tally/clients/go"
	"github.com/tally-redis/tally/clients/go/internal/testserver"
)

// movedCount is how many MOVED redirections the cluster's primaries have answered.
func movedCount(t *testing.T, cl *testserver.Cluster) int {
	total := 0
	for _, node := range cl.Nodes {
		c := node.Client(2)
		stats := c.Info(ctx, "errorstats").Val()
		c.Close()
		if m := regexp.MustCompile(`errorstat_MOVED:count=(\d+)`).FindStringSubmatch(stats); m != nil {
			n, _ := strconv.Atoi(m[1])
			total += n
		}
	}
	return total
}

// A three-primary cluster: every handle reaches its key's primary directly (no MOVED),
// the multi-key commands route by their first declared key, keys of two slots are
// refused with the server's CROSSSLOT and write nothing.
func TestCluster(t *testing.T) {
	cl := pool.Cluster(t)
	for _, protocol := range []int{2, 3} {
		t.Run(fmt.Sprintf("resp%d", protocol), func(t *testing.T) {
			rdb := cl.Client(protocol)
			defer rdb.Close()
			key := testserver.Keys()
			tl := tally.New(rdb)
			if err := rdb.Ping(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			moved := movedCount(t, cl)
			nodes := map[string]bool{}
			for i := 0; i < 30; i++ {
				k := key(fmt.Sprint("c", i))
				eq(t, val(t, tl.Counter(k).IncrBy(ctx, int64(i+1))), int64(i+1))
				eq(t, val(t, tl.Counter(k).Limit(ctx, 1, []tally.WindowLimit{{Window: time.Minute, Max: int64(i + 1)}})).Allowed, false)
				eq(t, val(t, tl.Counter(k).Sum(ctx, []time.Duration{time.Minute})), []int64{int64(i + 1)})
				eq(t, val(t, tl.Throttle(k+":t").Allow(ctx, 0, 1, time.Minute)).Allowed, true)
				node, err := rdb.MasterForKey(ctx, k)
				if err != nil {
					t.Fatal(err)
				}
				nodes[node.Options().Addr] = true
			}
			eq(t, len(nodes), 3)

			run := strings.TrimPrefix(key(""), "test:")
			board := tl.Leaderboard("{likes:" + run + "}")
			eq(t, val(t, board.IncrBy(ctx, []tally.Entry{{Member: "a", Score: 2}, {Member: "b", Score: 1}})), []int64{2, 1})
			eq(t, val(t, board.Top(ctx, 10)), []tally.Entry{{Member: "a", Score: 2}, {Member: "b", Score: 1}})
			if err := tl.Leaderboard("likes:"+run).Incr(ctx, "a", 1).Err(); err == nil || !strings.Contains(err.Error(), "hash tag") {
				t.Fatalf("a board without a hash tag: %v", err)
			}

			user, ip := "{u:"+run+"}:user", "{u:"+run+"}:ip"
			limits := []tally.KeyLimit{
				{Key: user, Windows: []tally.WindowLimit{{Window: time.Minute, Max: 1}}},
				{Key: ip, Windows: []tally.WindowLimit{{Window: time.Minute, Max: 5}}},
			}
			eq(t, val(t, tl.MLimit(ctx, 1, limits)), tally.MultiDecision{Allowed: true, Sums: map[string][]int64{user: {1}, ip: {1}}})
			eq(t, val(t, tl.MLimit(ctx, 1, limits)).Allowed, false)
			eq(t, val(t, tl.MSum(ctx, []string{user, ip, "{u:" + run + "}:none"}, []time.Duration{time.Minute, time.Hour})), []int64{2, 2})
			a, b := "a:"+run, "b:"+run
			for i := 0; slotOf(a) == slotOf(b); i++ {
				b = fmt.Sprintf("b%d:%s", i, run)
			}
			crossslot := "CROSSSLOT Keys in request don't hash to the same slot"
			fails(t, tl.MLimit(ctx, 1, []tally.KeyLimit{{Key: a, Windows: limits[0].Windows}, {Key: b, Windows: limits[0].Windows}}).Err(), crossslot)
			eq(t, rdb.Exists(ctx, a).Val()+rdb.Exists(ctx, b).Val(), int64(0))
			fails(t, tl.MSum(ctx, []string{a, b}, []time.Duration{time.Minute}).Err(), crossslot)

			lat, lat2, slow := "lat{"+run+"}", "lat2{"+run+"}", "slow{"+run+"}"
			eq(t, val(t, tl.Stats(lat).Add(ctx, []float64{5, 7}, tally.WithReport(tally.Report{Key: slow, Member: "/"}))), int64(2))
			eq(t, val(t, tl.Stats(lat2).Add(ctx, []float64{9}, tally.WithReport(tally.Report{Key: slow, Member: "/2", By: "max"}))), int64(1))
			two := tally.Window(2 * time.Hour)
			eq(t, val(t, tl.Stats(lat).Get(ctx, two)).Mean, 6.0)
			eq(t, val(t, tl.MGet(ctx, []string{lat, lat2}, two)).Max, 9.0)
			eq(t, val(t, tl.MQuantile(ctx, []string{lat, lat2}, []float64{0, 1}, two)), []float64{5, 9})
			eq(t, rdb.ZRevRange(ctx, slow, 0, -1).Val(), []string{"/2", "/"})

			// A pipeline on the cluster client splits by node.
			pipe := rdb.Pipeline()
			pt := tally.New(pipe)
			var cmds []*tally.Cmd[[]int64]
			for i := 0; i < 30; i++ {
				cmds = append(cmds, pt.Counter(key(fmt.Sprint("c", i))).Sum(ctx, []time.Duration{time.Hour}))
			}
			if _, err := pipe.Exec(ctx); err != nil {
				t.Fatal(err)
			}
			for i, c := range cmds {
				eq(t, val(t, c), []int64{int64(i + 1)})
			}
			eq(t, movedCount(t, cl), moved)
		})
	}
}

// A ring shards keys over independent servers (one of each kind here).
func TestRing(t *testing.T) {
	addrs := map[string]string{}
	for i, kind := range testserver.Kinds() {
		addrs[fmt.Sprint("shard", i)] = pool.Get(t, kind).Addr()
	}
	ring := redis.NewRing(&redis.RingOptions{Addrs: addrs})
	defer ring.Close()
	tl := tally.New(ring)
	key := testserver.Keys()
	for i := 0; i < 20; i++ {
		k := key(fmt.Sprint(i))
		eq(t, val(t, tl.Counter(k).IncrBy(ctx, int64(i))), int64(i))
		eq(t, val(t, tl.Counter(k).Sum(ctx, []time.Duration{time.Minute})), []int64{int64(i)})
	}
}

// slotOf is the cluster hash slot of key (CRC16/XMODEM of its hash tag or whole name).
func slotOf(key string) int {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if end := strings.IndexByte(key[open+1:], '}'); end > 0 {
			key = key[open+1 : open+1+end]
		}
	}
	crc := uint16(0)
	for _, c := range []byte(key) {
		crc ^= uint16(c) << 8
		for i := 0; i < 8; i++ {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % 16384
}
