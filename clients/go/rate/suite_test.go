package rate_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/tally-redis/tally/clients/go/internal/testserver"
)

// redis_rate's own test suite, fetched with the Go toolchain at a pinned version (its
// go.sum hash checked here; the go command checks it against the checksum database
// too), never kept in the repository. Its *_test.go files are copied into a scratch
// module with their import of redis_rate turned into this package and their server
// address into a server under test, compiled once, and run against every server kind.
const (
	redisRateModule  = "github.com/go-redis/redis_rate/v10"
	redisRateVersion = "v10.0.1"
	redisRateSum     = "h1:calPxi7tVlxojKunJwQ72kwfozdy25RjA0bCj1h0MUo="
)

// suiteNiceness is the niceness of redis_rate's suite and its server.
const suiteNiceness = -10

// Tests of the suite left out, with the reason; none today: every test and the
// example run (its two benchmarks too, once each, with -benchtime=1x).
var leftOut = map[string]string{}

func goTool() string {
	if p := filepath.Join(runtime.GOROOT(), "bin", "go"); fileExists(p) {
		return p
	}
	return "go"
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// fetchRedisRate downloads the pinned redis_rate into the module cache: its directory.
func fetchRedisRate(t *testing.T) string {
	t.Helper()
	out, err := exec.Command(goTool(), "mod", "download", "-json", redisRateModule+"@"+redisRateVersion).Output()
	if err != nil {
		testserver.Missing(t, fmt.Sprintf("go mod download %s@%s: %v %s", redisRateModule, redisRateVersion, err, out))
	}
	var mod struct{ Dir, Sum, Error string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Error != "" {
		t.Fatalf("go mod download: %v %s", err, mod.Error)
	}
	if mod.Sum != redisRateSum {
		t.Fatalf("%s@%s has hash %s, pinned %s", redisRateModule, redisRateVersion, mod.Sum, redisRateSum)
	}
	return mod.Dir
}

// scratch writes the suite's module: redis_rate's tests on this package.
func scratch(t *testing.T, src string) string {
	t.Helper()
	dir := t.TempDir()
	here, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"rate_test.go", "example_test.go"} {
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		for _, r := range [][2]string{
			{`"github.com/go-redis/redis_rate/v10"`, `redis_rate "github.com/tally-redis/tally/clients/go/rate"`},
			{`"server0": ":6379"`, `"server0": os.Getenv("REDIS_RATE_ADDR")`},
			{`Addr: "localhost:6379"`, `Addr: os.Getenv("REDIS_RATE_ADDR")`},
			{"import (\n", "import (\n\t\"os\"\n"},
		} {
			if !strings.Contains(text, r[0]) {
				continue
			}
			text = strings.Replace(text, r[0], r[1], 1)
		}
		if !strings.Contains(text, `redis_rate "github.com/tally-redis/tally/clients/go/rate"`) {
			t.Fatalf("%s: no import of redis_rate to rewrite", name)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// redis_rate's own requirements (testify at its version) plus this module in place.
	theirs, err := os.ReadFile(filepath.Join(src, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	var requires []string
	for _, m := range regexp.MustCompile(`(?m)^\s+(\S+) (v\S+)`).FindAllStringSubmatch(string(theirs), -1) {
		if m[1] != "github.com/redis/go-redis/v9" {
			requires = append(requires, m[1]+" "+m[2])
		}
	}
	gomod := fmt.Sprintf("module redisratesuite\n\ngo 1.22\n\nrequire (\n\tgithub.com/tally-redis/tally/clients/go v0.0.0\n\t%s\n)\n\nreplace github.com/tally-redis/tally/clients/go => %s\n",
		strings.Join(requires, "\n\t"), here)
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644); err != nil {
		t.Fatal(err)
	}
	var sums []byte
	for _, f := range []string{filepath.Join(src, "go.sum"), filepath.Join(here, "go.sum")} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sums = append(sums, b...)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.sum"), sums, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestRedisRateSuite(t *testing.T) {
	if testing.Short() {
		t.Skip("redis_rate's suite: not in -short")
	}
	dir := scratch(t, fetchRedisRate(t))
	// Resolve the scratch module's requirements (hashes from the two go.sum files,
	// anything missing checked against the checksum database) and compile once.
	env := append(os.Environ(), "GOFLAGS=-mod=mod -buildvcs=false")
	build := exec.Command(goTool(), "test", "-c", "-o", "suite.test", ".")
	build.Dir, build.Env = dir, env
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building redis_rate's suite: %v\n%s", err, out)
	}
	skip := ""
	if len(leftOut) > 0 {
		var names []string
		for name := range leftOut {
			names = append(names, name)
		}
		skip = "^(" + strings.Join(names, "|") + ")$"
	}
	for _, kind := range testserver.Kinds() {
		t.Run(kind.Name, func(t *testing.T) {
			// The suite checks its replies within 10 ms of what an instantaneous sequence
			// of calls answers (its waits are of 100 ms to 1 s), on the server's clock:
			// a client or server kept off the CPU for longer between two calls fails it,
			// on tally as on redis_rate's own script. On a loaded machine (make test on 2
			// shared cores), its server and its binary run at a raised priority, which
			// changes nothing else (where raising needs root and there is none, at the
			// default).
			srv, err := testserver.StartNice(kind.Name+"-redis-rate", kind.Binary, suiteNiceness)
			if err != nil {
				testserver.Missing(t, err.Error())
			}
			defer func() {
				if err := srv.Stop(); err != nil {
					t.Error(err)
				}
			}()
			args := []string{"-test.v", "-test.count=1", "-test.bench=.", "-test.benchtime=1x"}
			if skip != "" {
				args = append(args, "-test.skip="+skip)
			}
			argv := testserver.Nice(suiteNiceness, append([]string{filepath.Join(dir, "suite.test")}, args...)...)
			run := exec.Command(argv[0], argv[1:]...)
			run.Dir = dir
			run.Env = append(os.Environ(), "REDIS_RATE_ADDR="+srv.Addr())
			out, err := run.CombinedOutput()
			passed, failed := 0, 0
			sc := bufio.NewScanner(bytes.NewReader(out))
			for sc.Scan() {
				line := strings.TrimSpace(sc.Text())
				switch {
				case strings.HasPrefix(line, "--- PASS"):
					passed++
				case strings.HasPrefix(line, "--- FAIL"):
					failed++
				}
			}
			benches := regexp.MustCompile(`(?m)^Benchmark\S+\s+1\s+\d+ ns/op`).FindAll(out, -1)
			t.Logf("redis_rate %s's suite on %s: %d of %d tests and examples pass, %d of 2 benchmarks ran",
				redisRateVersion, kind.Name, passed, passed+failed, len(benches))
			if err != nil || failed > 0 || passed == 0 {
				t.Fatalf("redis_rate's suite failed on %s: %v\n%s", kind.Name, err, out)
			}
		})
	}
}
