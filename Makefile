# attnd - build, test and benchmark.
#
#   make            build the core library, the server and the tests into build/
#   make test       every test: unit, integration, browser
#   make asan       the unit tests under AddressSanitizer and UBSan
#   make bench      the attention benchmark; writes build/bench.json
#   make fuzz       build the libFuzzer targets (clang) and run each for
#                   FUZZ_SECONDS (60) on its corpus
#   make fuzz-regress  run each fuzzer once over its committed corpus
#   make golden     regenerate tests/golden/ (needs python3-numpy and python3-torch)
#   make deps       install the Debian packages all of the above need
#
# Missing dependencies are installed by `make deps` on first use.

CC ?= cc
BUILD ?= build
PYTHON ?= /usr/bin/python3

WARN := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
        -Wpointer-arith -Wformat=2 -Wundef
CFLAGS ?= -O2 -g
ALL_CFLAGS := -std=c11 -D_POSIX_C_SOURCE=200809L $(WARN) $(CFLAGS) -MMD -MP
SAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all

# Debian packages, by what needs them.
APT_BUILD := make gcc libc6-dev pkg-config libopenblas-dev
APT_SERVER := libmicrohttpd-dev libcjson-dev libpng-dev libfreetype-dev fonts-dejavu-core
APT_TEST := libcmocka-dev libcurl4-openssl-dev curl
APT_WEB := nodejs npm chromium
APT_ALL := $(APT_BUILD) $(APT_SERVER) $(APT_TEST) $(APT_WEB)
PKG_CORE := openblas
PKG_SERVER := libmicrohttpd libcjson libpng freetype2
PKG_TEST := cmocka libcjson libcurl libpng
PKG_ALL := $(PKG_CORE) $(PKG_SERVER) $(PKG_TEST)
FONT := /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

pc_cflags = $(shell pkg-config --cflags $(1) 2>/dev/null)
pc_libs = $(shell pkg-config --libs $(1) 2>/dev/null)

