#!/usr/bin/env bash
# Proof for scripts/build-release.sh: builds the current HEAD twice from two
# private clones in different working-tree states and compares every output
# byte for byte; checks the exact archive set, members, metadata, VERSION
# contents, embedded toolchain/build settings and --version output; proves
# every preflight rejection and the no-replace publication against a
# destination created after preflight. Both builds share the caller's Go build
# cache (compilation output does not depend on it; it only saves time).
#
# Optional environment:
#   RELEASE_E2E_VERSION  version to build (default v0.0.0: not a release)
#   RELEASE_E2E_EXPORT   a path that must not exist; after every check passed,
#                        the verified matrix is copied there (CI uploads it)
set -euo pipefail
export LC_ALL=C

here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/release-artifacts-e2e.XXXXXX")
cleanup() { chmod -R u+w -- "$tmp" 2>/dev/null || true; rm -rf -- "$tmp"; }
trap cleanup EXIT

fail() { echo "release-artifacts-e2e: FAIL: $*" >&2; exit 1; }
step() { echo "== $*"; }

version=${RELEASE_E2E_VERSION:-v0.0.0}
export_dir=${RELEASE_E2E_EXPORT:-}
if [ -n "$export_dir" ] && { [ -e "$export_dir" ] || [ -L "$export_dir" ]; }; then
  fail "RELEASE_E2E_EXPORT already exists"
fi
commit=$(git -C "$here" rev-parse HEAD)
pinned=$(git -C "$here" show "$commit:release/go-version" | tr -d '[:space:]')

clone() { # clone NAME: a private clone with HEAD detached at $commit
  git clone -q --no-hardlinks "$here" "$tmp/$1"
  git -C "$tmp/$1" checkout -q --detach "$commit"
  git -C "$tmp/$1" config user.name "release e2e"
  git -C "$tmp/$1" config user.email "release-e2e@example.invalid"
}
clone a
clone b
# Different working-tree states: clone a carries untracked and ignored-looking
# files and fresh mtimes; clone b is pristine and builds under another umask
# and TMPDIR.
echo "not part of the release" >"$tmp/a/untracked-noise.txt"
mkdir -p "$tmp/a/bin" && echo junk >"$tmp/a/bin/forge-gate"
find "$tmp/a" -path "$tmp/a/.git" -prune -o -type f -exec touch -d '2001-02-03 04:05:06' {} +
mkdir "$tmp/tmp-b"

step "build A (timed full matrix)"
start=$(date +%s)
(cd "$tmp/a" && scripts/build-release.sh "$version" "$commit" "$tmp/out-a") || fail "build A failed"
echo "full matrix build wall time: $(( $(date +%s) - start ))s"
step "build B"
(cd "$tmp/b" && umask 077 && TMPDIR="$tmp/tmp-b" scripts/build-release.sh "$version" "$commit" "$tmp/out-b") ||
  fail "build B failed"

