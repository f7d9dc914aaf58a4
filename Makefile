# fmha_tile Makefile
#
#   make test    host unit tests, compile checks (nvcc sm_80 + sm_90a, clang-19
#                gfx942/gfx90a), GPU tests where a GPU exists; last line
#                "N passed, M failed"
#   make check   compile only (everything make test builds)
#   make run     build the example forward pass and run it with validation
#   make bench   forward TFLOPS on the DESIGN grid + PyTorch SDPA, same run
#   make bench-bwd  build build/bench/bench_bwd (backward TFLOPS; bench/run_bwd.sh
#                runs it next to PyTorch SDPA's flash and cuDNN backward)
#   make tune    tile tuning driver (bench/tune_fwd.cu)
#   make lib     build/libfmha_tile.so: the default kernel set behind the C API
#                (C linkage, only the fmha_* entry points exported)
#   make c_api   build/examples/c_api: a plain C11 program (gcc) linking it
#   make pytest  the Python package's tests (python/tests; needs torch + GPU)
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

.PHONY: all test check run bench tune clean toolchain host-tests nvcc-build gpu-tests lib c_api pytest bench-bwd

all: toolchain nvcc-build host-tests

toolchain:
	@echo "toolchain: cc=$$($(CC) --version | head -n1)"
	@echo "toolchain: nvcc=$(if $(NVCC),$(NVCC),not found)"
	@echo "toolchain: clang-19=$(if $(CLANG19),$(CLANG19),not found)"

# ---- host (C11, no device compiler) ---------------------------------------
$(BUILD)/host/test_dispatch: tests/host/test_dispatch.c tests/host/host_check.h $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_C11) $< -o $@ -lm

$(BUILD)/host/test_ref: tests/host/test_ref.c tests/ref/fmha_ref.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_C11) $< -o $@ -lm

host-tests: $(BUILD)/host/test_dispatch $(BUILD)/host/test_ref

# backward: the CPU reference's self-test and the plan/workspace unit tests
$(BUILD)/host/test_ref_bwd: tests/host/test_ref_bwd.c tests/ref/fmha_ref_bwd.h tests/ref/fmha_ref.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_C11) $< -o $@ -lm

$(BUILD)/host/test_bwd_workspace: tests/host/test_bwd_workspace.c tests/host/host_check.h $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_C11) $< -o $@ -lm

host-tests: $(BUILD)/host/test_ref_bwd $(BUILD)/host/test_bwd_workspace

# split-KV decode: split ranges, heuristic, workspace, and the decode
# reference pieces (LSE combine, rotary)
$(BUILD)/host/test_splitkv: tests/host/test_splitkv.c tests/host/host_check.h tests/ref/fmha_ref_decode.h tests/ref/fmha_ref.h $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_C11) $< -o $@ -lm

host-tests: $(BUILD)/host/test_splitkv

# ---- NVIDIA (nvcc) --------------------------------------------------------
ifneq ($(NVCC),)
$(BUILD)/tests/test_fwd: tests/gpu/test_fwd.cu tests/gpu/test_util.h tests/ref/fmha_ref.h $(HEADERS)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_FLAGS) -Xptxas -v $< -o $@ 2> $@.ptxas.log || { cat $@.ptxas.log; exit 1; }

$(BUILD)/tests/test_prefill: tests/gpu/test_prefill.cu tests/gpu/test_util.h tests/gpu/paged_pool.h tests/ref/fmha_ref.h $(HEADERS)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_FLAGS) -Xptxas -v $< -o $@ 2> $@.ptxas.log || { cat $@.ptxas.log; exit 1; }

# the same suite with the default prefill set's Hopper rows left out: every
# problem on the portable pipeline, the fast one's fallback (sm_90a only)
$(BUILD)/tests/test_prefill_portable: tests/gpu/test_prefill_portable.cu tests/gpu/test_prefill.cu tests/gpu/test_util.h tests/gpu/paged_pool.h tests/ref/fmha_ref.h $(HEADERS)
	@mkdir -p $(dir $@)
	$(NVCC) -x cu -std=c++17 -O3 -Iinclude -Itests -gencode=arch=compute_90a,code=sm_90a $< -o $@

# decode with split-KV over contiguous and paged caches (the pools are
# test_prefill's, tests/gpu/paged_pool.h); ptxas report kept like test_fwd's
$(BUILD)/tests/test_decode: tests/gpu/test_decode.cu tests/gpu/test_util.h tests/gpu/paged_pool.h tests/ref/fmha_ref.h $(HEADERS)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_FLAGS) -Xptxas -v $< -o $@ 2> $@.ptxas.log || { cat $@.ptxas.log; exit 1; }

