#!/usr/bin/env bash
# Runs every test of every module: gofmt, go vet, `go mod tidy -diff` and
# `go test -race -shuffle=on` in each module with GOWORK=off (as a user's
# build sees it: a missing require or replace fails here). Redis tests get a
# real redis-server and a 3-master Redis Cluster on free loopback ports,
# installed with apt-get when missing and stopped on exit. Then the release,
# rehearsed: scripts/release.sh --dry-run (see its header) tags the working
# tree in a temporary clone, serves the tags as a file-based module proxy,
# and a fresh module outside the repository go gets every released module
# through it, with no replace, and serves requests through each adapter and
# the Redis store. Last, scripts/prometheus.sh proves the alerts and the
# dashboard of ops/ with promtool and a real Prometheus. A line marks each
# module's start and, with its time, its end. The leased fleets of
# core/redisstore then run again without the race detector, which checks
# their use of the limit and their shares (a full run only).
#
#   ./scripts/test.sh            all modules
#   ./scripts/test.sh core/...   extra args go to `go test` instead of ./...
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
export GOFLAGS="${GOFLAGS:-} -buildvcs=false"
export GOWORK=off

modules=$(find . -name go.mod -not -path './.git/*' -not -path '*/testdata/*' | xargs -n1 dirname | sort)
failed=()

work=$(mktemp -d)
cleanup() {
  if [ -f "$work/pids" ]; then
    while read -r p; do kill "$p" 2>/dev/null || true; done < "$work/pids"
    sleep 0.2
  fi
  rm -rf "$work"
}
trap cleanup EXIT

free_port() { # a loopback port whose cluster bus port (+10000) is free too
  # Both stay below the kernel's ephemeral range (32768 and up by default),
  # where outgoing connections hold ports that redis-server could not bind.
  local p
  for _ in $(seq 1 200); do
    p=$(( (RANDOM % 12000) + 10000 ))
    if ! (exec 3<>/dev/tcp/127.0.0.1/$p) 2>/dev/null && ! (exec 3<>/dev/tcp/127.0.0.1/$((p+10000))) 2>/dev/null; then
      echo "$p"; return 0
    fi
  done
  echo "no free port" >&2; return 1
}

wait_ping() { # port logfile
  for _ in $(seq 1 100); do
    redis-cli -p "$1" ping >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "redis-server on port $1 did not start; its log:" >&2
  tail -20 "$2" >&2 2>/dev/null || true
  return 1
}

# start_server DIR [ARGS...]: starts a redis-server with its files in DIR on
# a free port, trying another port if it does not come up; prints the port.
start_server() {
  local dir=$1; shift
  mkdir -p "$dir"
  local port attempt
  for attempt in 1 2 3; do
    port=$(free_port) || return 1
    redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" \
      --logfile "$dir/log" --pidfile "$dir/pid" --daemonize yes "$@" >&2 || true
    if wait_ping "$port" "$dir/log"; then
      cat "$dir/pid" >> "$work/pids"
      echo "$port"; return 0
    fi
    [ -f "$dir/pid" ] && kill "$(cat "$dir/pid")" 2>/dev/null
    echo "retrying redis-server on another port (attempt $attempt failed)" >&2
  done
  return 1
}

start_redis() {
  if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then
    echo "== installing redis-server with apt-get"
    local sudo=""; [ "$(id -u)" -ne 0 ] && sudo=sudo
    $sudo apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq redis-server redis-tools >/dev/null
  fi
  local port
  port=$(start_server "$work/single") || return 1
  export TOLLGATE_REDIS_ADDR="127.0.0.1:$port"
  export TOLLGATE_REDIS_PID_FILE="$work/single/pid"

  local addrs=() pidfiles=()
  for i in 1 2 3; do
    port=$(start_server "$work/c$i" --cluster-enabled yes --cluster-config-file "$work/c$i/nodes.conf") || return 1
    addrs+=("127.0.0.1:$port")
    pidfiles+=("$work/c$i/pid")
  done
  redis-cli --cluster create "${addrs[@]}" --cluster-replicas 0 --cluster-yes >"$work/cluster-create.log" 2>&1
  for _ in $(seq 1 100); do
    redis-cli -p "${addrs[0]##*:}" cluster info 2>/dev/null | grep -q 'cluster_state:ok' && break
    sleep 0.1
  done
  export TOLLGATE_REDIS_CLUSTER_ADDRS
  TOLLGATE_REDIS_CLUSTER_ADDRS=$(IFS=,; echo "${addrs[*]}")
  export TOLLGATE_REDIS_CLUSTER_PID_FILES # the masters' pid files, in the order of their addresses
  TOLLGATE_REDIS_CLUSTER_PID_FILES=$(IFS=,; echo "${pidfiles[*]}")
  echo "== redis-server on $TOLLGATE_REDIS_ADDR, cluster on $TOLLGATE_REDIS_CLUSTER_ADDRS"
}

