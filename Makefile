# The two commands: `make run` and `make test`. Each installs what is missing (Debian 12),
# configures and builds, then runs. Other targets: asan, tsan (sanitizer test runs), clean.
PRESET ?= release
BUILD_DIR := build/$(PRESET)

.PHONY: all deps configure build run test asan tsan clean

all: build

deps:
	@scripts/install-deps

configure: deps
	@cmake --preset $(PRESET) >/dev/null

build: configure
	@cmake --build --preset $(PRESET)

run: build
	@echo "== trn-ls =="
	@$(BUILD_DIR)/tools/trn-ls/trn-ls
	@echo
	@echo "== examples/c/enumerate.c =="
	@$(BUILD_DIR)/examples/trn-example-enumerate

test: build
	@ctest --preset $(PRESET)

asan:
	@$(MAKE) --no-print-directory test PRESET=asan

tsan:
	@$(MAKE) --no-print-directory test PRESET=tsan

clean:
	rm -rf build
