#!/usr/bin/env bash
# Releases VERSION of every module of this repository, tagged by Go's
# multi-module convention, or rehearses it.
#
#   scripts/release.sh VERSION                       edit go.mod files, commit, tag; pushes nothing
#   scripts/release.sh --dry-run VERSION             all of it in a temporary clone, then install it
#   scripts/release.sh --dry-run --worktree VERSION  the same from the working tree, uncommitted
#                                                    changes included (what scripts/test.sh runs)
#
# A release:
#  1. refuses a dirty tree (anything `git status --porcelain` shows, untracked
#     files included), a VERSION that is not a canonical semantic version
#     (v0.1.0, v1.2.0-rc.1: no build metadata, no pseudo-version, and v0 or v1,
#     since the module paths have no /vN suffix), and a tag that exists;
#  2. finds the modules: every go.mod that git tracks, so a module added later
#     is released without editing this script. Every module is released but
#     those in examples/, bench/ and under internal/ directories, which are run
#     inside the repository and which nothing outside it imports;
#  3. sets, in every go.mod, the require of each of the repository's modules
#     to VERSION, and checks that each go.mod it changed is still tidy
#     (`go mod tidy -diff`, GOWORK=off);
#  4. commits that as "release: VERSION", then tags each released module with
#     an annotated tag where the go command looks for it: VERSION for the root
#     module, DIR/VERSION for the module in DIR (ginlimit/v0.1.0,
#     core/redisstore/v0.1.0);
#  5. prints the `git push` that publishes it.
# The go.mod parsing, the checks of VERSION and of the layout, and the proxy
# below are internal/release, a Go program on golang.org/x/mod.
#
# The replace directives stay. A replace applies only in the main module: a
# user who requires ginlimit v0.1.0 gets github.com/tollgate/tollgate at the
# v0.1.0 ginlimit requires, from the module proxy, and never sees ginlimit's
# `replace github.com/tollgate/tollgate => ../`. In the repository, the
# replaces keep every module building against its neighbours' code with
# GOWORK=off (as scripts/test.sh runs them), before and after a release;
# without them each module would fetch its siblings at VERSION, which no
# proxy has until the tags are pushed, and development would build against
# the last release rather than the code beside it. This is the layout of
# OpenTelemetry-Go contrib's instrumentation modules and of go-redis's extra/
# modules: require the released version, replace it with the directory. Its
# one cost: `go install pkg@VERSION` refuses a module whose go.mod has
# replace directives, which matters only for commands, and no released module
# holds one.
#
# --dry-run clones the repository into a temporary directory and does all of
# the above there (commit and tags included), never touching the repository
# or its tags; the clone has no remote. Then it proves the release installs:
#  - it builds a file-based module proxy from the would-be tags: @v/list,
#    .info, .mod and .zip of every released module at VERSION;
#  - in a fresh module outside the repository, with
#      GOPROXY=file://<that proxy>,file://<the module cache>,<go env GOPROXY>
#      GONOSUMDB=<the root module path>  (the fake modules are not in sum.golang.org)
#      GOFLAGS=-mod=mod, and a module cache of its own (a stale download of the
#      same version in the real cache would otherwise win),
#    it runs `go get` of every released module @VERSION, with no replace,
#    checks that each resolved to VERSION from that proxy, then builds and
#    runs scripts/testdata/consumer, which serves requests through ginlimit,
#    echolimit, fiberlimit, the net/http middleware on redisstore and
#    grpclimit's interceptor. It uses
#    the Redis at TOLLGATE_REDIS_ADDR, or starts a redis-server of its own.
# Third-party modules come from the local module cache when it has them,
# otherwise from the network, and are checked against the checksum database
# as a user's would be.
set -euo pipefail

usage() {
  sed -n '5,8p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
die() { echo "release: $*" >&2; exit 1; }

dry=false worktree=false version=""
for arg in "$@"; do
  case $arg in
    --dry-run) dry=true ;;
    --worktree) worktree=true ;;
    -h|--help) usage ;;
    -*) echo "release: unknown flag $arg" >&2; usage ;;
    *) [ -z "$version" ] || { echo "release: more than one VERSION" >&2; usage; }; version=$arg ;;
  esac
done
[ -n "$version" ] || usage
$worktree && ! $dry && die "--worktree releases uncommitted work: it is for --dry-run only"

root=$(cd "$(dirname "$0")/.." && git rev-parse --show-toplevel)
export GOWORK=off

if ! $worktree; then
  dirty=$(git -C "$root" status --porcelain)
  [ -z "$dirty" ] || die "the working tree is not clean; commit or stash first:
