# fmha_tile Makefile
#
#   make test    host unit tests, compile checks (nvcc sm_80 + sm_90a, clang-19
#                gfx942/gfx90a), GPU tests where a GPU exists; last line
#                "N passed, M failed"
#   make check   compile only (everything make test builds)
#   make run     build the example forward pass and run it with validation
#   make bench   forward TFLOPS on the DESIGN grid + PyTorch SDPA, same run
#   make tune    tile tuning driver (bench/tune_fwd.cu)
#
# Compilers found are reported first; what cannot be built is skipped with a
# SKIP line, never silently.

NVCC   ?= $(shell command -v nvcc 2>/dev/null || (test -x /usr/local/cuda/bin/nvcc && echo /usr/local/cuda/bin/nvcc))
CC     ?= cc
CLANG19 ?= $(shell command -v clang++-19 2>/dev/null)
PYTHON ?= python3
BUILD  ?= build

NVCC_ARCH  ?= -gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_90a,code=sm_90a
NVCC_FLAGS ?= -x cu -std=c++17 -O3 -Iinclude -Itests $(NVCC_ARCH)
CFLAGS_C11 := -std=c11 -Wall -Wextra -pedantic -Werror -Iinclude -Itests

HEADERS := $(shell find include -name '*.h')

.PHONY: all test check run bench tune clean toolchain host-tests nvcc-build gpu-tests

all: toolchain nvcc-build host-tests

toolchain:
	@echo "toolchain: cc=$$($(CC) --version | head -n1)"
	@echo "toolchain: nvcc=$(if $(NVCC),$(NVCC),not found)"
	@echo "toolchain: clang-19=$(if $(CLANG19),$(CLANG19),not found)"

# ---- host (C11, no device compiler) ---------------------------------------
$(BUILD)/host/test_dispatch: tests/host/test_dispatch.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_C11) $< -o $@ -lm

$(BUILD)/host/test_ref: tests/host/test_ref.c tests/ref/fmha_ref.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_C11) $< -o $@ -lm

host-tests: $(BUILD)/host/test_dispatch $(BUILD)/host/test_ref

# ---- NVIDIA (nvcc) --------------------------------------------------------
ifneq ($(NVCC),)
$(BUILD)/tests/test_fwd: tests/gpu/test_fwd.cu tests/gpu/test_util.h tests/ref/fmha_ref.h $(HEADERS)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_FLAGS) -Xptxas -v $< -o $@ 2> $@.ptxas.log || { cat $@.ptxas.log; exit 1; }

$(BUILD)/examples/fmha_fwd: examples/fmha_fwd.cu tests/ref/fmha_ref.h $(HEADERS)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_FLAGS) $< -o $@

$(BUILD)/bench/tune_fwd: bench/tune_fwd.cu $(HEADERS)
	@mkdir -p $(dir $@)
	$(NVCC) -x cu -std=c++17 -O3 -Iinclude -gencode=arch=compute_90a,code=sm_90a $< -o $@

nvcc-build: $(BUILD)/tests/test_fwd $(BUILD)/examples/fmha_fwd
else
nvcc-build:
	@echo "SKIP nvcc builds: nvcc not found"
endif

check: toolchain host-tests nvcc-build
	@sh tests/run_all.sh --compile-only "$(BUILD)" "$(CC)" "$(CLANG19)"

test: toolchain host-tests nvcc-build
	@sh tests/run_all.sh --all "$(BUILD)" "$(CC)" "$(CLANG19)" "$(PYTHON)"

run: $(BUILD)/examples/fmha_fwd
	$(BUILD)/examples/fmha_fwd -b=2 -h=16 -h_k=4 -s=1000 -s_k=1200 -d=128 -prec=bf16 -mask=b -v=1

bench:
	bash bench/run.sh

tune: $(BUILD)/bench/tune_fwd
	$(BUILD)/bench/tune_fwd

clean:
	rm -rf $(BUILD)
