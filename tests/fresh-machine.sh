#!/bin/sh
# New machines, simulated: debootstrap a bare Debian bookworm into a folder,
# clone this repository into a copy of it, and there run README's two
# commands as written, as root:
#   make run   until it serves the page and the API, then SIGTERM
#   make test  everything, the browser tests included
# Everything they need must come from the project's own files. Two cases:
#   bare           Debian as debootstrap leaves it: no Node.js at all
#   build-machine  as the machines this project is built on: a Node.js and
#                  npm already there that Debian's archive did not supply.
#                  This host's own are carried in: when a package owns the
#                  host's node (as NodeSource's nodejs does, which bundles
#                  npm and conflicts with Debian's npm), as that package,
#                  rebuilt from the files the host has now; otherwise as
#                  plain files under /usr/local that no package owns.
# It takes several minutes and a few GB of disk, so it is not part of
# `make test`.
#
#   sudo tests/fresh-machine.sh [bare|build-machine|both]   (default both)
#
# FRESH_ROOT (/var/tmp/attnd-fresh) holds the debootstrapped base, kept for
# the next run, a copy of it per case, and each case's logs.
#
# A bare debootstrap has no make (README's note says to install it first,
# as any machine that is to run a Makefile needs); that is the one package
# this script installs before README's commands. The mirror and any apt
# proxy are the host's own.
set -eu

repo=$(cd "$(dirname "$0")/.." && pwd)
top=${FRESH_ROOT:-/var/tmp/attnd-fresh}
port=8080
cases=${1:-both}

say() { printf 'fresh-machine: %s\n' "$*"; }
fail() { say "FAILED: $*"; exit 1; }

case $cases in
both) cases="bare build-machine" ;;
bare | build-machine) ;;
*) fail "usage: tests/fresh-machine.sh [bare|build-machine|both]" ;;
esac
[ "$(id -u)" = 0 ] || fail "run as root (debootstrap and chroot)"
command -v debootstrap >/dev/null ||
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends debootstrap
command -v git >/dev/null || fail "git is needed to clone the repository"

# The host's Debian mirror and apt proxy settings.
mirror=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.sources 2>/dev/null |
    awk '/^URIs:/ && $2 ~ /debian\/?$/ { print $2; exit }
         /^deb / && $0 ~ /bookworm/ { for (i = 2; i <= NF; i++) if ($i ~ /^https?:/) { print $i; exit } }')
[ -n "$mirror" ] || fail "no Debian mirror in /etc/apt/sources.list*"

