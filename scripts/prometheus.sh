#!/usr/bin/env bash
# Proves ops/ (Prometheus rules, Grafana dashboard) against the real tools:
#  1. promtool check rules, and promtool test rules (a unit test per alert,
#     firing and not: ops/prometheus/tollgate.rules.test.yml);
#  2. unless --static: a real Prometheus, scraping examples/metrics (on its
#     own redis-server) every second under the same rules with their windows
#     scaled down (5m → 5s, 1h → 30s, every `for` 2s), while
#     scripts/opscheck loads the app, stalls and then kills its Redis, and
#     checks that no alert fires under a quiet load, that every alert fires
#     after its cause, and that every dashboard query returns series.
#     About 40 s once the app is built.
# Installs Debian's prometheus package (promtool and prometheus) when
# promtool is missing. Needs redis-server for step 2.
#
#   ./scripts/prometheus.sh [--static]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
rules=ops/prometheus/tollgate.rules.yml
dashboard=ops/grafana/tollgate.json

if ! command -v promtool >/dev/null || ! command -v prometheus >/dev/null; then
  echo "prometheus: installing Debian's prometheus package (promtool, prometheus) with apt-get"
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo=sudo
  $sudo apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi
promtool check rules "$rules"
(cd ops/prometheus && promtool test rules tollgate.rules.test.yml)
[ "${1:-}" = "--static" ] && exit 0

work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  [ -f "$work/redis.pid" ] && { kill -CONT "$(cat "$work/redis.pid")" 2>/dev/null; kill "$(cat "$work/redis.pid")" 2>/dev/null; } || true
  sleep 0.2
  rm -rf "$work"
}
trap cleanup EXIT

free_port() {
  local p
  for _ in $(seq 1 200); do
    p=$(( (RANDOM % 12000) + 10000 ))
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return 0; }
  done
  return 1
}
wait_http() { # url what
  for _ in $(seq 1 150); do curl -fs "$1" >/dev/null 2>&1 && return 0; sleep 0.2; done
  echo "prometheus: $2 did not answer at $1" >&2; return 1
}

# The app, built as the tests build (-race -trimpath: the build cache
# has its dependencies), and its Redis.
(cd examples && GOWORK=off go build -race -trimpath -o "$work/metrics" ./metrics)
go build -o "$work/opscheck" ./scripts/opscheck
rport=$(free_port)
redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no --dir "$work" \
  --logfile "$work/redis.log" --pidfile "$work/redis.pid" --daemonize yes >/dev/null
for _ in $(seq 1 50); do redis-cli -p "$rport" ping >/dev/null 2>&1 && break; sleep 0.1; done
aport=$(free_port)
"$work/metrics" -addr "127.0.0.1:$aport" -redis "127.0.0.1:$rport" >"$work/app.log" 2>&1 &
pids+=($!)
wait_http "http://127.0.0.1:$aport/metrics" "the app"

# Prometheus, under the rules with their windows scaled down.
sed -e 's/\[5m\]/[5s]/g' -e 's/\[1h\]/[30s]/g' -e 's/for: .*/for: 2s/' "$rules" >"$work/rules.yml"
pport=$(free_port)
cat >"$work/prometheus.yml" <<YAML
global: {scrape_interval: 1s, evaluation_interval: 1s}
rule_files: [$work/rules.yml]
scrape_configs:
  - job_name: api
    static_configs: [{targets: ["127.0.0.1:$aport"]}]
YAML
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
  --web.listen-address="127.0.0.1:$pport" >"$work/prometheus.log" 2>&1 &
pids+=($!)
wait_http "http://127.0.0.1:$pport/-/ready" "prometheus" || { tail -20 "$work/prometheus.log" >&2; exit 1; }

"$work/opscheck" -prom "http://127.0.0.1:$pport" -app "http://127.0.0.1:$aport" \
  -redis-pid "$(cat "$work/redis.pid")" -rules "$work/rules.yml" -dashboard "$dashboard" || {
  echo "prometheus: the app's log:" >&2; tail -20 "$work/app.log" >&2; exit 1; }
