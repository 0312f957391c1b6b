#!/bin/sh
# Install what attnd's build, tests and tools need, and only what is missing.
#
#   tests/deps.sh SET...      SET: build test web fuzz golden bench deploy
#
# Each need is probed the way the build uses it: a command on PATH, a
# pkg-config module, a file, or a working compile. Only the Debian packages
# of the needs that fail their probe are asked of apt-get (through sudo when
# not root), one line naming each before anything is installed. A command
# that exists is never requested again, whoever installed it: build
# machines may carry a Node.js and npm that apt does not own, and Debian's
# npm conflicts with some of them.
#
# Exit status 0 when everything in SET is present afterwards; 1 with a
# short message naming what is missing and how to install it by hand.
set -u

here=$(cd "$(dirname "$0")" && pwd)
log=${DEPS_LOG:-${TMPDIR:-/tmp}/attnd-deps.$$.log}
cc=${CC:-cc}
python=${PYTHON:-/usr/bin/python3}
font=${FONT:-/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf}
chromium=/usr/bin/chromium

say() { printf 'attnd: %s\n' "$*" >&2; }

# The Node.js major version the browser tests need: tests/web/package.json's
# "engines" (">=N"), the one place it is written.
node_needed=$(sed -n 's/.*"node": *">= *\([0-9][0-9]*\).*/\1/p' "$here/web/package.json" | head -n 1)
node_needed=${node_needed:-18}

# ------------------------------------------------------------------ probes
has_cmd() { command -v "$1" >/dev/null 2>&1; }

has_pc() {
    if has_cmd pkg-config; then pkg-config --exists "$1" 2>/dev/null
    else return 1; fi
}

has_file() { [ -e "$1" ]; }

# libFuzzer: clang links a fuzz target with -fsanitize=fuzzer.
has_fuzzer() {
    has_cmd clang || return 1
    d=$(mktemp -d) || return 1
    printf '%s\n' '#include <stddef.h>' '#include <stdint.h>' \
        'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);' \
        'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { return (int)(d && n && 0); }' \
        >"$d/probe.c"
    clang -fsanitize=fuzzer "$d/probe.c" -o "$d/probe" >/dev/null 2>&1
    rc=$?
    rm -rf "$d"
    return $rc
}

has_py() { [ -x "$python" ] && "$python" -c "import $1" >/dev/null 2>&1; }

node_major() { node --version 2>/dev/null | sed -n 's/^v\([0-9][0-9]*\).*/\1/p'; }

# ------------------------------------------------------------------- needs
# One need per line: SET, probe, its argument, the Debian package, and what
# it is for. The compiler is make's $(CC); gcc and clang map to their
# packages, any other compiler must already be there.
case $(basename "$cc") in
cc | gcc*) cc_pkg=gcc ;;
clang*) cc_pkg=clang ;;
*) cc_pkg="" ;;
esac

needs() {
    cat <<EOF
build cmd $cc ${cc_pkg:-?} the C compiler $cc
build file /usr/include/stdio.h libc6-dev the C library headers
build cmd pkg-config pkg-config pkg-config
build pc openblas libopenblas-dev OpenBLAS
build pc libmicrohttpd libmicrohttpd-dev libmicrohttpd
build pc libcjson libcjson-dev cJSON
build pc libpng libpng-dev libpng
build pc freetype2 libfreetype-dev FreeType
build file $font fonts-dejavu-core the DejaVu Sans font
test pc cmocka libcmocka-dev cmocka, for the C tests
test pc libcurl libcurl4-openssl-dev libcurl, for the integration tests
test pc libxml-2.0 libxml2-dev libxml2, for parsing the SVG answers in the integration tests
test cmd curl curl curl, for the examples of README.md and docs/
test cmd node nodejs Node.js, for the tokenizer tests' files
test cmd npm npm npm, for the tokenizer tests' files
web cmd node nodejs Node.js, for the browser tests
web cmd npm npm npm, for the browser tests' module
web file $chromium chromium Chromium, for the browser tests
fuzz fuzzer clang clang clang, for the fuzzers
fuzz fuzzer libfuzzer libclang-rt-dev libFuzzer, for the fuzzers
golden py numpy python3-numpy NumPy, for the golden vectors
golden py torch python3-torch PyTorch, for the golden vectors
golden py networkx python3-networkx NetworkX, the attention flow's reference
golden py jinja2 python3-jinja2 Jinja2, the chat templates' reference (tests/chat/generate.py)
golden cmd node nodejs Node.js, for the tokenizers library of the decoder goldens
golden cmd npm npm npm, for the tokenizers library of the decoder goldens
bench cmd wrk wrk wrk, the HTTP load of make bench
bench cmd nginx nginx-light nginx, the static-file server make bench compares with
bench py numpy python3-numpy NumPy, for make bench's comparisons
bench py torch python3-torch PyTorch, for make bench's comparisons
deploy file /usr/sbin/nginx nginx nginx, in front of the replicas of the deploy tests
deploy cmd node nodejs Node.js, for the deploy tests
deploy cmd npm npm npm, for the deploy tests' schemas
EOF
}

probe() {
    case $1 in
    cmd) has_cmd "$2" ;;
    pc) has_pc "$2" ;;
    file) has_file "$2" ;;
    fuzzer) has_fuzzer ;;
    py) has_py "$2" ;;
    esac
}

