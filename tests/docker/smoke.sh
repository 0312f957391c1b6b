#!/bin/sh
# Smoke test of a running attnd container on 127.0.0.1:$DFC_PORT (set by
# dockerfile-check): the page, a JSON answer and a PNG answer.
set -eu
base="http://127.0.0.1:${DFC_PORT:-8080}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

curl -fsS -o "$tmp/index.html" "$base/"
grep -q '<title>attnd' "$tmp/index.html"

curl -fsS -o "$tmp/answer.json" "$base/attention" -H 'Content-Type: application/json' \
  -d '{"sentence": "The cat chased the mouse because it was hungry", "return": ["weights", "output"]}'
grep -q '"tokens":\["the","cat","chased"' "$tmp/answer.json"
grep -q '"weights":\[\[\[' "$tmp/answer.json"

curl -fsS -o "$tmp/head.png" "$base/attention?head=2" -H 'Content-Type: application/json' \
  -H 'Accept: image/png' -d '{"sentence": "The cat chased the mouse"}'
[ "$(head -c 8 "$tmp/head.png" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ]

curl -fsS "$base/healthz" | grep -q '"ok"'
echo "smoke: page, JSON and PNG answered"