# the FP8 (e4m3) forward: Hopper rows only (sm_90a), its own translation unit
$(BUILD)/tests/test_fwd_fp8: tests/gpu/test_fwd_fp8.cu tests/gpu/test_util.h tests/ref/fmha_ref.h $(HEADERS)
	@mkdir -p $(dir $@)
	$(NVCC) -x cu -std=c++17 -O3 -Iinclude -Itests -gencode=arch=compute_90a,code=sm_90a -Xptxas -v $< -o $@ \
	    2> $@.ptxas.log || { cat $@.ptxas.log; exit 1; }

$(BUILD)/examples/fmha_batch_prefill: examples/fmha_batch_prefill.cu examples/example_util.h tests/ref/fmha_ref.h $(HEADERS)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_FLAGS) $< -o $@

$(BUILD)/bench/bench_prefill: bench/bench_prefill.cu examples/example_util.h $(HEADERS)
	@mkdir -p $(dir $@)
	$(NVCC) -x cu -std=c++17 -O3 -Iinclude -gencode=arch=compute_90a,code=sm_90a $< -o $@

# append-KV with rotary embedding, alone and fused with decode (sm_80 + sm_90a)
$(BUILD)/tests/test_appendkv: tests/gpu/test_appendkv.cu tests/gpu/test_util.h tests/ref/fmha_ref_decode.h tests/ref/fmha_ref.h $(HEADERS)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_FLAGS) $< -o $@

# split-KV decode bandwidth (bench/run_decode.sh runs it beside PyTorch SDPA): sm_90a only
$(BUILD)/bench/bench_decode: bench/bench_decode.cu examples/example_util.h $(HEADERS)
	@mkdir -p $(dir $@)
	$(NVCC) -x cu -std=c++17 -O3 -Iinclude -gencode=arch=compute_90a,code=sm_90a $< -o $@

# decode with split-KV: plan, run, time and validate one problem
$(BUILD)/examples/fmha_decode: examples/fmha_decode.cu examples/example_util.h tests/ref/fmha_ref.h $(HEADERS)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_FLAGS) $< -o $@

$(BUILD)/examples/fmha_fwd: examples/fmha_fwd.cu examples/example_util.h tests/ref/fmha_ref.h $(HEADERS)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_FLAGS) $< -o $@

$(BUILD)/bench/tune_fwd: bench/tune_fwd.cu $(HEADERS)
	@mkdir -p $(dir $@)
	$(NVCC) -x cu -std=c++17 -O3 -Iinclude -gencode=arch=compute_90a,code=sm_90a $< -o $@

# ---- shared library (C ABI) and the C program that links it -------------------
# src/fmha_tile_lib.cu declares the default kernel set and defines
# FMHA_TILE_BUILD_SHARED, so the API functions get C linkage and default
# visibility; everything else is hidden. src/fmha_tile_lib_decode.cu holds the
# decode set (its own unit: families do not grow one file) and exports only
# fmha_default_decode_kernel_set. `-cudart shared`: the library uses
# libcudart.so, the runtime a C program (-lcudart) or PyTorch loads too. After
# linking, nm -D must list exactly the FMHA_API functions of api.h.
CUDA_HOME ?= $(patsubst %/bin/,%,$(dir $(realpath $(NVCC))))
LIB_SO    := $(BUILD)/libfmha_tile.so
GIT_REV   := $(shell git rev-parse --short HEAD 2>/dev/null)
LIB_FLAGS := -x cu -std=c++17 -O3 -Iinclude $(NVCC_ARCH) -Xcompiler -fPIC \
             -Xcompiler -fvisibility=hidden \
             $(if $(GIT_REV),-DFMHA_TILE_LIB_GIT=\"$(GIT_REV)\")
LIB_OBJS  := $(BUILD)/lib/fmha_tile_lib.o $(BUILD)/lib/fmha_tile_lib_decode.o
# parentheses for sed inside $(shell ...), where make would count them
LP        := (
RP        := )
LIB_API   := $(shell sed -n 's/^FMHA_API.*[ *]\$(LP)fmha_[a-z0-9_]*\$(RP)$(LP).*/\1/p' include/fmha_tile/api.h)

$(BUILD)/lib/%.o: src/%.cu $(HEADERS)
	@mkdir -p $(dir $@)
	$(NVCC) $(LIB_FLAGS) -c $< -o $@

$(LIB_SO): $(LIB_OBJS)
	$(NVCC) -shared -cudart shared $(NVCC_ARCH) $(LIB_OBJS) -o $@
	@if command -v nm >/dev/null 2>&1; then \
	    got=" $$(nm -D --defined-only $@ | awk 'NF == 3 { print $$3 }' | tr '\n' ' ')"; \
	    want=" $(LIB_API) "; missing=; extra=; \
	    for s in $$want; do case "$$got" in *" $$s "*) ;; *) missing="$$missing $$s";; esac; done; \
	    for s in $$got; do case "$$want" in *" $$s "*) ;; *) extra="$$extra $$s";; esac; done; \
	    if [ -n "$$missing$$extra" ]; then \
	        echo "FAIL $@: exports must be exactly the FMHA_API functions of api.h;" \
	             "missing:$${missing:- none}; unexpected:$${extra:- none}"; rm -f $@; exit 1; \
	    fi; \
	    echo "lib: $@ exports exactly the $(words $(LIB_API)) C API functions of api.h"; \
	else echo "SKIP export check of $@: nm not found"; fi