[ $# -gt 0 ] || { say "usage: tests/deps.sh SET... (build test web fuzz golden bench deploy)"; exit 2; }
for s in "$@"; do
    case $s in
    build | test | web | fuzz | golden | bench | deploy) ;;
    *) say "unknown set '$s' (build test web fuzz golden bench deploy)"; exit 2 ;;
    esac
done
# in_sets X SET...: X is one of the sets asked for.
in_sets() {
    x=$1
    shift
    for s in "$@"; do [ "$s" = "$x" ] && return 0; done
    return 1
}

# Packages of the needs that fail their probe, without repeats; one line each.
missing_pkgs=""
missing_what=""
check() {
    missing_pkgs=""
    missing_what=""
    while read -r set kind arg pkg what; do
        in_sets "$set" "$@" || continue
        probe "$kind" "$arg" && continue
        # clang covers both fuzzer lines when clang itself is missing.
        case " $missing_pkgs " in *" $pkg "*) continue ;; esac
        missing_pkgs="$missing_pkgs $pkg"
        missing_what="$missing_what
$pkg	$what"
    done <<EOF
$(needs)
EOF
}

# ------------------------------------------------------------- Node.js
# A Node.js on PATH is used whoever installed it, if it is new enough.
check_node_version() {
    { in_sets web "$@" || in_sets golden "$@" || in_sets deploy "$@"; } && has_cmd node || return 0
    major=$(node_major)
    if [ -z "$major" ] || [ "$major" -lt "$node_needed" ]; then
        say "Node.js $(node --version 2>/dev/null || echo '(unknown version)') at $(command -v node) is too old:"
        say "  the browser tests and the decoder goldens need Node.js $node_needed or newer (package.json, engines)."
        say "  Install a newer Node.js first; Debian bookworm's own is 18 (apt-get install nodejs npm)."
        return 1
    fi
}

# ------------------------------------------------------------------ apt
as_root() {
    if [ "$(id -u)" = 0 ]; then "$@"
    elif has_cmd sudo; then sudo "$@"
    else return 127; fi
}

# apt-get's own reasons, without its progress: the "E:" lines and the
# unmet-dependency lines, at most six.
apt_reasons() {
    grep -E '^E: |^ [^ ].* : (Depends|Conflicts|Breaks|PreDepends)|Unable to locate|has no installation candidate' "$log" |
        head -n 6 | sed 's/^/attnd:     /' >&2
}

apt_install() {
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" >>"$log" 2>&1
}

# The Debian npm cannot go beside a Node.js package that bundles its own
# npm (Conflicts: npm); say so rather than let apt refuse everything.
npm_hint() {
    owner=$(dpkg-query -S "$(readlink -f "$(command -v node)")" 2>/dev/null | cut -d: -f1)
    if [ -n "$owner" ]; then
        say "  node at $(command -v node) comes from the package '$owner' $(dpkg-query -W -f='${Version}' "$owner" 2>/dev/null),"
        say "  which Debian's npm may conflict with: install the npm that belongs to that Node.js."
    else
        say "  node at $(command -v node) is not from a Debian package: install the npm that came with it."
    fi
}

install_missing() {
    [ "$(id -u)" = 0 ] || has_cmd sudo || {
        say "cannot install as $(id -un): not root and no sudo. As root, run:"
        say "  apt-get install --no-install-recommends$missing_pkgs"
        return 1
    }
    : >"$log"
    say "apt-get install$missing_pkgs (log: $log)"
    if ! as_root apt-get update -q >>"$log" 2>&1; then
        say "apt-get update failed; its reasons:"
        apt_reasons
        say "install by hand: sudo apt-get update && sudo apt-get install --no-install-recommends$missing_pkgs"
        return 1
    fi
    # shellcheck disable=SC2086 # one word per package
    apt_install $missing_pkgs && return 0
    # One refusal makes apt refuse the whole set: install each package on
    # its own, so that one that cannot be installed keeps none of the
    # others out, and name the ones that fail.
    failed=""
    refused=no
    for p in $missing_pkgs; do
        printf '\n== apt-get install %s\n' "$p" >>"$log"
        apt_install "$p" && continue
        refused=yes
        say "could not install $p; apt-get says:"
        apt_reasons_for "$p"
        if [ "$p" = npm ] && has_cmd node; then
            npm_hint
        else
            failed="$failed $p"
        fi
    done
    [ "$refused" = yes ] || return 0
    [ -n "$failed" ] && say "install by hand: sudo apt-get install --no-install-recommends$failed"
    say "full log: $log"
    return 1
}

# The reasons of the last attempt only (the log's tail after its marker).
apt_reasons_for() {
    sed -n "/^== apt-get install $1\$/,\$p" "$log" |
        grep -E '^E: |^ [^ ].* : (Depends|Conflicts|Breaks|PreDepends)|Unable to locate|has no installation candidate' |
        head -n 6 | sed 's/^/attnd:     /' >&2
}

# ----------------------------------------------------------------- main
check "$@"
if [ -n "$missing_pkgs" ]; then
    printf '%s\n' "$missing_what" | while IFS='	' read -r pkg what; do
        [ -n "$pkg" ] || continue
        if [ "$pkg" = "?" ]; then
            say "missing: $what; install it, or build with CC=gcc"
        else
            say "missing: $what (Debian package $pkg)"
        fi
    done
    case " $missing_pkgs " in *" ? "*) exit 1 ;; esac
    install_missing || exit 1
    check "$@"
    if [ -n "$missing_pkgs" ]; then
        say "still missing after installing:$missing_pkgs (log: $log)"
        exit 1
    fi
fi
check_node_version "$@" || exit 1
rm -f "$log"
exit 0
