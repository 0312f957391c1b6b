#!/bin/sh
# A new Debian machine, simulated: debootstrap a bare Debian bookworm into a
# folder, clone this repository into it, and there run README's two
# commands as written, as root:
#   make run   until it serves the page and the API, then SIGTERM
#   make test  everything, the browser tests included
# Everything they need must come from the project's own files. It takes
# several minutes and a few GB of disk, so it is not part of `make test`.
#
#   sudo tests/fresh-machine.sh            (FRESH_ROOT=/var/tmp/attnd-fresh)
#
# A bare debootstrap has no make (README's note says to install it first,
# as any machine that is to run a Makefile needs); that is the one package
# this script installs before README's commands. The mirror and any apt
# proxy are the host's own.
set -eu

repo=$(cd "$(dirname "$0")/.." && pwd)
root=${FRESH_ROOT:-/var/tmp/attnd-fresh}
port=8080

say() { printf 'fresh-machine: %s\n' "$*"; }
fail() { say "FAILED: $*"; exit 1; }

[ "$(id -u)" = 0 ] || fail "run as root (debootstrap and chroot)"
command -v debootstrap >/dev/null ||
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends debootstrap
command -v git >/dev/null || fail "git is needed to clone the repository"

# The host's Debian mirror and apt proxy settings.
mirror=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.sources 2>/dev/null |
    awk '/^URIs:/ && $2 ~ /debian\/?$/ { print $2; exit }
         /^deb / && $0 ~ /bookworm/ { for (i = 2; i <= NF; i++) if ($i ~ /^https?:/) { print $i; exit } }')
[ -n "$mirror" ] || fail "no Debian mirror in /etc/apt/sources.list*"

cleanup() {
    for m in dev/shm dev/pts dev sys proc; do
        mountpoint -q "$root/$m" 2>/dev/null && umount -l "$root/$m"
    done
    return 0
}
trap cleanup EXIT INT TERM
cleanup   # mounts left by a run that was killed

if [ ! -x "$root/usr/bin/apt-get" ]; then
    say "debootstrap bookworm into $root from $mirror"
    rm -rf --one-file-system "$root"
    debootstrap --variant=minbase bookworm "$root" "$mirror" >"$root.debootstrap.log" 2>&1 ||
        fail "debootstrap (see $root.debootstrap.log)"
fi
# The host's network, as the new machine would have its own: name
# servers, apt proxy, and the certificate authorities this network's
# TLS goes through (for the npm registry).
cp /etc/resolv.conf "$root/etc/resolv.conf"
grep -hiE '^Acquire::(https?|ftp)::Proxy' /etc/apt/apt.conf /etc/apt/apt.conf.d/* 2>/dev/null \
    >"$root/etc/apt/apt.conf.d/99host-proxy" || true
mkdir -p "$root/usr/local/share/ca-certificates"
cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/" 2>/dev/null || true
extra_ca=""
if [ -n "${NODE_EXTRA_CA_CERTS:-}" ] && [ -f "$NODE_EXTRA_CA_CERTS" ]; then
    mkdir -p "$root$(dirname "$NODE_EXTRA_CA_CERTS")"
    cp "$NODE_EXTRA_CA_CERTS" "$root$NODE_EXTRA_CA_CERTS"
    extra_ca="NODE_EXTRA_CA_CERTS=$NODE_EXTRA_CA_CERTS"
fi
for m in proc sys dev dev/pts; do mkdir -p "$root/$m"; done
mount -t proc proc "$root/proc"
mount --rbind /sys "$root/sys"
mount --rbind /dev "$root/dev"
mountpoint -q "$root/dev/shm" || mount -t tmpfs shm "$root/dev/shm"

say "a clone of the repository"
rm -rf --one-file-system "$root/root/attnd"
git clone -q "$repo" "$root/root/attnd"

in_chroot() { chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin \
    TERM=dumb LANG=C.UTF-8 $extra_ca /bin/sh -c "$1"; }

say "the one prerequisite README names: make"
in_chroot 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends make' \
    >"$root.prereq.log" 2>&1 || fail "installing make (see $root.prereq.log)"

say "make run"
if curl -s -o /dev/null "http://127.0.0.1:$port/" 2>/dev/null; then
    fail "port $port is already in use on this host"
fi
setsid chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
    $extra_ca /bin/sh -c 'cd /root/attnd && exec make run' >"$root.run.log" 2>&1 &
run_pid=$!
served=no
for _ in $(seq 1 900); do   # up to 15 minutes: it installs and builds first
    if curl -fsS -o /dev/null "http://127.0.0.1:$port/healthz" 2>/dev/null; then served=yes; break; fi
    kill -0 "$run_pid" 2>/dev/null || break
    sleep 1
done
if [ "$served" = yes ]; then
    curl -fsS "http://127.0.0.1:$port/" | grep -q '<title>attnd' || served=no
    curl -fsS "http://127.0.0.1:$port/attention" -H 'Content-Type: application/json' \
        -d '{"sentence": "The cat chased the mouse"}' | grep -q '"weights"' || served=no
fi
kill -TERM "-$run_pid" 2>/dev/null || true   # the process group this script started
wait "$run_pid" 2>/dev/null || true
[ "$served" = yes ] || fail "make run did not serve the page and the API (see $root.run.log)"
say "make run served http://127.0.0.1:$port/ and answered /attention"

say "make test"
in_chroot 'cd /root/attnd && make test' >"$root.test.log" 2>&1 ||
    { tail -n 30 "$root.test.log"; fail "make test (see $root.test.log)"; }
grep -E '^tests: |^# (pass|fail) ' "$root.test.log" | sed 's/^/fresh-machine:   /'
say "OK: a clone on a bare Debian bookworm runs README's make run and make test"
