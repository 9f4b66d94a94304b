# shellcheck shell=bash
# Offline github.com / api.github.com for e2e scripts that run the
# production binaries unmodified. Source it, before the script changes
# directory, with
#   source "$(dirname "$0")/lib/netns.sh"
# It only defines functions. They use the caller's globals tmp, pids and
# bin and the caller's `fail MESSAGE`, like scripts/lib/e2e.sh.
#
#   netns_enter ARGS..  unless already inside, re-exec the calling script
#                       ("$0" ARGS) in a private network and mount namespace:
#                       `unshare -m -n` as root, `unshare -r -m -n`
#                       otherwise. Call it first thing, before any setup.
#                       Nothing inside can reach another address than
#                       loopback.
#   netns_setup         inside: bring up lo; build $bin/fake-github; write a
#                       fresh test PKI into $tmp/pki; bind-mount over
#                       /etc/hosts a file mapping github.com and
#                       api.github.com to 127.0.0.1, and over
#                       /etc/ssl/certs/ca-certificates.crt the system bundle
#                       plus the test CA (the mounts vanish with the
#                       namespace). Sets fake_git_root=$tmp/github (bare
#                       repositories as <owner>/<repo>.git).
#   netns_start_fake [ARGS..]
#                       start `fake-github serve` (plus ARGS, e.g. -app FILE
#                       -tokens FILE for the REST API) on 127.0.0.1:443 with its
#                       request log at $tmp/github-requests.log, add it to
#                       pids, wait until it serves; sets fake_pid and
#                       fake_control (host:port of the plain-HTTP control
#                       routes).
#   netns_fault REPO MODE
#                       make github.com answer owner/repo REPO with MODE
#                       (redirect, auth, error, or "" for normal service).

# shellcheck disable=SC2154 # tmp, pids and bin belong to the caller

netns_enter() {
  [ "${AGENT_FORGE_NETNS:-}" = 1 ] && return 0
  command -v unshare >/dev/null || { echo "netns: unshare (util-linux) is required" >&2; exit 1; }
  local flags=(-m -n)
  [ "$(id -u)" = 0 ] || flags=(-r -m -n)
  AGENT_FORGE_NETNS=1 exec unshare "${flags[@]}" -- bash "$0" "$@"
}

netns_setup() {
  [ "${AGENT_FORGE_NETNS:-}" = 1 ] || fail "netns_setup outside the namespace"
  command -v ip >/dev/null || fail "netns: ip (iproute2) is required"
  ip link set lo up || fail "netns: cannot bring up lo"
  [ -f /etc/ssl/certs/ca-certificates.crt ] || fail "netns: /etc/ssl/certs/ca-certificates.crt is missing (package ca-certificates)"
  go build -o "$bin/fake-github" ./testdata/fake-github || fail "build fake-github"
  "$bin/fake-github" pki "$tmp/pki" || fail "netns: test PKI"
  printf '127.0.0.1 localhost github.com api.github.com\n::1 localhost\n' >"$tmp/hosts"
  cat /etc/ssl/certs/ca-certificates.crt "$tmp/pki/ca.pem" >"$tmp/ca-bundle.crt"
  chmod 0644 "$tmp/hosts" "$tmp/ca-bundle.crt"
  mount --bind "$tmp/hosts" /etc/hosts || fail "netns: bind /etc/hosts"
  mount --bind "$tmp/ca-bundle.crt" /etc/ssl/certs/ca-certificates.crt || fail "netns: bind CA bundle"
  fake_git_root=$tmp/github
  mkdir -p "$fake_git_root"
}

netns_start_fake() {
  rm -f "$tmp/fake-github.ready"
  "$bin/fake-github" serve -listen 127.0.0.1:443 -pki "$tmp/pki" -git-root "$fake_git_root" \
    -log "$tmp/github-requests.log" -ready "$tmp/fake-github.ready" "$@" 2>"$tmp/fake-github.log" &
  fake_pid=$!
  pids+=("$fake_pid")
  local i
  for ((i = 0; i < 300; i++)); do
    [ -s "$tmp/fake-github.ready" ] && break
    kill -0 "$fake_pid" 2>/dev/null || fail "fake-github exited"
    sleep 0.1
  done
  [ -s "$tmp/fake-github.ready" ] || fail "fake-github did not start"
  fake_control=$(cat "$tmp/fake-github.ready")
}

netns_fault() {
  curl -fsS -X POST --data "{\"repo\":\"$1\",\"mode\":\"$2\"}" "http://$fake_control/fault" ||
    fail "netns: set fault $2 on $1"
}