root=""
unmount() {
    [ -n "$root" ] || return 0
    for m in dev/shm dev/pts dev sys proc; do
        mountpoint -q "$root/$m" 2>/dev/null && umount -l "$root/$m"
    done
    return 0
}
cleanup() {
    for r in "$top"/*/; do root=${r%/}; unmount; done
    return 0
}
trap cleanup EXIT INT TERM
cleanup # mounts left by a run that was killed

mkdir -p "$top"
base=$top/base
if [ ! -x "$base/usr/bin/apt-get" ]; then
    say "debootstrap bookworm into $base from $mirror"
    rm -rf --one-file-system "$base"
    debootstrap --variant=minbase bookworm "$base" "$mirror" >"$top/debootstrap.log" 2>&1 ||
        fail "debootstrap (see $top/debootstrap.log)"
fi

# This host's Node.js, as a package built from the files the host has now
# (its npm may have been upgraded in place since the package was
# installed), with the package's own name, version and relations.
host_node_deb() {
    node=$(readlink -f "$(command -v node)")
    owner=$(dpkg-query -S "$node" 2>/dev/null | cut -d: -f1)
    [ -n "$owner" ] || return 1
    pkg=$top/host-node
    rm -rf "$pkg"
    mkdir -p "$pkg/DEBIAN" "$pkg/usr/bin" "$pkg/usr/lib/node_modules"
    cp -a "$node" "$pkg/usr/bin/node"
    for m in /usr/lib/node_modules/*; do cp -a "$m" "$pkg/usr/lib/node_modules/"; done
    for b in npm npx corepack; do
        [ -L "/usr/bin/$b" ] && cp -a "/usr/bin/$b" "$pkg/usr/bin/$b"
    done
    dpkg-query -W -f='Package: ${Package}\nVersion: ${Version}\nArchitecture: ${Architecture}\nMaintainer: ${Maintainer}\nDepends: ${Depends}\nConflicts: ${Conflicts}\nProvides: ${Provides}\nReplaces: ${Replaces}\nDescription: ${Description}\n' "$owner" |
        grep -v '^[A-Za-z]*: *$' >"$pkg/DEBIAN/control"
    dpkg-deb --root-owner-group -Zgzip --build "$pkg" "$top/host-node.deb" >/dev/null
    rm -rf "$pkg"
    echo "$owner $(dpkg-query -W -f='${Version}' "$owner")"
}

# $extra_ca is empty or one VAR=value word.
# shellcheck disable=SC2086
in_chroot() {
    chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        TERM=dumb LANG=C.UTF-8 $extra_ca /bin/sh -c "$1"
}

run_case() {
    name=$1
    root=$top/$name
    log=$top/$name
    say "[$name] a copy of the bare bookworm in $root"
    unmount
    rm -rf --one-file-system "$root"
    cp -a "$base" "$root"
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

    say "[$name] a clone of the repository"
    git clone -q "$repo" "$root/root/attnd"

    say "[$name] the one prerequisite README names: make"
    in_chroot 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends make' \
        >"$log.prereq.log" 2>&1 || fail "installing make (see $log.prereq.log)"

    if [ "$name" = build-machine ]; then
        if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
            fail "the build-machine case carries in this host's Node.js and npm, and it has none"
        fi
        if owner=$(host_node_deb); then
            say "[$name] this host's Node.js $(node --version) and npm $(npm --version), as its package $owner"
            cp "$top/host-node.deb" "$root/root/host-node.deb"
            in_chroot 'DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends /root/host-node.deb' \
                >>"$log.prereq.log" 2>&1 || fail "installing the host's Node.js (see $log.prereq.log)"
            if in_chroot 'apt-get install -s npm' >"$log.npm-conflict.log" 2>&1; then
                say "[$name] (Debian's npm would install beside it)"
            else
                say "[$name] Debian's npm conflicts with it, as on the build machines"
            fi
        else
            say "[$name] this host's Node.js $(node --version) and npm $(npm --version), as files under /usr/local"
            prefix=$(dirname "$(dirname "$(readlink -f "$(command -v node)")")")
            mkdir -p "$root/usr/local/bin" "$root/usr/local/lib/node_modules"
            cp -a "$(readlink -f "$(command -v node)")" "$root/usr/local/bin/node"
            cp -a "$prefix/lib/node_modules/npm" "$root/usr/local/lib/node_modules/"
            ln -sf ../lib/node_modules/npm/bin/npm-cli.js "$root/usr/local/bin/npm"
            ln -sf ../lib/node_modules/npm/bin/npx-cli.js "$root/usr/local/bin/npx"
        fi
        in_chroot 'node --version && npm --version' >/dev/null 2>&1 ||
            fail "the carried-in Node.js does not run in the chroot"
    fi

    say "[$name] make run"
    if curl -s -o /dev/null "http://127.0.0.1:$port/" 2>/dev/null; then
        fail "port $port is already in use on this host"
    fi
    # shellcheck disable=SC2086
    setsid chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        LANG=C.UTF-8 $extra_ca /bin/sh -c 'cd /root/attnd && exec make run' >"$log.run.log" 2>&1 &
    run_pid=$!
    served=no
    for _ in $(seq 1 900); do # up to 15 minutes: it installs and builds first
        if curl -fsS -o /dev/null "http://127.0.0.1:$port/healthz" 2>/dev/null; then
            served=yes
            break
        fi
        kill -0 "$run_pid" 2>/dev/null || break
        sleep 1
    done
    if [ "$served" = yes ]; then
        curl -fsS "http://127.0.0.1:$port/" | grep -q '<title>attnd' || served=no
        curl -fsS "http://127.0.0.1:$port/attention" -H 'Content-Type: application/json' \
            -d '{"sentence": "The cat chased the mouse"}' | grep -q '"weights"' || served=no
    fi
    kill -TERM "-$run_pid" 2>/dev/null || true # the process group this script started
    wait "$run_pid" 2>/dev/null || true
    [ "$served" = yes ] || fail "[$name] make run did not serve the page and the API (see $log.run.log)"
    say "[$name] make run served http://127.0.0.1:$port/ and answered /attention"
    grep '^attnd: ' "$log.run.log" | sed "s/^/fresh-machine: [$name]   /"

    say "[$name] make test"
    in_chroot 'cd /root/attnd && make test' >"$log.test.log" 2>&1 ||
        {
            tail -n 30 "$log.test.log"
            fail "[$name] make test (see $log.test.log)"
        }
    grep -E '^attnd: |^tests: |^# (pass|fail) ' "$log.test.log" | sed "s/^/fresh-machine: [$name]   /"
    # shellcheck disable=SC2016 # expanded by dpkg-query, not the shell
    in_chroot 'node --version; npm --version; dpkg-query -W -f="\${Package} \${Version}\n" nodejs npm 2>/dev/null' |
        tr '\n' ' ' | sed "s/^/fresh-machine: [$name]   node, npm, their packages: /; s/ *\$/\n/"
    say "[$name] OK: README's make run and make test pass"
    unmount
}

for c in $cases; do run_case "$c"; done
say "OK: $cases"