step "byte-for-byte reproducibility"
[ "$(ls -A "$tmp/out-a")" = "$(ls -A "$tmp/out-b")" ] || fail "the two builds published different file sets"
for f in "$tmp/out-a"/*; do
  cmp -s -- "$f" "$tmp/out-b/$(basename -- "$f")" || fail "$(basename -- "$f") differs between builds"
done

step "exact archive set and SHA256SUMS"
expected=(
  "agent-forge-cli_${version}_linux_amd64.tar.gz"
  "agent-forge-cli_${version}_linux_arm64.tar.gz"
  "agent-forge-gate_${version}_linux_amd64.tar.gz"
  "agent-forge-gate_${version}_linux_arm64.tar.gz"
  "agent-forge-worker_${version}_darwin_amd64.tar.gz"
  "agent-forge-worker_${version}_darwin_arm64.tar.gz"
  "agent-forge-worker_${version}_linux_amd64.tar.gz"
  "agent-forge-worker_${version}_linux_arm64.tar.gz"
)
[ "$(ls -A "$tmp/out-a")" = "$(printf '%s\n' SHA256SUMS "${expected[@]}")" ] || fail "unexpected published file set"
[ "$(stat -c %a "$tmp/out-a")" = 755 ] || fail "output directory mode is not 0755"
for f in "$tmp/out-a"/*; do [ "$(stat -c %a "$f")" = 644 ] || fail "$(basename -- "$f") mode is not 0644"; done
[ "$(awk '{print $2}' "$tmp/out-a/SHA256SUMS")" = "$(printf '%s\n' "${expected[@]}")" ] ||
  fail "SHA256SUMS does not list exactly the archives in sorted order"
(cd "$tmp/out-a" && sha256sum --check --strict --quiet SHA256SUMS) || fail "SHA256SUMS does not verify"
grep -Eqv '^[0-9a-f]{64}  [^ ]+$' "$tmp/out-a/SHA256SUMS" && fail "SHA256SUMS has a malformed line"

step "archive members, metadata and VERSION"
commit_time=$(git -C "$here" show -s --format=%ct "$commit")
# The Worker archives carry every agent plugin of the commit's one list.
agents=$(git -C "$here" show "$commit:pkg/install/agent-plugins.txt") || fail "the commit has no agent plugin list"
python3 - "$tmp/out-a" "$version" "$commit" "$commit_time" "$agents" <<'PY' || fail "archive metadata check failed"
import os, sys, tarfile
out, version, commit, mtime = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
agents = sys.argv[5].split()
assert agents and all(a.startswith("forge-") and a.endswith("-plugin") for a in agents), agents
members = {
    "cli": ["VERSION", "forge"],
    "gate": ["VERSION", "forge-gate"],
    "worker": ["VERSION"] + sorted(agents + ["forge-ref-plugin", "forge-worker"]),
}
for name in sorted(os.listdir(out)):
    if name == "SHA256SUMS":
        continue
    kind = name.split("_")[0].removeprefix("agent-forge-")
    raw = open(os.path.join(out, name), "rb").read()
    # gzip: magic, deflate, no FNAME/FEXTRA/FCOMMENT flags, MTIME 0, OS 255.
    assert raw[:4] == b"\x1f\x8b\x08\x00", (name, raw[:4])
    assert raw[4:8] == b"\x00\x00\x00\x00", (name, "gzip mtime")
    assert raw[9] == 255, (name, "gzip OS byte")
    with tarfile.open(os.path.join(out, name), "r:gz") as tf:
        infos = tf.getmembers()
        assert [i.name for i in infos] == members[kind], (name, [i.name for i in infos])
        for i in infos:
            assert i.type == tarfile.REGTYPE, (name, i.name, "type")
            assert (i.uid, i.gid, i.uname, i.gname) == (0, 0, "", ""), (name, i.name, "owner")
            assert i.mtime == mtime, (name, i.name, "mtime")
            want = 0o644 if i.name == "VERSION" else 0o755
            assert i.mode == want, (name, i.name, oct(i.mode))
        got = tf.extractfile("VERSION").read()
        assert got == f"{version} {commit}\n".encode(), (name, got)
PY
listing=$(tar --numeric-owner -tvzf "$tmp/out-a/${expected[6]}")
grep -q '^-rwxr-xr-x 0/0 .* forge-worker$' <<<"$listing" && grep -q '^-rw-r--r-- 0/0 .* VERSION$' <<<"$listing" ||
  fail "GNU tar does not see normalized members"

step "embedded toolchain, build settings and --version"
for archive in "${expected[@]}"; do
  platform=$(basename -- "$archive" .tar.gz)
  goos=$(cut -d_ -f3 <<<"$platform") goarch=$(cut -d_ -f4 <<<"$platform")
  dir=$tmp/x/$platform
  mkdir -p "$dir"
  tar -xzf "$tmp/out-a/$archive" -C "$dir"
  for bin in "$dir"/*; do
    b=$(basename -- "$bin")
    [ "$b" = VERSION ] && continue
    info=$(go version -m "$bin") || fail "go version -m cannot read $b ($platform)"
    head -1 <<<"$info" | grep -q ": $pinned\$" || fail "$b ($platform) not built with pinned $pinned"
    grep -q $'^\tbuild\t-trimpath=true$' <<<"$info" || fail "$b ($platform) lacks -trimpath"
    grep -q $'^\tbuild\tCGO_ENABLED=0$' <<<"$info" || fail "$b ($platform) lacks CGO_ENABLED=0"
    grep -q $'^\tbuild\tGOOS='"$goos"'$' <<<"$info" || fail "$b ($platform) has the wrong GOOS"
    grep -q $'^\tbuild\tGOARCH='"$goarch"'$' <<<"$info" || fail "$b ($platform) has the wrong GOARCH"
    grep -q $'^\tbuild\tvcs' <<<"$info" && fail "$b ($platform) carries automatic VCS stamping"
    grep -q 'GOEXPERIMENT' <<<"$info" && fail "$b ($platform) was built with a Go experiment"
    [ -z "$(go tool buildid "$bin")" ] || fail "$b ($platform) has a non-empty build ID"
    grep -aq "$commit" "$bin" || fail "$b ($platform) does not embed the commit"
    if [ "$goos/$goarch" = "$(go env GOHOSTOS)/$(go env GOHOSTARCH)" ]; then
      got=$("$bin" --version) || fail "$b --version failed"
      [ "$got" = "$b $version $commit" ] || fail "$b --version printed an unexpected line"
    fi
  done
done

step "preflight rejections"
clone c
other=$(git -C "$tmp/c" rev-parse HEAD)
# reject NAME EXPECTED-MESSAGE-FRAGMENT -- ARGS...: runs the builder in clone c
# and requires a nonzero exit, the message, and no published output.
reject() {
  local what=$1 needle=$2 rc=0
  shift 3
  (cd "$tmp/c" && scripts/build-release.sh "$@") >"$tmp/reject.out" 2>&1 || rc=$?
  [ "$rc" -ne 0 ] || fail "$what was accepted"
  grep -qF -- "$needle" "$tmp/reject.out" || fail "$what: unexpected message: $(head -c 300 "$tmp/reject.out")"
  if [ -e "$tmp/never" ] || [ -L "$tmp/never" ]; then fail "$what published output"; fi
  if compgen -G "$tmp/.forge-release-stage.*" >/dev/null; then fail "$what left a staging directory"; fi
  echo "rejected: $what"
}
for v in 0.1.0 v0.1 v0.1.0.0 v01.0.0 v0.01.0 V0.1.0 "v0.1.0 " ""; do
  reject "version '$v'" "version must be vMAJOR.MINOR.PATCH" -- "$v" "$commit" "$tmp/never"
done
for v in v0.1.0-rc.1 v0.1.0-alpha v1.0.0+build.5 v1.0.0-rc.1+meta; do
  reject "prerelease/build version '$v'" "without prerelease or build suffix" -- "$v" "$commit" "$tmp/never"
done
upper=$(tr 'a-f' 'A-F' <<<"$commit")
[ "$upper" != "$commit" ] || upper=${commit:0:39}G
for c in "$upper" "${commit:0:12}" "${commit}0" "${commit:0:39}g" "" HEAD main; do
  reject "commit '$c'" "full lowercase 40-hex SHA" -- "$version" "$c" "$tmp/never"
done
reject "unknown commit" "does not exist" -- "$version" 0000000000000000000000000000000000000001 "$tmp/never"
reject "missing output parent" "parent directory does not exist" -- "$version" "$commit" "$tmp/no-such-dir/out"
reject "trailing-slash output" "must name a new directory" -- "$version" "$commit" "$tmp/never/"

echo "local change" >>"$tmp/c/README.md"
reject "unstaged change to a tracked file" "uncommitted changes" -- "$version" "$commit" "$tmp/never"
git -C "$tmp/c" add README.md
reject "staged change to a tracked file" "uncommitted changes" -- "$version" "$commit" "$tmp/never"
git -C "$tmp/c" commit -q -m "move HEAD"
other=$(git -C "$tmp/c" rev-parse HEAD)
reject "HEAD not equal to commit" "HEAD does not equal" -- "$version" "$commit" "$tmp/never"
git -C "$tmp/c" checkout -q --detach "$commit"
[ "$(git -C "$tmp/c" rev-parse HEAD)" = "$commit" ] && [ "$other" != "$commit" ] || fail "clone c setup"

# Existing outputs of every kind are refused and left exactly as they were.
mkdir "$tmp/exists-dir" && echo keep >"$tmp/exists-dir/keep"
echo keep >"$tmp/exists-file"
ln -s exists-dir "$tmp/exists-symlink"
ln -s no-such-target "$tmp/exists-dangling"
for kind in dir file symlink dangling; do
  p=$tmp/exists-$kind
  before=$(stat -c '%F %s %Y' -- "$p"; readlink -- "$p" || true)
  reject "existing output ($kind)" "already exists" -- "$version" "$commit" "$p"
  after=$(stat -c '%F %s %Y' -- "$p"; readlink -- "$p" || true)
  [ "$before" = "$after" ] || fail "existing $kind output was modified"
done
[ "$(cat "$tmp/exists-dir/keep")" = keep ] && [ "$(ls -A "$tmp/exists-dir")" = keep ] || fail "existing directory content changed"
[ "$(cat "$tmp/exists-file")" = keep ] || fail "existing file changed"

step "no-replace publication against a destination created after preflight"
# The builder creates its staging directory beside the output only after
# every preflight check; the matrix build that follows takes seconds. Create
# the destination as soon as the staging directory appears: publication
# must then refuse it and leave it as it is.
rc=0
(cd "$tmp/c" && exec scripts/build-release.sh "$version" "$commit" "$tmp/raced") >"$tmp/race.out" 2>&1 &
race_pid=$!
for _ in $(seq 6000); do
  compgen -G "$tmp/.forge-release-stage.*" >/dev/null && break
  kill -0 "$race_pid" 2>/dev/null || break
  sleep 0.01
done
compgen -G "$tmp/.forge-release-stage.*" >/dev/null || fail "race: the builder never created its staging directory"
mkdir -- "$tmp/raced"
echo "created after preflight" >"$tmp/raced/marker"
wait "$race_pid" || rc=$?
[ "$rc" -ne 0 ] || fail "publication replaced a destination created mid-build"
grep -qF "publication refused" "$tmp/race.out" || fail "race: unexpected message: $(tail -c 300 "$tmp/race.out")"
[ "$(ls -A "$tmp/raced")" = marker ] && [ "$(cat "$tmp/raced/marker")" = "created after preflight" ] ||
  fail "the destination created mid-build was modified"
if compgen -G "$tmp/.forge-release-stage.*" >/dev/null; then fail "refused publication left a staging directory"; fi

step "the Homebrew Formula rendered from this build"
# scripts/render-formula.sh reads the darwin archives and SHA256SUMS of the
# real output; the result must be valid Ruby naming exactly those digests.
url=https://github.com/0k-lab/homebrew-agent-forge/releases/download/$version
"$here/scripts/render-formula.sh" "$tmp/out-a" "$url" >"$tmp/forge-worker.rb" || fail "render-formula failed"
for arch in arm64 amd64; do
  a=agent-forge-worker_${version}_darwin_${arch}.tar.gz
  digest=$(awk -v n="$a" '$2 == n { print $1 }' "$tmp/out-a/SHA256SUMS")
  grep -qxF "      url \"$url/$a\"" "$tmp/forge-worker.rb" || fail "the Formula lacks the $arch url"
  grep -qxF "      sha256 \"$digest\"" "$tmp/forge-worker.rb" || fail "the Formula lacks the $arch digest"
done
grep -qxF "  version \"${version#v}\"" "$tmp/forge-worker.rb" || fail "the Formula names another version"
grep -qF "#{name} $version $commit\\n" "$tmp/forge-worker.rb" || fail "the Formula's test does not expect the release's --version"
# It installs and tests every binary of the Worker archive, each agent
# plugin of the list included.
# shellcheck disable=SC2086 # $agents is the list's words
worker_bins=$(printf '%s\n' forge-worker forge-ref-plugin $agents | sort)
grep -qxF "    bin.install $(sed 's/.*/"&"/' <<<"$worker_bins" | paste -sd, | sed 's/,/, /g')" "$tmp/forge-worker.rb" ||
  fail "the Formula does not install exactly the Worker archive's binaries"
