// Package testserver starts real servers with the tally module loaded, for the tests.
//
// TALLY_MODULE is the module to load (default: the repository's release build),
// TALLY_SERVERS the servers as "name=path,name=path" (default: redis=/usr/bin/redis-server;
// make go-test sets both). Each test binary starts each server kind once, on a free
// port, in a directory of its own, when a test first asks for it; Stop ends them all.
// Every test uses keys of its own.
package testserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Module is the tally module the servers load.
func Module() string {
	if m := os.Getenv("TALLY_MODULE"); m != "" {
		return m
	}
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "..", "target", "release", "libtally.so")
}

// Kind is one server binary under test.
type Kind struct {
	Name   string
	Binary string
}

// Kinds are the servers of TALLY_SERVERS, in order.
func Kinds() []Kind {
	spec := os.Getenv("TALLY_SERVERS")
	if spec == "" {
		spec = "redis=/usr/bin/redis-server"
	}
	var kinds []Kind
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if name, path, ok := strings.Cut(item, "="); ok {
			kinds = append(kinds, Kind{Name: name, Binary: path})
		}
	}
	return kinds
}

// Missing fails the test under CI and skips it elsewhere: a missing server or module.
func Missing(t testing.TB, what string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatal(what)
	}
	t.Skip(what)
}

// Server is one server process with the module loaded.
type Server struct {
	Name string
	Port int
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return fmt.Sprintf("127.0.0.1:%d", s.Port) }

// Client is a new client of the server (protocol 2 or 3; 0 is go-redis's default, 3).
func (s *Server) Client(protocol int) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: s.Addr(), Protocol: protocol})
}

// FreePort is a port nothing listens on now.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Start starts binary with the module on port (0: a free one) and extra args, and
// waits until it answers PING.
func Start(name, binary string, port int, args ...string) (*Server, error) {
	return start(name, binary, port, 0, args)
}

// StartNice is Start with the server's niceness set to niceness (through nice(1)); a
// niceness below 0 needs root, and without it the server runs at the default.
func StartNice(name, binary string, niceness int, args ...string) (*Server, error) {
	return start(name, binary, 0, niceness, args)
}

// Nice is the command line that runs argv at niceness (unchanged for 0, or when there
// is no nice(1)).
func Nice(niceness int, argv ...string) []string {
	if niceness == 0 {
		return argv
	}
	nice, err := exec.LookPath("nice")
	if err != nil {
		return argv
	}
	return append([]string{nice, "-n", fmt.Sprint(niceness)}, argv...)
}

func start(name, binary string, port, niceness int, args []string) (*Server, error) {
	if st, err := os.Stat(binary); err != nil || st.IsDir() {
		return nil, fmt.Errorf("no server binary %s for %s", binary, name)
	}
	if _, err := os.Stat(Module()); err != nil {
		return nil, fmt.Errorf("no module at %s (make build)", Module())
	}
	var err error
	if port == 0 {
		if port, err = FreePort(); err != nil {
			return nil, err
		}
	}
	dir, err := os.MkdirTemp("", "tally-go-"+name+"-")
	if err != nil {
		return nil, err
	}
	logFile, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	argv := append([]string{"--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "",
		"--appendonly", "no", "--dir", dir, "--loadmodule", Module()}, args...)
	argv = Nice(niceness, append([]string{binary}, argv...)...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &Server{Name: name, Port: port, dir: dir, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(s.done) }()
	c := s.Client(2)
	defer c.Close()
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); {
		if s.Exited() {
			break
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return s, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	log := s.Log()
	s.Stop()
	return nil, fmt.Errorf("%s did not start:\n%s", name, log)
}

// Exited reports whether the process has ended.
func (s *Server) Exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// Log is the server's log so far.
func (s *Server) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "server.log"))
	return string(b)
}

// Stop ends the server and removes its directory; it reports an error (with the log)
// if the server had died before.
func (s *Server) Stop() error {
	var err error
	if s.Exited() {
		err = fmt.Errorf("%s died during the tests:\n%s", s.Name, s.Log())
	} else {
		_ = s.cmd.Process.Signal(os.Interrupt)
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.done
		}
	}
	os.RemoveAll(s.dir)
	return err
}