$dirty"
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tollgate-release.XXXXXX")
restore=() # go.mod files to restore if a real release stops before its commit
redis_pid_file=""
cleanup() {
  if [ ${#restore[@]} -ne 0 ]; then
    git -C "$root" checkout -- "${restore[@]}" 2>/dev/null || true
    echo "release: stopped before the commit; restored ${restore[*]}" >&2
  fi
  if [ -n "$redis_pid_file" ] && [ -f "$redis_pid_file" ]; then
    kill "$(cat "$redis_pid_file")" 2>/dev/null || true
  fi
  [ -d "$tmp/modcache" ] && chmod -R u+w "$tmp/modcache" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# In a dry run the release happens in a clone, committed and tagged under an
# identity of its own.
repo=$root
gitc=(git)
if $dry; then
  repo=$tmp/repo
  gitc=(git -c user.name="Tollgate release dry run" -c user.email=release-dry-run@invalid
    -c commit.gpgsign=false -c tag.gpgsign=false)
  git clone -q --no-hardlinks "$root" "$repo"
  git -C "$repo" checkout -q --detach "$(git -C "$root" rev-parse HEAD)"
  git -C "$repo" remote remove origin
  if $worktree; then
    # The clone's files become the working tree's: tracked files as they are
    # on disk (deleted ones gone) and untracked files git does not ignore.
    (cd "$repo" && git ls-files -z | xargs -0 rm -f)
    (cd "$root" && git ls-files -z --cached --others --exclude-standard |
      while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
      tar --null -T - -cf -) | tar -xf - -C "$repo"
    if [ -n "$(git -C "$repo" status --porcelain)" ]; then
      git -C "$repo" add -A
      "${gitc[@]}" -C "$repo" commit -q -m "dry run: the working tree as it stands"
    fi
  fi
fi
cd "$repo"

tool=$tmp/release-tool
(cd internal/release && go build -o "$tool" .) || die "could not build internal/release"

list=$("$tool" list "$version") || exit 1
mapfile -t released <<<"$list"
[ -n "$list" ] || die "no module to release"
paths=() tags=()
for line in "${released[@]}"; do
  paths+=("${line%% *}")
  tags+=("${line#* }")
done
for t in "${tags[@]}"; do
  if git rev-parse -q --verify "refs/tags/$t" >/dev/null; then
    die "tag $t exists already"
  fi
done

changed=()
bumped=$("$tool" bump "$version") || exit 1
[ -z "$bumped" ] || mapfile -t changed <<<"$bumped"
$dry || restore=("${changed[@]}")
for f in "${changed[@]}"; do
  (cd "$(dirname "$f")" && go mod tidy -diff >/dev/null 2>&1) || {
    (cd "$(dirname "$f")" && go mod tidy -diff) >&2 || true
    die "$f is not tidy once it requires $version (go mod tidy -diff says why, above)"
  }
done

if [ ${#changed[@]} -ne 0 ]; then
  git add -- "${changed[@]}"
  "${gitc[@]}" commit -q -m "release: $version" \
    -m "Require $version of the repository's modules in: ${changed[*]}."
fi
restore=()
for i in "${!tags[@]}"; do
  "${gitc[@]}" tag -a -m "${paths[$i]} $version" "${tags[$i]}"
done

echo "release: $version at $(git rev-parse --short HEAD) ($(git log -1 --format=%s)), tags:"
printf '  %s\n' "${tags[@]}"

if ! $dry; then
  branch=$(git rev-parse --abbrev-ref HEAD)
  echo "release: nothing is pushed; to publish:"
  echo "  git push origin $branch ${tags[*]}"
  exit 0
fi

# --- dry run: install the would-be release from a file-based module proxy.
"$tool" proxy -out "$tmp/proxy" "$version" || die "could not build the module proxy"
echo "release: module proxy at $tmp/proxy: ${paths[*]} at $version"

redis_addr=${TOLLGATE_REDIS_ADDR:-}
if [ -z "$redis_addr" ]; then
  command -v redis-server >/dev/null ||
    die "the consumer needs a Redis: set TOLLGATE_REDIS_ADDR or install redis-server"
  for _ in $(seq 1 50); do
    port=$(( (RANDOM % 10000) + 20000 ))
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || break
  done
  redis_pid_file=$tmp/redis.pid
  redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$tmp" \
    --logfile "$tmp/redis.log" --pidfile "$redis_pid_file" --daemonize yes >/dev/null
  for _ in $(seq 1 50); do
    redis-cli -p "$port" ping >/dev/null 2>&1 && break
    sleep 0.1
  done
  redis-cli -p "$port" ping >/dev/null 2>&1 || die "redis-server on port $port did not start: $(tail -5 "$tmp/redis.log")"
  redis_addr=127.0.0.1:$port
fi

real_cache=$(go env GOMODCACHE)
machine_proxy=$(go env GOPROXY)
consumer=$tmp/consumer
mkdir -p "$consumer"
cp scripts/testdata/consumer/main.go "$consumer/"
(
  cd "$consumer"
  export GOFLAGS="-mod=mod -modcacherw" GOMODCACHE="$tmp/modcache"
  export GOPROXY="file://$tmp/proxy,file://$real_cache/cache/download,$machine_proxy"
  export GONOSUMDB="${paths[0]}" GOPRIVATE="" GONOPROXY="" GOINSECURE=""
  go mod init example.com/consumer >/dev/null 2>&1
  gets=()
  for p in "${paths[@]}"; do gets+=("$p@$version"); done
  echo "release: in a fresh module, go get ${gets[*]}"
  go get "${gets[@]}" 2>"$tmp/get.log" || { cat "$tmp/get.log" >&2; die "go get failed"; }
  grep -F "go: added ${paths[0]}" "$tmp/get.log" | sed 's/^/  /' || true
  ! grep -q '^[[:space:]]*replace' go.mod || die "the fresh module's go.mod has a replace directive"
  for p in "${paths[@]}"; do
    got=$(go list -m -f '{{.Version}} {{.Dir}}' "$p")
    case $got in
      "$version $tmp/modcache/"*) ;;
      *) die "$p resolved to '$got', not to $version from the proxy" ;;
    esac
  done
  # -trimpath: the build cache holds the dependencies under their module
  # paths, not under this run's module cache; and -race, as scripts/test.sh
  # builds its tests (with -trimpath too): so the dependencies, gin, echo,
  # fiber, grpc and go-redis, come from the cache entries the tests made,
  # and only the released modules compile here.
  echo "release: go build -race scripts/testdata/consumer against them"
  go build -race -trimpath -o consumer . || die "the consumer does not build against the release"
  ./consumer -redis "$redis_addr"
) || die "dry run FAILED: $version does not install and serve from a fresh module as a user's would (see above)"
echo "release: dry run of $version passed; nothing was tagged in $root"
