#!/bin/sh
# llama_cpp.sh BUILD - llama.cpp's llama-bench and llama-quantize for
# bench_gguf, built from source into BUILD/llama.cpp-build/bin/.
#
# The source is the git bundle the npm package node-llama-cpp ships
# (llama/gitRelease.bundle), installed without running its scripts (so no
# prebuilt binaries are fetched) into BUILD/llama.cpp-npm and cloned into
# BUILD/llama.cpp-src; then CMake builds the two tools natively for this
# CPU (GGML_NATIVE), in Release, with no curl, tests or server. Each step
# runs only when its result is missing. On a failure it prints one line
# saying which step failed (its log kept under BUILD/) and exits 1;
# the rest of `make bench` goes on without llama.cpp.
set -u

NODE_LLAMA_CPP=node-llama-cpp@3.21.1
build=${1:?usage: llama_cpp.sh BUILD}
npm_dir=$build/llama.cpp-npm
src=$build/llama.cpp-src
out=$build/llama.cpp-build
log=$build/llama.cpp.log

fail() {
    echo "llama_cpp.sh: $1 (see $log); llama.cpp's side of bench_gguf is skipped" >&2
    exit 1
}

[ -x "$out/bin/llama-bench" ] && [ -x "$out/bin/llama-quantize" ] && exit 0
mkdir -p "$build" || exit 1
: >"$log"

if [ ! -f "$src/CMakeLists.txt" ]; then
    bundle=$npm_dir/node_modules/node-llama-cpp/llama/gitRelease.bundle
    if [ ! -f "$bundle" ]; then
        command -v npm >/dev/null || fail "npm is not installed"
        echo "llama_cpp.sh: npm install $NODE_LLAMA_CPP (llama.cpp's source)"
        npm install --prefix "$npm_dir" --no-save --ignore-scripts --no-audit --no-fund \
            "$NODE_LLAMA_CPP" >>"$log" 2>&1 || fail "npm install $NODE_LLAMA_CPP failed"
        [ -f "$bundle" ] || fail "$NODE_LLAMA_CPP has no llama/gitRelease.bundle"
    fi
    rm -rf "$src"
    git clone --quiet "$bundle" "$src" >>"$log" 2>&1 || fail "git clone of $bundle failed"
fi

command -v cmake >/dev/null || fail "cmake is not installed"
echo "llama_cpp.sh: building llama-bench and llama-quantize in $out (a few minutes)"
cmake -S "$src" -B "$out" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    >>"$log" 2>&1 || fail "cmake could not configure llama.cpp"
cmake --build "$out" --target llama-bench llama-quantize -j "$(nproc)" >>"$log" 2>&1 \
    || fail "cmake could not build llama-bench and llama-quantize"
[ -x "$out/bin/llama-bench" ] && [ -x "$out/bin/llama-quantize" ] \
    || fail "the build made no bin/llama-bench or bin/llama-quantize"
git -C "$src" log -1 --format='llama_cpp.sh: llama.cpp %h built' 2>/dev/null || true