// Pool starts each kind once, when first asked, and stops them all at the end.
type Pool struct {
	mu      sync.Mutex
	servers map[string]*Server
	errs    map[string]error
	cluster *Cluster
	clErr   error
}

// NewPool is an empty pool.
func NewPool() *Pool {
	return &Pool{servers: map[string]*Server{}, errs: map[string]error{}}
}

// Get is the running server of kind, started on first use; a kind that cannot start
// fails (or, outside CI, skips) the test.
func (p *Pool) Get(t testing.TB, kind Kind) *Server {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if s, ok := p.servers[kind.Name]; ok {
		return s
	}
	if err, ok := p.errs[kind.Name]; ok {
		Missing(t, err.Error())
	}
	s, err := Start(kind.Name, kind.Binary, 0)
	if err != nil {
		p.errs[kind.Name] = err
		Missing(t, err.Error())
	}
	p.servers[kind.Name] = s
	return s
}

// Cluster is the pool's three-primary cluster of the first kind named "redis" (else
// the first kind), created on first use.
func (p *Pool) Cluster(t testing.TB) *Cluster {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cluster == nil && p.clErr == nil {
		kinds := Kinds()
		kind := kinds[0]
		for _, k := range kinds {
			if k.Name == "redis" {
				kind = k
				break
			}
		}
		p.cluster, p.clErr = StartCluster(kind, 3)
	}
	if p.clErr != nil {
		Missing(t, p.clErr.Error())
	}
	return p.cluster
}

// Stop ends every server the pool started; the first error is a server that died.
func (p *Pool) Stop() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var first error
	for _, s := range p.servers {
		if err := s.Stop(); err != nil && first == nil {
			first = err
		}
	}
	if p.cluster != nil {
		if err := p.cluster.Stop(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Cluster is a Redis Cluster of primaries with the module loaded.
type Cluster struct {
	Kind  Kind
	Nodes []*Server
}

// Addrs are the nodes' addresses.
func (c *Cluster) Addrs() []string {
	var out []string
	for _, n := range c.Nodes {
		out = append(out, n.Addr())
	}
	return out
}

// Client is a cluster client of it.
func (c *Cluster) Client(protocol int) *redis.ClusterClient {
	return redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()[:1], Protocol: protocol})
}

// clusterPort is a free port whose cluster bus port (+10000) is free too.
func clusterPort() (int, error) {
	for i := 0; i < 100; i++ {
		port, err := FreePort()
		if err != nil {
			return 0, err
		}
		if port+10000 > 65535 {
			continue
		}
		if l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port+10000)); err == nil {
			l.Close()
			return port, nil
		}
	}
	return 0, fmt.Errorf("no free port pair for a cluster node")
}

// StartCluster starts n primaries of kind, joins them with redis-cli --cluster create
// and waits until every node reports cluster_state:ok.
func StartCluster(kind Kind, n int) (*Cluster, error) {
	c := &Cluster{Kind: kind}
	fail := func(err error) (*Cluster, error) {
		c.Stop()
		return nil, err
	}
	for i := 0; i < n; i++ {
		port, err := clusterPort()
		if err != nil {
			return fail(err)
		}
		s, err := Start(kind.Name+"-cluster", kind.Binary, port,
			"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf")
		if err != nil {
			return fail(err)
		}
		c.Nodes = append(c.Nodes, s)
	}
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "redis-cli", args...).CombinedOutput(); err != nil {
		return fail(fmt.Errorf("redis-cli --cluster create: %v\n%s", err, out))
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, node := range c.Nodes {
		client := node.Client(2)
		for {
			info, err := client.ClusterInfo(context.Background()).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				client.Close()
				return fail(fmt.Errorf("cluster not ok: %v %s", err, info))
			}
			time.Sleep(100 * time.Millisecond)
		}
		client.Close()
	}
	return c, nil
}

// Stop ends every node.
func (c *Cluster) Stop() error {
	var first error
	for _, n := range c.Nodes {
		if err := n.Stop(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Keys makes fresh key names: Keys()("c") is "test:<random>:c".
func Keys() func(name string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	run := hex.EncodeToString(b)
	return func(name string) string { return "test:" + run + ":" + name }
}