CORE_SRC := $(wildcard src/*.c)
CORE_OBJ := $(CORE_SRC:%.c=$(BUILD)/%.o)
CORE_LIB := $(BUILD)/libattn.a
# Recursive (=), not :=: pkg-config must run after `make deps` has installed
# the packages, on a machine that had none when make started.
CORE_LIBS = $(call pc_libs,$(PKG_CORE)) -lm -pthread

UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)

SERVER_SRC := $(filter-out server/main.c,$(wildcard server/*.c))
SERVER_OBJ := $(SERVER_SRC:%.c=$(BUILD)/%.o) $(BUILD)/gen/openapi_json.o
SERVER_LIB := $(BUILD)/libattnd.a
SERVER_LIBS = $(call pc_libs,$(PKG_SERVER))
ATTND := $(BUILD)/attnd

SERVER_TEST_SRC := $(wildcard tests/server/test_*.c)
SERVER_TEST_BIN := $(SERVER_TEST_SRC:tests/server/%.c=$(BUILD)/tests/server/%)
INTEG_SRC := $(wildcard tests/integration/test_*.c)
INTEG_BIN := $(INTEG_SRC:tests/integration/%.c=$(BUILD)/tests/integration/%)

BENCH_BIN := $(BUILD)/bench_attention

.PHONY: deps-build all test c-test unit server-unit integration web-test asan bench golden deps clean format run \
        fuzz fuzz-build fuzz-regress
all: $(CORE_LIB) $(ATTND) $(UNIT_BIN) $(SERVER_TEST_BIN) $(REPLAY_BIN) $(INTEG_BIN) $(BENCH_BIN)

# ------------------------------------------------------------ dependencies
# Two stamps: what building attnd needs (all a container build installs),
# and what the tests need besides. Either missing runs `make deps` once.
DEPS_STAMP := $(BUILD)/.deps-build-ok
TEST_DEPS_STAMP := $(BUILD)/.deps-test-ok
$(DEPS_STAMP): Makefile
	@if command -v $(CC) >/dev/null && pkg-config --exists $(PKG_CORE) $(PKG_SERVER) 2>/dev/null && \
	    [ -f $(FONT) ]; then :; \
	 else echo "attnd: installing missing packages (make deps-build)"; $(MAKE) --no-print-directory deps-build; fi
	@mkdir -p $(@D) && touch $@

$(TEST_DEPS_STAMP): Makefile | $(DEPS_STAMP)
	@if pkg-config --exists $(PKG_TEST) 2>/dev/null && command -v curl >/dev/null && \
	    command -v node >/dev/null && command -v npm >/dev/null && [ -x /usr/bin/chromium ]; then :; \
	 else echo "attnd: installing missing packages (make deps)"; $(MAKE) --no-print-directory deps; fi
	@mkdir -p $(@D) && touch $@

# deps: everything the build, the tests and the benchmarks need;
# deps-build: only what building and running attnd needs (make run).
deps:
	$(SUDO) apt-get update
	$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $(APT_ALL)

deps-build:
	$(SUDO) apt-get update
	$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $(APT_BUILD) $(APT_SERVER)

# The browser tests' node modules (playwright-core; the browser is Debian's).
WEB_MODULES := tests/web/node_modules/.package-lock.json
$(WEB_MODULES): tests/web/package.json tests/web/package-lock.json | $(TEST_DEPS_STAMP)
	cd tests/web && npm ci --no-audit --no-fund

# ------------------------------------------------------------------- core
$(BUILD)/src/%.o: src/%.c | $(DEPS_STAMP)
	@mkdir -p $(@D)
	@echo "  CC      $<"
	@$(CC) $(ALL_CFLAGS) $(call pc_cflags,$(PKG_CORE)) -c $< -o $@

$(CORE_LIB): $(CORE_OBJ)
	@rm -f $@
	@echo "  AR      $@"
	@ar rcs $@ $^

# ----------------------------------------------------------------- server
$(BUILD)/server/%.o: server/%.c | $(DEPS_STAMP)
	@mkdir -p $(@D)
	@echo "  CC      $<"
	@$(CC) $(ALL_CFLAGS) -Isrc -DATTND_FONT='"$(FONT)"' $(call pc_cflags,$(PKG_SERVER) $(PKG_CORE)) -c $< -o $@

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

run: $(ATTND)
	$(ATTND) --web-root web

# ------------------------------------------------------------------ tests
$(BUILD)/tests/%.o: tests/unit/%.c | $(TEST_DEPS_STAMP)
	@mkdir -p $(@D)
	@echo "  CC      $<"
	@$(CC) $(ALL_CFLAGS) -Isrc -Itests/unit $(call pc_cflags,$(PKG_CORE) $(PKG_TEST)) -c $< -o $@

$(BUILD)/tests/test_%: $(BUILD)/tests/test_%.o $(BUILD)/tests/support.o $(CORE_LIB)
	@echo "  LD      $@"
	@$(CC) $(CFLAGS) -pthread $^ -o $@ $(call pc_libs,$(PKG_TEST)) $(CORE_LIBS)

$(BUILD)/tests/server/%.o: tests/server/%.c | $(TEST_DEPS_STAMP)
	@mkdir -p $(@D)
	@echo "  CC      $<"
	@$(CC) $(ALL_CFLAGS) -Isrc -Iserver -Itests/unit $(call pc_cflags,$(PKG_SERVER) $(PKG_CORE) $(PKG_TEST)) -c $< -o $@

$(BUILD)/tests/server/test_%: $(BUILD)/tests/server/test_%.o $(SERVER_LIB) $(CORE_LIB)
	@echo "  LD      $@"
	@$(CC) $(CFLAGS) -pthread $^ -o $@ $(call pc_libs,$(PKG_TEST)) $(SERVER_LIBS) $(CORE_LIBS)

$(BUILD)/tests/integration/%.o: tests/integration/%.c | $(TEST_DEPS_STAMP)
	@mkdir -p $(@D)
	@echo "  CC      $<"
	@$(CC) $(ALL_CFLAGS) -Itests/integration $(call pc_cflags,$(PKG_TEST)) -c $< -o $@

INTEG_SUPPORT := $(patsubst tests/integration/%.c,$(BUILD)/tests/integration/%.o,$(filter-out $(INTEG_SRC),$(wildcard tests/integration/*.c)))
$(BUILD)/tests/integration/test_%: $(BUILD)/tests/integration/test_%.o $(INTEG_SUPPORT)
	@echo "  LD      $@"
	@$(CC) $(CFLAGS) -pthread $^ -o $@ $(call pc_libs,$(PKG_TEST)) -lm

unit: $(UNIT_BIN)
	@tests/run-cmocka $(UNIT_BIN)

server-unit: $(SERVER_TEST_BIN)
	@tests/run-cmocka $(SERVER_TEST_BIN)

integration: $(ATTND) $(INTEG_BIN)
	@ATTND_BIN=$(ATTND) tests/run-cmocka $(INTEG_BIN)

web-test: $(ATTND) $(WEB_MODULES)
	@ATTND_BIN=$(abspath $(ATTND)) node --test tests/web/

# Each fuzz target's committed corpus replayed as cmocka tests, built with
# the compiler and flags of everything else (no libFuzzer needed).
REPLAY_NAMES := $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
REPLAY_BIN := $(REPLAY_NAMES:%=$(BUILD)/tests/fuzz/replay_%)
$(BUILD)/tests/fuzz/%.o: tests/fuzz/%.c | $(TEST_DEPS_STAMP)
	@mkdir -p $(@D)
	@echo "  CC      $<"
	@$(CC) $(ALL_CFLAGS) -Isrc -Iserver $(call pc_cflags,$(PKG_SERVER) $(PKG_CORE) $(PKG_TEST)) -c $< -o $@

$(BUILD)/tests/fuzz/replay_%.o: tests/fuzz/replay.c | $(TEST_DEPS_STAMP)
	@mkdir -p $(@D)
	@echo "  CC      $< ($*)"
	@$(CC) $(ALL_CFLAGS) -DCORPUS_DIR='"tests/fuzz/corpus_$*"' $(call pc_cflags,$(PKG_TEST)) -c $< -o $@

$(BUILD)/tests/fuzz/replay_%: $(BUILD)/tests/fuzz/replay_%.o $(BUILD)/tests/fuzz/fuzz_%.o \
                              $(BUILD)/tests/fuzz/pipeline.o $(SERVER_LIB) $(CORE_LIB)
	@echo "  LD      $@"
	@$(CC) $(CFLAGS) -pthread $^ -o $@ $(call pc_libs,$(PKG_TEST)) $(SERVER_LIBS) $(CORE_LIBS)

C_TESTS := $(UNIT_BIN) $(SERVER_TEST_BIN) $(REPLAY_BIN) $(INTEG_BIN)
.SECONDARY: $(REPLAY_NAMES:%=$(BUILD)/tests/fuzz/replay_%.o) $(REPLAY_NAMES:%=$(BUILD)/tests/fuzz/fuzz_%.o) $(BUILD)/tests/fuzz/pipeline.o
c-test: $(C_TESTS) $(ATTND)
	@ATTND_BIN=$(ATTND) tests/run-cmocka $(C_TESTS)

# Everything: C units, the server's units, integration against the real
# binary, then the page in a real browser.
test: c-test
	@$(MAKE) --no-print-directory web-test

asan:
	$(MAKE) --no-print-directory BUILD=$(BUILD)/asan CFLAGS="-O1 -g $(SAN_FLAGS)" c-test

# ------------------------------------------------------------------ bench
$(BUILD)/bench/%.o: tests/bench/%.c | $(DEPS_STAMP)
	@mkdir -p $(@D)
	@echo "  CC      $<"
	@$(CC) $(ALL_CFLAGS) -Isrc $(call pc_cflags,$(PKG_CORE)) -c $< -o $@

$(BENCH_BIN): $(BUILD)/bench/bench_attention.o $(CORE_LIB)
	@echo "  LD      $@"
	@$(CC) $(CFLAGS) $^ -o $@ $(CORE_LIBS)

bench: $(BENCH_BIN)
	$(BENCH_BIN) --json $(BUILD)/bench.json

# ------------------------------------------------------------------- fuzz
# libFuzzer targets tests/fuzz/fuzz_*.c, each linked with every core and
# server object (not main.c), all built with clang, ASan and UBSan into
# $(BUILD)/fuzz/. New inputs go to $(BUILD)/fuzz/corpus_*, crashes to
# $(BUILD)/fuzz/fuzz_*-crash-*; tests/fuzz/corpus_* is only read.
# Not part of `make test`, which replays the committed corpora instead.
FUZZ_CC ?= clang
FUZZ_SECONDS ?= 60
FUZZ_ARGS ?=
APT_FUZZ := clang libclang-rt-dev
FUZZ_DIR := $(BUILD)/fuzz
FUZZ_SAN := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
FUZZ_CFLAGS := -std=c11 -D_POSIX_C_SOURCE=200809L $(WARN) -O1 -g -MMD -MP \
               $(FUZZ_SAN) -fsanitize=fuzzer-no-link
FUZZ_NAMES := $(patsubst tests/fuzz/%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_BIN := $(FUZZ_NAMES:%=$(FUZZ_DIR)/%)
FUZZ_OBJ := $(CORE_SRC:%.c=$(FUZZ_DIR)/obj/%.o) $(SERVER_SRC:%.c=$(FUZZ_DIR)/obj/%.o) \
            $(FUZZ_DIR)/obj/gen/openapi_json.o $(FUZZ_DIR)/obj/tests/fuzz/pipeline.o
FUZZ_RUN := -timeout=10 -rss_limit_mb=2048
FUZZ_STAMP := $(FUZZ_DIR)/.deps-ok

$(FUZZ_STAMP): Makefile | $(DEPS_STAMP)
	@mkdir -p $(@D)
	@echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n);' \
	      'int LLVMFuzzerTestOneInput(const char *d, unsigned long n)' \
	      '{ return (int)(d && n && 0); }' > $(@D)/probe.c
	@if $(FUZZ_CC) -fsanitize=fuzzer $(@D)/probe.c -o $(@D)/probe 2>/dev/null; then :; \
	 else echo "attnd: installing $(APT_FUZZ) for the fuzzers"; \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $(APT_FUZZ); fi
	@rm -f $(@D)/probe.c $(@D)/probe && touch $@

$(FUZZ_DIR)/obj/src/%.o: src/%.c | $(FUZZ_STAMP)
	@mkdir -p $(@D)
	@echo "  CC      $< (fuzz)"
	@$(FUZZ_CC) $(FUZZ_CFLAGS) $(call pc_cflags,$(PKG_CORE)) -c $< -o $@

$(FUZZ_DIR)/obj/server/%.o: server/%.c | $(FUZZ_STAMP)
	@mkdir -p $(@D)
	@echo "  CC      $< (fuzz)"
	@$(FUZZ_CC) $(FUZZ_CFLAGS) -Isrc -DATTND_FONT='"$(FONT)"' $(call pc_cflags,$(PKG_SERVER) $(PKG_CORE)) -c $< -o $@

$(FUZZ_DIR)/obj/gen/openapi_json.o: $(BUILD)/gen/openapi_json.c | $(FUZZ_STAMP)
	@mkdir -p $(@D)
	@echo "  CC      $< (fuzz)"
	@$(FUZZ_CC) $(FUZZ_CFLAGS) -Wno-overlength-strings -c $< -o $@

$(FUZZ_DIR)/obj/tests/fuzz/%.o: tests/fuzz/%.c | $(FUZZ_STAMP)
	@mkdir -p $(@D)
	@echo "  CC      $< (fuzz)"
	@$(FUZZ_CC) $(FUZZ_CFLAGS) -Isrc -Iserver $(call pc_cflags,$(PKG_SERVER) $(PKG_CORE)) -c $< -o $@

$(FUZZ_BIN): $(FUZZ_DIR)/%: $(FUZZ_DIR)/obj/tests/fuzz/%.o $(FUZZ_OBJ)
	@echo "  LD      $@"
	@$(FUZZ_CC) $(FUZZ_SAN) -fsanitize=fuzzer $^ -o $@ $(SERVER_LIBS) $(CORE_LIBS)

fuzz-build: $(FUZZ_BIN)

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

fuzz: $(FUZZ_BIN)
	@$(foreach f,$(FUZZ_NAMES),$(call fuzz_run,$(f)) && ) true

# Every committed input once (files, not directories: nothing is written).
fuzz-regress: $(FUZZ_BIN)
	@for f in $(FUZZ_NAMES); do \
	    t=$${f#fuzz_}; \
	    echo "  REGRESS $$f ($$(ls tests/fuzz/corpus_$$t | wc -l) inputs)"; \
	    $(FUZZ_DIR)/$$f $(FUZZ_RUN) tests/fuzz/corpus_$$t/* >$(FUZZ_DIR)/$$f.log 2>&1 \
	        || { tail -n 40 $(FUZZ_DIR)/$$f.log; exit 1; }; \
	done

# ----------------------------------------------------------------- golden
golden:
	$(PYTHON) tests/golden/generate.py tests/golden

format:
	clang-format -i src/*.c src/*.h tests/unit/*.c tests/bench/*.c

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

# ----------------------------------------------------------------- docker
# The Dockerfile carried out in Debian chroots (no Docker engine needed),
# with a smoke test of the page, a JSON answer and a PNG answer.
DOCKERFILE_CHECK ?= ../shared/tools/dockerfile-check
.PHONY: docker-check
docker-check:
	@command -v debootstrap >/dev/null || $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends debootstrap
	$(SUDO) python3 $(DOCKERFILE_CHECK) --context . --port 8080 --smoke 'sh tests/docker/smoke.sh'
