#!/usr/bin/env bash
# Counts the instructions one iteration of a benchmark executes, under
# valgrind's callgrind: a figure that, unlike a time on a shared machine,
# is the same from run to run, for comparing two builds of the same path.
# It does not replace a benchmark's time (a cache miss or a stall costs
# far more than an instruction), and the vDSO's clock read is not counted
# (valgrind makes it a system call).
#
#   scripts/instructions.sh TEST_BINARY BENCH_REGEX LOOP_FUNC [N]
#
# TEST_BINARY is a `go test -c` binary; BENCH_REGEX selects one benchmark;
# LOOP_FUNC is the function whose loop makes the iterations, as callgrind's
# --toggle-collect takes it (callgrind counts only inside it); N is the
# iterations (-test.benchtime Nx, by default 20000: b.Loop runs exactly
# N). It prints the instructions counted over N. What else runs while
# callgrind counts is counted too: BenchmarkMemory's warm-up decisions
# were (one for hotkey, a 20,000th of the count; 10,000 for keys10k, too
# many), so use it on cases warmed by one decision. Go's asynchronous
# preemption is turned off: callgrind fails on its signals. For example,
# from the repository's root:
#
#   (cd bench && go test -c -o /tmp/bench.test .)
#   scripts/instructions.sh /tmp/bench.test '^BenchmarkMemory$/^case=hotkey$/^lib=tollgate$' '*runSerial'
#   (cd nethttp && go test -c -o /tmp/nethttp.test .)
#   scripts/instructions.sh /tmp/nethttp.test '^BenchmarkMiddleware$/^limited$' '*nethttp_test.serve'
#
# Installs Debian's valgrind package with apt-get when it is missing.
set -euo pipefail
if [ $# -lt 3 ]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
bin=$(readlink -f "$1") re=$2 fn=$3 n=${4:-20000}
if ! command -v valgrind >/dev/null; then
  echo "instructions: installing Debian's valgrind package with apt-get" >&2
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo=sudo
  $sudo apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends valgrind >/dev/null
fi
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# valgrind now and then dies all the same: try again.
for try in 1 2 3; do
  if GODEBUG=asyncpreemptoff=1 valgrind --tool=callgrind --callgrind-out-file="$out" --toggle-collect="$fn" \
    "$bin" -test.run '^$' -test.bench "$re" -test.benchtime "${n}x" -test.cpu 1 >/dev/null 2>&1; then
    break
  fi
  [ "$try" = 3 ] && { echo "instructions: valgrind failed 3 times" >&2; exit 1; }
done
total=$(awk '/^(summary|totals):/ { print $2; exit }' "$out")
if [ -z "$total" ] || [ "$total" = 0 ]; then
  echo "instructions: nothing counted: does $fn run the loop of $re?" >&2
  exit 1
fi
awk -v t="$total" -v n="$n" -v re="$re" 'BEGIN { printf "%s\t%.1f instructions an iteration\n", re, t / n }'