$(BUILD)/examples/c_api: examples/c_api.c include/fmha_tile/api.h $(LIB_SO)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_C11) -O2 -DFMHA_TILE_LINK_SHARED -I$(CUDA_HOME)/include $< -o $@ \
	    -L$(BUILD) -lfmha_tile -L$(CUDA_HOME)/lib64 -lcudart -lm \
	    -Wl,-rpath,'$$ORIGIN/..' -Wl,-rpath,$(CUDA_HOME)/lib64

lib: $(LIB_SO)
c_api: $(BUILD)/examples/c_api
pytest: $(LIB_SO)

nvcc-build: $(BUILD)/tests/test_fwd $(BUILD)/examples/fmha_fwd $(LIB_SO) $(BUILD)/examples/c_api \
            $(BUILD)/tests/test_prefill $(BUILD)/examples/fmha_batch_prefill

# backward: GPU test (ptxas report kept for the register summary) and benchmark
$(BUILD)/tests/test_bwd: tests/gpu/test_bwd.cu tests/gpu/test_util.h tests/ref/fmha_ref.h tests/ref/fmha_ref_bwd.h $(HEADERS)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_FLAGS) -Xptxas -v $< -o $@ 2> $@.ptxas.log || { cat $@.ptxas.log; exit 1; }

# the same tests with one dq_acc slice: every deterministic problem with two
# or more key tiles runs the ordered-dQ chains at their longest (sm_90a only)
$(BUILD)/tests/test_bwd_chain: tests/gpu/test_bwd.cu tests/gpu/test_util.h tests/ref/fmha_ref.h tests/ref/fmha_ref_bwd.h $(HEADERS)
	@mkdir -p $(dir $@)
	$(NVCC) -x cu -std=c++17 -O3 -Iinclude -Itests -gencode=arch=compute_90a,code=sm_90a \
	    -DFMHAI_BWD_MAX_SPLITS=1 $< -o $@

# the same tests with every row single-buffered (the one-stage schedule)
$(BUILD)/tests/test_bwd_stage1: tests/gpu/test_bwd_stage1.cu tests/gpu/test_bwd.cu tests/gpu/test_util.h tests/ref/fmha_ref.h tests/ref/fmha_ref_bwd.h $(HEADERS)
	@mkdir -p $(dir $@)
	$(NVCC) -x cu -std=c++17 -O3 -Iinclude -Itests -gencode=arch=compute_90a,code=sm_90a $< -o $@

# the same tests without the Hopper rows: the portable pipeline's tuned rows
# on an sm_90 GPU (sm_90a only)
$(BUILD)/tests/test_bwd_portable: tests/gpu/test_bwd_portable.cu tests/gpu/test_bwd.cu tests/gpu/test_util.h tests/ref/fmha_ref.h tests/ref/fmha_ref_bwd.h $(HEADERS)
	@mkdir -p $(dir $@)
	$(NVCC) -x cu -std=c++17 -O3 -Iinclude -Itests -gencode=arch=compute_90a,code=sm_90a $< -o $@

# the warpgroup (wgmma) primitives against a CPU product (sm_90a only)
$(BUILD)/tests/test_wgmma: tests/gpu/test_wgmma.cu tests/gpu/test_util.h $(HEADERS)
	@mkdir -p $(dir $@)
	$(NVCC) -x cu -std=c++17 -O3 -Iinclude -Itests -gencode=arch=compute_90a,code=sm_90a $< -o $@

$(BUILD)/bench/bench_bwd: bench/bench_bwd.cu examples/example_util.h $(HEADERS)
	@mkdir -p $(dir $@)
	$(NVCC) -x cu -std=c++17 -O3 -Iinclude -gencode=arch=compute_90a,code=sm_90a -gencode=arch=compute_80,code=sm_80 $< -o $@

nvcc-build: $(BUILD)/tests/test_bwd $(BUILD)/tests/test_bwd_chain $(BUILD)/tests/test_bwd_stage1 \
            $(BUILD)/tests/test_bwd_portable $(BUILD)/tests/test_wgmma $(BUILD)/tests/test_prefill_portable \
            $(BUILD)/tests/test_fwd_fp8 $(BUILD)/tests/test_decode $(BUILD)/tests/test_appendkv $(BUILD)/examples/fmha_decode
bench-bwd: $(BUILD)/bench/bench_bwd
else
nvcc-build:
	@echo "SKIP nvcc builds: nvcc not found"
lib c_api:
	@echo "make $@: nvcc not found (set NVCC=/path/to/nvcc)"; exit 1
endif

pytest:
	@sh python/tests/run.sh "$(PYTHON)" "$(BUILD)"

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