if grep -qs 'redis/go-redis' $(for m in $modules; do echo "$m/go.mod"; done); then
  start_redis
  export TOLLGATE_REQUIRE_REDIS=1 # Redis tests fail instead of skipping
fi

pkgs=("$@"); [ ${#pkgs[@]} -eq 0 ] && pkgs=(./...)
# Progress: a line as each module starts and one with its time as it ends,
# so that a long stretch names what it is doing; and the total at the end.
started=$SECONDS
n_modules=$(echo "$modules" | wc -w) i=0
for m in $modules; do
  i=$((i + 1)) t0=$SECONDS before=${#failed[@]}
  echo "== module $m ($i/$n_modules, $((SECONDS - started))s elapsed)"
  cd "$root/$m"
  bad=$(gofmt -l . 2>&1 | grep -v '^$' || true)
  if [ -n "$bad" ]; then echo "gofmt would change: $bad"; failed+=("$m (gofmt)"); fi
  go mod tidy -diff >/dev/null 2>&1 || { echo "go mod tidy changes go.mod/go.sum in $m"; go mod tidy -diff || true; failed+=("$m (tidy)"); }
  go vet ./... || failed+=("$m (vet)")
  # -trimpath: the dependencies compile to the same build cache entries as
  # the release dry run's consumer build below (-race -trimpath), which
  # then compiles only the released modules, not gin, echo, fiber, grpc
  # and go-redis a second time.
  go test -race -trimpath -shuffle=on -timeout 20m "${pkgs[@]}" || failed+=("$m (test)")
  status=ok; [ ${#failed[@]} -ne "$before" ] && status=FAILED
  echo "-- module $m: $status in $((SECONDS - t0))s"
done
cd "$root"

# The leased fleets again, without the race detector: under it they check
# only that no algorithm admits more than its limit (five processes built
# with it on two cores time out now and then); here they check as well
# that the fleet uses at least 95% of the limit and shares it as the
# demand (core/redisstore/lease_fleet_test.go). A full run only: extra
# args to this script skip it.
if [ $# -eq 0 ]; then
  echo "== leased fleets without the race detector: core/redisstore -run '^TestLeasedFleet' ($((SECONDS - started))s elapsed)"
  t0=$SECONDS
  # No -trimpath: the dependencies are then those go vet compiled above
  # (with -trimpath they would compile again, about a minute more).
  if (cd core/redisstore && go test -count=1 -timeout 10m -run '^TestLeasedFleet' ./); then
    echo "-- leased fleets: ok in $((SECONDS - t0))s"
  else
    echo "-- leased fleets: FAILED in $((SECONDS - t0))s"
    failed+=("core/redisstore (leased fleets without -race)")
  fi
fi

# Bounded: about 30 s. The consumer's dependencies are in the build cache:
# the module tests above compiled them with the same flags (-race
# -trimpath), so it compiles only the released modules.
release_version=v0.1.0-dryrun release_timeout=300
echo "== release dry run: scripts/release.sh --dry-run --worktree $release_version ($((SECONDS - started))s elapsed)"
rc=0 t0=$SECONDS
timeout "$release_timeout" ./scripts/release.sh --dry-run --worktree "$release_version" || rc=$?
echo "-- release dry run: exit $rc in $((SECONDS - t0))s"
if [ "$rc" -eq 124 ]; then
  echo "release dry run timed out after ${release_timeout}s (its last line above says where)"
  failed+=("release dry run (timeout)")
elif [ "$rc" -ne 0 ]; then
  echo "release dry run failed: a fresh module cannot go get and use the modules as tagged (see above);"
  echo "rerun it alone: scripts/release.sh --dry-run --worktree $release_version"
  failed+=("release dry run")
fi

# The alerts and the dashboard of ops/, proved with promtool and a real
# Prometheus (see scripts/prometheus.sh; about 50 s, apt-get installs
# Debian's prometheus package when promtool is missing).
echo "== ops: scripts/prometheus.sh ($((SECONDS - started))s elapsed)"
t0=$SECONDS
if ./scripts/prometheus.sh; then
  echo "-- ops: ok in $((SECONDS - t0))s"
else
  echo "-- ops: FAILED in $((SECONDS - t0))s"
  failed+=("ops (scripts/prometheus.sh)")
fi

if [ ${#failed[@]} -ne 0 ]; then
  echo "FAILED in $((SECONDS - started))s: ${failed[*]}"
  exit 1
fi
echo "all modules passed in $((SECONDS - started))s"
