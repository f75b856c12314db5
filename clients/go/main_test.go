package tally_test

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"testing"

	"github.com/redis/go-redis/v9"

	tally "github.com/tally-redis/tally/clients/go"
	"github.com/tally-redis/tally/clients/go/internal/testserver"
)

var pool = testserver.NewPool()

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

var ctx = context.Background()

// eachServer runs f once per server kind and protocol (RESP2 and RESP3).
func eachServer(t *testing.T, f func(t *testing.T, rdb *redis.Client, key func(string) string)) {
	for _, kind := range testserver.Kinds() {
		for _, protocol := range []int{2, 3} {
			t.Run(fmt.Sprintf("%s/resp%d", kind.Name, protocol), func(t *testing.T) {
				srv := pool.Get(t, kind)
				rdb := srv.Client(protocol)
				defer rdb.Close()
				f(t, rdb, testserver.Keys())
			})
		}
	}
}

// eq fails the test unless got equals want (reflect.DeepEqual).
func eq(t *testing.T, got, want interface{}) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %#v\nwant %#v", got, want)
	}
}

// val is cmd's value, failing the test on its error.
func val[T any](t *testing.T, cmd *tally.Cmd[T]) T {
	t.Helper()
	v, err := cmd.Result()
	if err != nil {
		t.Fatalf("%s: %v", cmd.Cmd().Args(), err)
	}
	return v
}

// fails checks that err is an error whose text is exactly text.
func fails(t *testing.T, err error, text string) {
	t.Helper()
	if err == nil || err.Error() != text {
		t.Fatalf("got error %v, want %q", err, text)
	}
}
