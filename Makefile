# Agent Forge. `make demo` runs the main job end to end on local defaults;
# `make test` runs every check CI runs.
GO ?= go
# Static, libc-free binaries like the release build (cheaper process start).
export CGO_ENABLED := 0
BIN := bin
CMDS := $(notdir $(wildcard cmd/*))
E2E := $(sort $(wildcard scripts/e2e.sh scripts/*-e2e.sh))
FUZZTIME ?= 10s
BENCHTIME ?= 1x

.PHONY: build test tools vet unit lint-workflows e2e demo bench fuzz clean

build:
	@mkdir -p $(BIN)
	@for c in $(CMDS); do $(GO) build -o $(BIN)/$$c ./cmd/$$c || exit 1; done

tools:
	@scripts/require-tools.sh

vet:
	$(GO) vet ./...

unit:
	$(GO) test ./...

e2e: build
	@for s in $(E2E); do echo "== $$s"; bash $$s || exit 1; done

lint-workflows:
	@scripts/lint-workflows.sh

test: tools vet unit lint-workflows e2e

demo: build
	@scripts/demo.sh

bench:
	$(GO) test -run '^$$' -bench . -benchtime $(BENCHTIME) ./...

fuzz:
	@scripts/fuzz.sh $(FUZZTIME)

clean:
	rm -rf $(BIN)
