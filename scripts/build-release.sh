#!/usr/bin/env bash
# Reproducible release builder.
#
#   scripts/build-release.sh vMAJOR.MINOR.PATCH <full-40-hex-commit> <output-dir>
#
# Builds the canonical archive matrix from a fresh `git archive` of the given
# commit (never from the working tree) with the Go toolchain pinned in
# release/go-version, then publishes the completed staging directory at
# <output-dir> with renameat2(RENAME_NOREPLACE). See release/README.md for the
# archive layout and every reproducibility control.
#
# Exit status: 0 published, 1 rejected or failed (nothing is published and no
# existing path is touched), 2 usage.
set -euo pipefail
umask 022
export LC_ALL=C

die() { echo "build-release: error: $*" >&2; exit 1; }
usage() { echo "usage: scripts/build-release.sh vMAJOR.MINOR.PATCH <40-hex-commit> <output-dir>" >&2; exit 2; }

[ $# -eq 3 ] || usage
version=$1 commit=$2 out=$3

# --- argument preflight ---------------------------------------------------
semver='^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$'
[[ $version =~ $semver ]] || die "version must be vMAJOR.MINOR.PATCH without prerelease or build suffix"
[[ $commit =~ ^[0-9a-f]{40}$ ]] || die "commit must be a full lowercase 40-hex SHA"
[ "$(uname -s)" = Linux ] || die "the release builder runs on Linux only"
case $out in
  '' | */ | . | .. | */. | */..) die "output must name a new directory (no trailing slash, not . or ..)" ;;
esac
if [ -e "$out" ] || [ -L "$out" ]; then die "output path already exists; nothing was changed"; fi
out_parent=$(dirname -- "$out")
out_name=$(basename -- "$out")
[ -d "$out_parent" ] || die "output parent directory does not exist"
out_parent=$(cd -- "$out_parent" 2>/dev/null && pwd -P) || die "output parent directory cannot be entered"
dest=$out_parent/$out_name

for tool in git go sha256sum tar; do
  command -v "$tool" >/dev/null || die "required tool missing: $tool"
done

# --- repository preflight -------------------------------------------------
root=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$root"
[ "$(git rev-parse --show-toplevel 2>/dev/null)" = "$root" ] || die "the builder must run from a Git checkout"
resolved=$(git rev-parse --verify --quiet "$commit^{commit}" || true)
[ "$resolved" = "$commit" ] || die "commit does not exist in this repository"
head=$(git rev-parse --verify --quiet HEAD || true)
[ "$head" = "$commit" ] || die "HEAD does not equal the requested commit"
git update-index -q --refresh >/dev/null 2>&1 || true
[ -z "$(git status --porcelain=v1 --untracked-files=no --ignore-submodules=none)" ] ||
  die "the checkout has uncommitted changes to tracked files"

# --- toolchain preflight --------------------------------------------------
pinned=$(git show "$commit:release/go-version" 2>/dev/null | tr -d '[:space:]') ||
  die "the commit has no release/go-version"
