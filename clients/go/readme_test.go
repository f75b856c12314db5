package tally_test

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tally-redis/tally/clients/go/internal/testserver"
)

// README.md's two programs, as a user copies them: built in a scratch module that
// the README's install lines make, their server address pointed at a fresh server of
// each kind (the only change), the quick start's output compared with the README's, the handler's
// answers with the README's curl loop.
func TestReadme(t *testing.T) {
	if testing.Short() {
		t.Skip("README programs: not in -short")
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```(go|text|sh)\n(.*?)```").FindAllStringSubmatch(string(readme), -1)
	var programs, texts, shells []string
	for _, b := range blocks {
		switch b[1] {
		case "go":
			programs = append(programs, b[2])
		case "text":
			texts = append(texts, b[2])
		case "sh":
			shells = append(shells, b[2])
		}
	}
	if len(programs) != 2 || len(texts) != 1 {
		t.Fatalf("README: %d go blocks and %d text blocks, want 2 and 1", len(programs), len(texts))
	}
	wantOutput := texts[0]
	m := regexp.MustCompile(`(?m)^\$ for i in .*\n(.*)\n`).FindStringSubmatch(shells[len(shells)-1])
	if m == nil {
		t.Fatal("README: no curl loop")
	}
	wantCodes := strings.Fields(m[1])

	// The scratch module is made by the README's install lines, /path/to/tally being
	// this repository.
	dir := t.TempDir()
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	goEnv := append(os.Environ(), "GOFLAGS=-mod=mod -buildvcs=false")
	gocmd := func(args ...string) {
		t.Helper()
		cmd := exec.Command(goTool, args...)
		cmd.Dir, cmd.Env = dir, goEnv
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	gocmd("mod", "init", "readme")
	install := 0
	for _, line := range strings.Split(shells[0], "\n") {
		if fields := strings.Fields(strings.SplitN(line, "#", 2)[0]); len(fields) > 1 && fields[0] == "go" {
			for i := range fields {
				fields[i] = strings.ReplaceAll(fields[i], "/path/to/tally", repo)
			}
			gocmd(fields[1:]...)
			install++
		}
	}
	if install != 2 {
		t.Fatalf("README: %d go commands to install, want 2", install)
	}
	write := func(name, text string) {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i, name := range []string{"quickstart", "server"} {
		src := programs[i]
		for _, r := range [][2]string{
			{`"localhost:6379"`, `os.Getenv("README_REDIS")`},
			{`"localhost:8080"`, `os.Getenv("README_HTTP")`},
		} {
			src = strings.ReplaceAll(src, r[0], r[1])
		}
		if !strings.Contains(src, "\t\"os\"\n") {
			src = strings.Replace(src, "import (\n", "import (\n\t\"os\"\n", 1)
		}
		write(filepath.Join(name, "main.go"), src)
		gocmd("build", "-o", filepath.Join(dir, name+".bin"), "./"+name)
	}

	for _, kind := range testserver.Kinds() {
		t.Run(kind.Name, func(t *testing.T) {
			srv, err := testserver.Start(kind.Name+"-readme", kind.Binary, 0)
			if err != nil {
				testserver.Missing(t, err.Error())
			}
			defer func() {
				if err := srv.Stop(); err != nil {
					t.Error(err)
				}
			}()
			env := append(os.Environ(), "README_REDIS="+srv.Addr())

			run := exec.Command(filepath.Join(dir, "quickstart.bin"))
			run.Env = env
			out, err := run.CombinedOutput()
			if err != nil || string(out) != wantOutput {
				t.Fatalf("quick start: %v\n%s\nwant\n%s", err, out, wantOutput)
			}

			port, err := testserver.FreePort()
			if err != nil {
				t.Fatal(err)
			}
			addr := fmt.Sprintf("127.0.0.1:%d", port)
			server := exec.Command(filepath.Join(dir, "server.bin"))
			server.Env = append(env, "README_HTTP="+addr)
			if err := server.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = server.Process.Kill(); _ = server.Wait() }()
			for deadline := time.Now().Add(10 * time.Second); ; {
				if c, err := net.Dial("tcp", addr); err == nil {
					c.Close()
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the README's server does not listen")
				}
				time.Sleep(20 * time.Millisecond)
			}
			var codes, remaining []string
			retry := ""
			for range wantCodes {
				resp, err := http.Get("http://" + addr + "/")
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				codes = append(codes, fmt.Sprint(resp.StatusCode))
				remaining = append(remaining, resp.Header.Get("RateLimit-Remaining"))
				retry = resp.Header.Get("Retry-After")
			}
			eq(t, codes, wantCodes)
			eq(t, remaining, []string{"2", "1", "0", "0"})
			eq(t, retry, "20")
		})
	}
}
