#!/usr/bin/env bash
# Renders the Homebrew Formula (install/forge-worker.rb) for one release.
#
#   scripts/render-formula.sh <release-dir> <url-base>
#
# <release-dir> is a scripts/build-release.sh output (or any directory with
# the two darwin Worker archives and a SHA256SUMS listing them); <url-base>
# is the https URL the archives are downloaded from (without a trailing
# slash). The version and commit come from the archives' VERSION member,
# each archive is hashed and compared with its SHA256SUMS line, and the
# Formula is written to stdout. Exit 1 on any mismatch, 2 on usage.
set -euo pipefail
export LC_ALL=C
die() { echo "render-formula: error: $*" >&2; exit 1; }
[ $# -eq 2 ] || { echo "usage: scripts/render-formula.sh <release-dir> <url-base>" >&2; exit 2; }
dir=$1 base=$2
[[ $base =~ ^https://[A-Za-z0-9.-]+(/[A-Za-z0-9._~%-]+)*$ ]] || die "url-base must be an https URL without a trailing slash"
root=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)
template=$root/install/forge-worker.rb
# The Worker's binaries: forge-worker, the reference plugin and every agent
# plugin of the one list (pkg/install/agent-plugins.txt), byte-wise sorted
# as the archives hold them.
agents=()
while IFS= read -r p; do
  [[ $p =~ ^forge-[a-z][a-z0-9]*-plugin$ ]] && [ "$p" != forge-ref-plugin ] || die "pkg/install/agent-plugins.txt holds a line that is not an agent plugin name"
  agents+=("$p")
done <"$root/pkg/install/agent-plugins.txt"
[ "${#agents[@]}" -gt 0 ] || die "pkg/install/agent-plugins.txt lists no agent plugin"
mapfile -t bins < <(printf '%s\n' forge-worker forge-ref-plugin "${agents[@]}" | sort)
want_members="VERSION ${bins[*]} "
install_list=$(printf '"%s", ' "${bins[@]}")
install_list=${install_list%, }
[ -f "$dir/SHA256SUMS" ] || die "$dir has no SHA256SUMS"
shopt -s nullglob
archives=("$dir"/agent-forge-worker_v*_darwin_arm64.tar.gz)
[ "${#archives[@]}" -eq 1 ] || die "expected exactly one darwin arm64 Worker archive"
name=$(basename -- "${archives[0]}")
tag=${name#agent-forge-worker_}
tag=${tag%_darwin_arm64.tar.gz}
[[ $tag =~ ^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$ ]] || die "archive version is not vMAJOR.MINOR.PATCH"
commit=''
declare -A sum
for arch in arm64 amd64; do
  a=agent-forge-worker_${tag}_darwin_${arch}.tar.gz
  [ -f "$dir/$a" ] && [ ! -L "$dir/$a" ] || die "$a is missing or not a regular file"
  listed=$(awk -v n="$a" '$2 == n { print $1 }' "$dir/SHA256SUMS")
  [[ $listed =~ ^[0-9a-f]{64}$ ]] || die "SHA256SUMS does not list $a once"
  actual=$(sha256sum -- "$dir/$a" | cut -d' ' -f1)
  [ "$actual" = "$listed" ] || die "$a does not match SHA256SUMS"
  sum[$arch]=$actual
  members=$(tar -tzf "$dir/$a" | tr '\n' ' ')
  [ "$members" = "$want_members" ] || die "$a does not hold exactly the Worker's files"
  read -r v c < <(tar -xzOf "$dir/$a" VERSION)
  [ "$v" = "$tag" ] && [[ $c =~ ^[0-9a-f]{40}$ ]] || die "$a VERSION does not name its version and a commit"
  [ -z "$commit" ] || [ "$commit" = "$c" ] || die "the darwin archives name different commits"
  commit=$c
done
sed -e "s|@VERSION@|${tag#v}|g" -e "s|@TAG@|$tag|g" -e "s|@COMMIT@|$commit|g" -e "s|@URL_BASE@|$base|g" \
  -e "s|@SHA256_ARM64@|${sum[arm64]}|g" -e "s|@SHA256_AMD64@|${sum[amd64]}|g" \
  -e "s|@BINARIES@|$install_list|g" -e "s|@BINARY_WORDS@|${bins[*]}|g" "$template"