[[ $pinned =~ ^go[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "release/go-version is not an exact Go release"
gocache=$(GOTOOLCHAIN=local go env GOCACHE)
gomodcache=$(GOTOOLCHAIN=local go env GOMODCACHE)
if [ -z "$gocache" ] || [ "$gocache" = off ] || [ -z "$gomodcache" ]; then
  die "Go build and module caches must be available"
fi
active=$(env -i PATH="$PATH" HOME="${HOME:-/nonexistent}" GOENV=off GOTOOLCHAIN=local go env GOVERSION)
[ "$active" = "$pinned" ] || die "active Go toolchain $active does not match pinned $pinned"
commit_time=$(git show -s --format=%ct "$commit")
[[ $commit_time =~ ^[0-9]+$ ]] || die "cannot read the commit time"

# --- private work areas ---------------------------------------------------
work='' stage=''
cleanup() {
  # Only this run's own temporary directories are ever removed.
  if [ -n "$stage" ]; then rm -rf -- "$stage"; fi
  if [ -n "$work" ]; then
    chmod -R u+w -- "$work" 2>/dev/null || true
    rm -rf -- "$work"
  fi
}
trap cleanup EXIT
work=$(mktemp -d "${TMPDIR:-/tmp}/forge-release-work.XXXXXX") || die "cannot create a private work directory"
# The staging directory sits beside the destination so that publication is a
# same-filesystem rename.
stage=$(mktemp -d "$out_parent/.forge-release-stage.XXXXXX") || die "cannot create a staging directory beside the output"
mkdir "$work/src" "$work/home" "$work/tmp" "$work/gopath" "$work/bin" "$work/pkg"

git archive --format=tar "$commit" | tar -x -C "$work/src" -f -

# The agent plugins the Worker archives carry: the commit's one list
# (pkg/install/agent-plugins.txt, which the installer embeds).
agent_list=$work/src/pkg/install/agent-plugins.txt
[ -f "$agent_list" ] || die "the commit lacks pkg/install/agent-plugins.txt"
agent_plugins=()
while IFS= read -r p; do
  [[ $p =~ ^forge-[a-z][a-z0-9]*-plugin$ ]] && [ "$p" != forge-ref-plugin ] ||
    die "pkg/install/agent-plugins.txt holds a line that is not an agent plugin name"
  agent_plugins+=("$p")
done <"$agent_list"
[ "${#agent_plugins[@]}" -gt 0 ] || die "pkg/install/agent-plugins.txt lists no agent plugin"
worker_bins="forge-worker forge-ref-plugin ${agent_plugins[*]}"

# Canonical matrix. Each line: archive-kind goos goarch binaries...
matrix=(
  "cli linux amd64 forge"
  "cli linux arm64 forge"
  "gate linux amd64 forge-gate"
  "gate linux arm64 forge-gate"
  "worker darwin amd64 $worker_bins"
  "worker darwin arm64 $worker_bins"
  "worker linux amd64 $worker_bins"
  "worker linux arm64 $worker_bins"
)

for line in "${matrix[@]}"; do
  read -r _ _ _ bins <<<"$line"
  for b in $bins; do
    [ -f "$work/src/cmd/$b/main.go" ] || die "the commit lacks canonical binary cmd/$b"
  done
done
[ -f "$work/src/release/tools/releasetool/main.go" ] || die "the commit lacks release/tools/releasetool"

# Fill the module cache if needed (verified against go.sum; a no-op when every
# module is already cached). Compilation itself runs with GOPROXY=off.
(cd "$work/src" && GOFLAGS=-mod=readonly GOTOOLCHAIN=local GOWORK=off go mod download) ||
  die "cannot obtain the modules listed in go.sum"

# gobuild GOOS GOARCH ARGS...: run go with a fixed, minimal environment.
gobuild() {
  local goos=$1 goarch=$2
  shift 2
  (cd "$work/src" && env -i \
    PATH="$PATH" HOME="$work/home" TMPDIR="$work/tmp" \
    GOENV=off GOTOOLCHAIN=local GOFLAGS= GOWORK=off GO111MODULE=on \
    GOPROXY=off GOSUMDB=off GONOSUMDB= GOPRIVATE= GOINSECURE= \
    GOCACHE="$gocache" GOMODCACHE="$gomodcache" GOPATH="$work/gopath" \
    CGO_ENABLED=0 GOFIPS140=off GOEXPERIMENT= \
    GOOS="$goos" GOARCH="$goarch" GOAMD64=v1 GOARM64=v8.0 \
    go "$@")
}

hostarch=$(GOTOOLCHAIN=local go env GOHOSTARCH)
gobuild linux "$hostarch" build -trimpath -buildvcs=false -mod=readonly \
  -o "$work/releasetool" ./release/tools/releasetool || die "cannot build the release helper"

pkgpath=github.com/0k-lab/agent-forge/pkg/buildinfo
ldflags="-s -w -buildid= -X $pkgpath.version=$version -X $pkgpath.commit=$commit"
for platform in linux/amd64 linux/arm64 darwin/amd64 darwin/arm64; do
  goos=${platform%/*} goarch=${platform#*/}
  bins=()
  for line in "${matrix[@]}"; do
    read -r _ los larch lbins <<<"$line"
    if [ "$los/$larch" = "$platform" ]; then read -r -a more <<<"$lbins" && bins+=("${more[@]}"); fi
  done
  mapfile -t bins < <(printf '%s\n' "${bins[@]}" | sort -u)
  mkdir -p "$work/bin/$goos-$goarch"
  pkgs=()
  for b in "${bins[@]}"; do pkgs+=("./cmd/$b"); done
  gobuild "$goos" "$goarch" build -trimpath -buildvcs=false -mod=readonly \
    -ldflags="$ldflags" -o "$work/bin/$goos-$goarch/" "${pkgs[@]}" ||
    die "compilation failed for $platform"
done

# --- archives -------------------------------------------------------------
for line in "${matrix[@]}"; do
  read -r kind goos goarch bins <<<"$line"
  name=agent-forge-${kind}_${version}_${goos}_${goarch}
  dir=$work/pkg/$name
  mkdir "$dir"
  printf '%s %s\n' "$version" "$commit" >"$dir/VERSION"
  chmod 0644 "$dir/VERSION"
  for b in $bins; do
    cp -- "$work/bin/$goos-$goarch/$b" "$dir/$b"
    chmod 0755 "$dir/$b"
  done
  "$work/releasetool" archive -dir "$dir" -out "$stage/$name.tar.gz" -mtime "$commit_time" ||
    die "cannot write archive $name"
done

(cd "$stage" && sha256sum -- *.tar.gz >SHA256SUMS && sha256sum --check --strict --quiet SHA256SUMS) ||
  die "cannot write or verify SHA256SUMS"
chmod 0644 "$stage"/*
chmod 0755 "$stage"

# --- publication ----------------------------------------------------------
"$work/releasetool" publish -from "$stage" -to "$dest" || die "publication refused; nothing was replaced"
stage=
archives=("$dest"/*.tar.gz)
echo "build-release: published $version ($commit): ${#archives[@]} archives and SHA256SUMS"
