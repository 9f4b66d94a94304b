#!/usr/bin/env bash
# bench-targets.sh: one run of the per-job cost benchmarks and a table of
# their medians against the targets in docs/performance.md.
#
#   scripts/bench-targets.sh [-rounds N] [-out DIR]
#
# It runs the Gate process benchmarks (production forge-gate as a child
# process, N alternated rounds per shape), BenchmarkEndToEndText (N
# rounds, every phase once per round), BenchmarkSandboxCost (N rounds,
# its three phases rotated) and BenchmarkGatewayOverhead (N rounds, direct
# and through the model gateway alternated), keeps their raw output in DIR
# (default: a new temporary directory) and prints one line per target:
# MET or MISSED, the median, the target. Exit status 0 even when a target
# is missed: this is a measurement, not a test (machines here are noisy).
set -euo pipefail

rounds=3
out=""
while [ $# -gt 0 ]; do
	case "$1" in
	-rounds) rounds="$2"; shift 2 ;;
	-out) out="$2"; shift 2 ;;
	*) echo "usage: $0 [-rounds N] [-out DIR]" >&2; exit 1 ;;
	esac
done
case "$rounds" in '' | *[!0-9]* | 0) echo "bench-targets: -rounds must be a positive integer" >&2; exit 1 ;; esac
cd "$(dirname "$0")/.."
[ -n "$out" ] || out="$(mktemp -d /tmp/forge-bench-targets.XXXXXX)"
mkdir -p "$out"

echo "bench-targets: raw output in $out" >&2
BENCH_GATE_ROUNDS="$rounds" go test -run '^$' -bench GateProcess -benchtime 1x -timeout 30m ./pkg/gate/ >"$out/gate.txt"
go test -run '^$' -bench 'EndToEndText$' -benchtime "${rounds}x" -timeout 30m ./pkg/worker/ >"$out/worker.txt"
go test -run '^$' -bench 'SandboxCost$' -benchtime "${rounds}x" -timeout 30m ./pkg/worker/ >"$out/sandbox.txt"
go test -run '^$' -bench 'GatewayOverhead$' -benchtime "${rounds}x" -timeout 30m ./pkg/gateway/ >"$out/gateway.txt"

# metric FILE BENCH-PREFIX UNIT: the value reported before UNIT on the
# result line of the benchmark whose name starts with BENCH-PREFIX.
metric() {
	awk -v b="$2" -v u="$3" 'index($1, b) == 1 && $4 == "ns/op" {
		for (i = 5; i < NF; i++) if ($(i + 1) == u) { print $i; exit }
	}' "$1"
}

# check NAME VALUE OP LIMIT UNIT: one table line.
check() {
	local verdict
	if [ -z "$2" ]; then
		printf '%-44s %-7s %s\n' "$1" "MISSING" "(no figure)"
		return
	fi
	if awk -v v="$2" -v l="$4" -v op="$3" 'BEGIN { exit !((op == "<=" && v <= l) || (op == ">=" && v >= l)) }'; then
		verdict=MET
	else
		verdict=MISSED
	fi
	printf '%-44s %-7s %10s %s (target %s %s)\n' "$1" "$verdict" "$2" "$5" "$3" "$4"
}

g16='BenchmarkGateProcessLifecycle/submitters=16/lanes=8'
g64='BenchmarkGateProcessLifecycle/submitters=64/lanes=32'
lat='BenchmarkGateProcessIdleLatency'
w='BenchmarkEndToEndText'
echo "medians of $rounds rounds"
check "Gate CPU per no-op job, 16/8" "$(metric "$out/gate.txt" "$g16" 'gate-µs/job')" '<=' 260 µs
check "Gate jobs/s, 16/8" "$(metric "$out/gate.txt" "$g16" 'jobs/s')" '>=' 3000 jobs/s
check "Gate jobs/s, 64/32" "$(metric "$out/gate.txt" "$g64" 'jobs/s')" '>=' 4000 jobs/s
check "idle-lane submit->lease p50" "$(metric "$out/gate.txt" "$lat" 'p50_ms')" '<=' 1.5 ms
check "idle-lane submit->lease p99" "$(metric "$out/gate.txt" "$lat" 'p99_ms')" '<=' 3 ms
check "Gate+Worker CPU per text job, no plugin" "$(metric "$out/worker.txt" "$w" 'no-plugin-gate+worker-cpu-ms/job')" '<=' 0.65 ms
check "  the same with the submitter counted" "$(metric "$out/worker.txt" "$w" 'no-plugin-cpu-ms/job')" '<=' 0.65 ms
check "e2e/bare" "$(metric "$out/worker.txt" "$w" 'e2e/bare-%')" '>=' 60 %
check "sandbox cost per session" "$(metric "$out/sandbox.txt" BenchmarkSandboxCost 'sandbox-cost-%')" '<=' 10 %
check "  with the shared read layer (installed)" "$(metric "$out/sandbox.txt" BenchmarkSandboxCost 'excluding-cost-%')" '<=' 10 %
check "model gateway added per request p50" "$(metric "$out/gateway.txt" BenchmarkGatewayOverhead 'added-p50-ms')" '<=' 1 ms
check "model gateway added to first streamed byte" "$(metric "$out/gateway.txt" BenchmarkGatewayOverhead 'added-ttfb-ms')" '<=' 2 ms
echo "ceilings for e2e/bare in the same run:"
echo "  e2e/bare-floor-%:         $(metric "$out/worker.txt" "$w" 'e2e/bare-floor-%')"
echo "  e2e/bare-floor-wrapped-%: $(metric "$out/worker.txt" "$w" 'e2e/bare-floor-wrapped-%')"
