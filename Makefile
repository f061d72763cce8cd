# The two commands: `make run` and `make test`. Each installs what is missing (Debian 12),
# configures and builds, then runs. Other targets: asan, tsan (sanitizer test runs), fuzz
# (libFuzzer runs, FUZZ_SECONDS each), clean.
PRESET ?= release
BUILD_DIR := build/$(PRESET)

.PHONY: all deps configure build run test asan tsan fuzz clean

all: build

deps:
	@scripts/install-deps
	@scripts/make-venv

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
	@echo
	@echo "== examples/vector_add (trn assembly + C) =="
	@$(BUILD_DIR)/examples/trn-example-vector-add
	@echo
	@echo "== examples/matmul_harness (tiled matmul, profiled; the trace opens in Perfetto) =="
	@$(BUILD_DIR)/examples/trn-example-matmul-harness --m 2048 --n 4096 --k 2048 \
		--profile $(BUILD_DIR)/matmul_profile.json
	@echo
	@echo "== examples/mlp_program (a program: MLP forward, built at build time, run by trn-run) =="
	@$(BUILD_DIR)/tools/trn-run/trn-run $(BUILD_DIR)/examples/mlp.trnp \
		--in xT=$(BUILD_DIR)/examples/mlp_x.npy --out y=$(BUILD_DIR)/mlp_y.npy \
		--expect y=$(BUILD_DIR)/examples/mlp_expected.npy --rtol 1e-4 --atol 1e-7
	@echo
	@echo "== examples/torch/train_mlp.py (PyTorch: an MLP trains on the simulated device) =="
	@PYTHONPATH=$(BUILD_DIR)/python PYTHONDONTWRITEBYTECODE=1 .venv/bin/python examples/torch/train_mlp.py

test: build
	@ctest --preset $(PRESET)

asan:
	@$(MAKE) --no-print-directory test PRESET=asan

tsan:
	@$(MAKE) --no-print-directory test PRESET=tsan

# libFuzzer runs of the kernel and program loaders, the assembler and the safetensors header
# reader, FUZZ_SECONDS each (default 60); FUZZ_TARGETS picks some (scripts/fuzz).
fuzz: deps
	@scripts/fuzz

clean:
	rm -rf build