grep -qxF "    %w[$(paste -sd' ' <<<"$worker_bins")].each do |name|" "$tmp/forge-worker.rb" ||
  fail "the Formula's test does not check every Worker binary"
if grep -q '@[A-Z0-9_]*@' "$tmp/forge-worker.rb"; then fail "the Formula has an unfilled placeholder"; fi
ruby -c "$tmp/forge-worker.rb" >/dev/null || fail "the rendered Formula is not valid Ruby"
# A tampered archive is refused.
mkdir "$tmp/bad-formula"
cp -p "$tmp/out-a"/SHA256SUMS "$tmp/out-a"/agent-forge-worker_*_darwin_*.tar.gz "$tmp/bad-formula/"
printf x >>"$tmp/bad-formula/agent-forge-worker_${version}_darwin_amd64.tar.gz"
if "$here/scripts/render-formula.sh" "$tmp/bad-formula" "$url" >/dev/null 2>&1; then fail "render-formula accepted a tampered archive"; fi
if command -v brew >/dev/null; then
  brew style --formula "$tmp/forge-worker.rb" || fail "brew style"
  brew audit --formula --strict "$tmp/forge-worker.rb" || fail "brew audit"
else
  echo "release-artifacts-e2e: brew style and brew audit skipped: brew is not installed here (ruby -c checked the Formula)"
fi

if [ -n "$export_dir" ]; then
  mkdir -- "$export_dir"
  cp -p -- "$tmp/out-a"/* "$export_dir/"
  (cd "$export_dir" && sha256sum --check --strict --quiet SHA256SUMS) || fail "exported matrix does not verify"
  echo "verified matrix exported"
fi
echo "RELEASE-ARTIFACTS PASS"
