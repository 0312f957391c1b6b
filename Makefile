# attnd - build, test and benchmark.
#
#   make            build the core library, the server and the tests into build/
#   make test       every test: unit, integration, browser
#   make asan       the unit tests under AddressSanitizer and UBSan
#   make bench      the attention benchmark; writes build/bench.json
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
APT_BUILD := make gcc pkg-config libopenblas-dev
APT_TEST := libcmocka-dev libcjson-dev
APT_ALL := $(APT_BUILD) $(APT_TEST)
PKG_CORE := openblas
PKG_TEST := cmocka libcjson
PKG_ALL := $(PKG_CORE) $(PKG_TEST)

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

pc_cflags = $(shell pkg-config --cflags $(1) 2>/dev/null)
pc_libs = $(shell pkg-config --libs $(1) 2>/dev/null)

CORE_SRC := $(wildcard src/*.c)
CORE_OBJ := $(CORE_SRC:%.c=$(BUILD)/%.o)
CORE_LIB := $(BUILD)/libattn.a
CORE_LIBS := $(call pc_libs,$(PKG_CORE)) -lm -pthread

UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)

BENCH_BIN := $(BUILD)/bench_attention

.PHONY: all test unit asan bench golden deps clean format
all: $(CORE_LIB) $(UNIT_BIN) $(BENCH_BIN)

# ------------------------------------------------------------ dependencies
DEPS_STAMP := $(BUILD)/.deps-ok
$(DEPS_STAMP): Makefile
	@if pkg-config --exists $(PKG_ALL) 2>/dev/null; then :; \
	 else echo "attnd: installing missing packages (make deps)"; $(MAKE) --no-print-directory deps; fi
	@mkdir -p $(@D) && touch $@

deps:
	$(SUDO) apt-get update
	$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $(APT_ALL)

# ------------------------------------------------------------------- core
$(BUILD)/src/%.o: src/%.c | $(DEPS_STAMP)
	@mkdir -p $(@D)
	@echo "  CC      $<"
	@$(CC) $(ALL_CFLAGS) $(call pc_cflags,$(PKG_CORE)) -c $< -o $@

$(CORE_LIB): $(CORE_OBJ)
	@rm -f $@
	@echo "  AR      $@"
	@ar rcs $@ $^

# ------------------------------------------------------------------ tests
$(BUILD)/tests/%.o: tests/unit/%.c | $(DEPS_STAMP)
	@mkdir -p $(@D)
	@echo "  CC      $<"
	@$(CC) $(ALL_CFLAGS) -Isrc -Itests/unit $(call pc_cflags,$(PKG_CORE) $(PKG_TEST)) -c $< -o $@

$(BUILD)/tests/test_%: $(BUILD)/tests/test_%.o $(BUILD)/tests/support.o $(CORE_LIB)
	@echo "  LD      $@"
	@$(CC) $(CFLAGS) -pthread $^ -o $@ $(call pc_libs,$(PKG_TEST)) $(CORE_LIBS)

unit: $(UNIT_BIN)
	@tests/run-cmocka $(UNIT_BIN)

test: unit

asan:
	$(MAKE) --no-print-directory BUILD=$(BUILD)/asan CFLAGS="-O1 -g $(SAN_FLAGS)" unit

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

# ----------------------------------------------------------------- golden
golden:
	$(PYTHON) tests/golden/generate.py tests/golden

format:
	clang-format -i src/*.c src/*.h tests/unit/*.c tests/bench/*.c

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
