#!/bin/sh
# The HTTP section of `make bench`: attnd against nginx serving a 2 KB
# static file, under the same wrk load (2 threads, 32 connections) on
# loopback, in interleaved rounds of one run, so that a busy neighbour
# slows both sides of the ratio alike. attnd gets a different nine-word
# sentence in every request (tests/bench/sentences.lua), in two runs a
# round: with the default seed, whose parameters the server keeps drawn,
# and with a new seed in every request too, so that nothing the server
# keeps between requests serves them.
#
#   tests/bench/http.sh [ROUNDS] [SECONDS]     (default 3 rounds of 6 s)
#
# Both servers are started here, on free loopback ports, and stopped by
# their PIDs when it ends.
set -eu
ROUNDS=${1:-3}
SECONDS_EACH=${2:-6}
ATTND=${ATTND_BIN:-build/attnd}
HERE=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
attnd_pid=""
nginx_pid=""
cleanup() {
    [ -n "$attnd_pid" ] && kill "$attnd_pid" 2>/dev/null || true
    [ -n "$nginx_pid" ] && kill "$nginx_pid" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# nginx as a user would run it for static files: its defaults, two
# workers (one a core here), access log off as attnd's is (--quiet).
nginx_port=$(free_port)
mkdir -p "$tmp/www" "$tmp/logs"
head -c 2048 /dev/zero | tr '\0' 'a' >"$tmp/www/file.txt"
# nginx's workers drop root for an unprivileged user, who must read it
chmod 755 "$tmp" "$tmp/www"
chmod 644 "$tmp/www/file.txt"
cat >"$tmp/nginx.conf" <<EOF
worker_processes auto;
pid $tmp/nginx.pid;
error_log $tmp/logs/error.log;
events { worker_connections 1024; }
http {
    access_log off;
    sendfile on;
    keepalive_requests 100000;
    client_body_temp_path $tmp/body;
    proxy_temp_path $tmp/proxy;
    fastcgi_temp_path $tmp/fastcgi;
    uwsgi_temp_path $tmp/uwsgi;
    scgi_temp_path $tmp/scgi;
    server {
        listen 127.0.0.1:$nginx_port;
        root $tmp/www;
    }
}
EOF
nginx -p "$tmp" -c "$tmp/nginx.conf" -g 'daemon off;' &
nginx_pid=$!

"$ATTND" --port 0 --quiet >"$tmp/attnd.log" 2>&1 &
attnd_pid=$!
attnd_port=""
nginx_up=""
for _ in $(seq 50); do
    attnd_port=$(sed -n 's|.*serving http://127.0.0.1:\([0-9]*\)/.*|\1|p' "$tmp/attnd.log")
    curl -sf "http://127.0.0.1:$nginx_port/file.txt" >/dev/null && nginx_up=1
    [ -n "$attnd_port" ] && [ -n "$nginx_up" ] && break
    sleep 0.1
done
[ -n "$attnd_port" ] || { echo "http.sh: attnd did not start" >&2; exit 1; }
[ -n "$nginx_up" ] || { echo "http.sh: nginx does not serve the file" >&2; cat "$tmp/logs/error.log" >&2; exit 1; }
core=$(curl -s "http://127.0.0.1:$attnd_port/metrics" | sed -n 's/^attnd_blas_info{core="\(.*\)"}.*/\1/p')

run() { # url script [script args] -> "requests rate p99ms errors p50ms"
    url=$1 script=$2
    shift 2
    wrk -t2 -c32 -d"${SECONDS_EACH}s" --latency -s "$script" "$url" -- "$@" |
        sed -n 's/^RESULT //p'
}

echo "HTTP: wrk -t2 -c32 -d${SECONDS_EACH}s, $ROUNDS interleaved rounds (attnd's OpenBLAS core: $core)"
: >"$tmp/nginx.txt"
: >"$tmp/attnd.txt"
: >"$tmp/seeded.txt"
for r in $(seq "$ROUNDS"); do
    run "http://127.0.0.1:$nginx_port/file.txt" "$HERE/static.lua" >>"$tmp/nginx.txt"
    run "http://127.0.0.1:$attnd_port/attention" "$HERE/sentences.lua" >>"$tmp/attnd.txt"
    run "http://127.0.0.1:$attnd_port/attention" "$HERE/sentences.lua" seed >>"$tmp/seeded.txt"
done

median() { # column file
    awk -v c="$1" '{print $c}' "$2" | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'
}
total() { awk -v c="$1" '{s+=$c} END {print s}' "$2"; }
row() { # label file
    printf '  %-48s %12s %8s %8s %8s\n' "$1" "$(median 2 "$2")" "$(median 5 "$2")" \
        "$(median 3 "$2")" "$(total 4 "$2")"
}
printf '  %-48s %12s %8s %8s %8s\n' "" "requests/s" "p50 ms" "p99 ms" "errors"
row "nginx, a 2 KB static file" "$tmp/nginx.txt"
row "attnd, 9 new words, 8 heads, weights as JSON" "$tmp/attnd.txt"
row "attnd, the same with a new seed every request" "$tmp/seeded.txt"
n_rate=$(median 2 "$tmp/nginx.txt")
awk -v a="$(median 2 "$tmp/attnd.txt")" -v s="$(median 2 "$tmp/seeded.txt")" -v n="$n_rate" \
    'BEGIN {printf "  attnd / nginx (target >= 0.5; p99 target < 5 ms): %.2f; with a new seed every request: %.2f\n", a / n, s / n}'
echo "  rounds (requests, rate, p99 ms, errors, p50 ms):"
paste "$tmp/nginx.txt" "$tmp/attnd.txt" "$tmp/seeded.txt" |
    sed 's/^/    nginx | attnd | seeded: /'
