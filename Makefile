# Agent Forge. `make demo` runs the main job end to end on local defaults;
# `make test` runs every check CI runs.
GO ?= go
# Static, libc-free binaries like the release build (cheaper process start).
export CGO_ENABLED := 0
BIN := bin
CMDS := $(notdir $(wildcard cmd/*))
E2E := $(sort $(wildcard scripts/e2e.sh scripts/*-e2e.sh))
FUZZTIME ?= 10s

.PHONY: build test tools vet unit lint-workflows e2e demo bench bench-gate bench-targets fuzz fuzz-short clean

build:
	@mkdir -p $(BIN)
	@for c in $(CMDS); do $(GO) build -o $(BIN)/$$c ./cmd/$$c || exit 1; done

tools:
	@scripts/require-tools.sh

# Test programs live under testdata/ (one directory each), which ./...
# does not match; vet names them.
TESTPROGS := $(patsubst %/main.go,./%,$(wildcard testdata/*/main.go))

vet:
	$(GO) vet ./... $(TESTPROGS)

unit:
	$(GO) test ./...

# Two scripts at a time (E2E_JOBS), each one's output printed whole when
# it ends, a summary with wall times last.
e2e: build
	@scripts/e2e-all.sh $(E2E)

lint-workflows:
	@scripts/lint-workflows.sh

test: tools vet unit fuzz-short lint-workflows e2e

demo: build
	@scripts/demo.sh

# Each package's benchmarks at the iteration count its figures are meant
# for: the Gate and Worker ones size their own load (run once), the others
# need many iterations for percentiles and rates.
bench:
	$(GO) test -run '^$$' -bench . -benchtime 300x ./pkg/plugin/host/
	$(GO) test -run '^$$' -bench . -benchtime 20000x ./pkg/store/
	$(GO) test -run '^$$' -bench . ./pkg/plugin/
	$(GO) test -run '^$$' -bench . -benchtime 1x ./pkg/gate/
	$(GO) test -run '^$$' -bench . -benchtime 3x -timeout 30m ./pkg/worker/

# Only the benchmarks that run forge-gate as a separate process
# (docs/performance.md; BENCH_GATE_* variables size and compare them).
bench-gate:
	$(GO) test -run '^$$' -bench GateProcess -benchtime 1x -timeout 30m ./pkg/gate/

# One run of the per-job cost benchmarks with a table of medians against
# the targets (docs/performance.md); ROUNDS alternated rounds (default 3).
bench-targets:
	@scripts/bench-targets.sh -rounds $(or $(ROUNDS),3)

fuzz:
	@scripts/fuzz.sh $(FUZZTIME)

# A short pass of every fuzz target, one worker each (part of `make test`):
# a count, not a duration, so a loaded machine only makes it slower.
fuzz-short:
	@FUZZ_PARALLEL=1 scripts/fuzz.sh 1000x

clean:
	rm -rf $(BIN)
