# fmha_tile Makefile
#
#   make test    host unit tests, compile checks (nvcc sm_80 + sm_90a, clang-19
#                gfx942/gfx90a), GPU tests where a GPU exists; last line
#                "N passed, M failed"
#   make check   compile only (everything make test builds)
#   make run     build the example forward pass (one kernel row) and run it with validation
#   make examples  build/examples/*: the CLIs with the library's whole default sets,
#                and the feature examples (build/examples/features/*: one short
#                program per feature, one kernel-set row each)
#   make examples-run  build and run the feature examples; last line
#                "N passed, M failed"
#   make examples-py  run the Python examples (examples/python/run_all.sh;
#                needs torch, a GPU and make lib or FMHA_TILE_LIB); last line
#                "N passed, M failed"
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

# The archs the library, the examples and the two-arch tests are built for:
# sm_80 (the portable pipeline, Ampere and newer) and sm_90a (Hopper's wgmma
# pipeline). `make FMHA_TILE_ARCHS=sm_90a` builds for an H100 only (and skips
# nothing), FMHA_TILE_ARCHS=sm_80 for Ampere only (the sm_90a-only tests and
# benchmarks are skipped). NVCC_ARCH, when given, overrides the list.
FMHA_TILE_ARCHS ?= sm_80 sm_90a
comma := ,
gencode = $(foreach a,$(1),-gencode=arch=compute_$(patsubst sm_%,%,$(a))$(comma)code=$(a))
NVCC_ARCH  ?= $(call gencode,$(FMHA_TILE_ARCHS))
# NVCC_THREADS=N (0: one per core) compiles a unit's archs in parallel: for
# many cores, where the slowest unit sets the time (2 cores, make -j2 lib:
# 252 s with 2 threads, 258 s without)
NVCC_THREADS ?=
NVCC_TFLAG := $(if $(NVCC_THREADS),--threads $(NVCC_THREADS))
NVCC_FLAGS ?= -x cu -std=c++17 -O3 -Iinclude -Itests $(NVCC_ARCH) $(NVCC_TFLAG)
HAS_SM90A  := $(if $(filter sm_90a,$(FMHA_TILE_ARCHS)),1,)
# The GPU test suites (test_fwd, test_prefill, test_decode, test_appendkv,
# test_bwd) are built for sm_90a alone when the list holds it: the suites run
# on an H100, where the portable pipeline's kernels run as sm_90a code too,
# and their sm_80 half doubled the slowest units of the build (test_bwd 472 s
# for both, about half that alone); the library and the examples still
# compile every row for each arch. FMHA_TILE_TEST_ARCHS="sm_80 sm_90a" builds
# them for both; on an Ampere GPU, FMHA_TILE_ARCHS=sm_80.
FMHA_TILE_TEST_ARCHS ?= $(if $(HAS_SM90A),sm_90a,$(FMHA_TILE_ARCHS))
# FMHA_TILE_TEST_COMPILE_ONLY=1 builds the GPU test suites as a compile
# check, for a machine without a GPU where they cannot run (CI): PTX alone
# (no ptxas) at NVVM -O1, a quarter of their build time (test_fwd 213 ->
# 51 s); a suite built so prints SKIP when run. The C7517/C7515 check then
# reads the library parts' ptxas reports, which hold the same default sets
# (tests/run_all.sh).
FMHA_TILE_TEST_COMPILE_ONLY ?=
# a test suite's code for the archs $(1): SASS, or PTX at NVVM -O1 as a compile check
test_gencode = $(if $(FMHA_TILE_TEST_COMPILE_ONLY),$(subst code=sm_,code=compute_,$(call gencode,$(1))) \
                   -Xcicc -O1 -DFMHA_TILE_TEST_COMPILE_CHECK,$(call gencode,$(1)))
NVCC_TEST_FLAGS := -x cu -std=c++17 -O3 -Iinclude -Itests $(call test_gencode,$(FMHA_TILE_TEST_ARCHS)) $(NVCC_TFLAG)
# The library's archs: FMHA_TILE_ARCHS unless FMHA_TILE_LIB_ARCHS is given.
# CI (no GPU) builds it for sm_90a alone, a third less of the build's
# longest units; the examples still compile every family for each arch.
LIB_ARCH   := $(if $(FMHA_TILE_LIB_ARCHS),$(call gencode,$(FMHA_TILE_LIB_ARCHS)),$(NVCC_ARCH))
# sm_90a-only units (Hopper tests and benchmarks)
NVCC90     := -x cu -std=c++17 -O3 -Iinclude -gencode=arch=compute_90a,code=sm_90a $(NVCC_TFLAG)
# the sm_90a-only test suites (a compile check with FMHA_TILE_TEST_COMPILE_ONLY)
NVCC90_TEST := -x cu -std=c++17 -O3 -Iinclude $(call test_gencode,sm_90a) $(NVCC_TFLAG)

# One line per unit built, with its time; V=1 prints the commands too.
V ?= 0
Q := $(if $(filter 1,$(V)),,@)
T0 = t0=$$(date +%s);
T1 = ; rc=$$?; echo "  built $@ ($$(( $$(date +%s) - t0 )) s)"; exit $$rc
CFLAGS_C11 := -std=c11 -Wall -Wextra -pedantic -Werror -Iinclude -Itests

HEADERS := $(shell find include -name '*.h')

.PHONY: all test check run bench tune clean toolchain host-tests nvcc-build gpu-tests lib c_api pytest bench-bwd examples \
        features examples-run examples-py

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

# dropout random numbers (Philox4x32-10 known answers, the element rule)
$(BUILD)/host/test_philox: tests/host/test_philox.c include/fmha_tile/tile/philox.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_C11) $< -o $@ -lm

host-tests: $(BUILD)/host/test_philox

# the e4m3 V^T stage of the Hopper forward: the transpose's writes against
# the P V descriptors' reads
$(BUILD)/host/test_vt8_layout: tests/host/test_vt8_layout.c include/fmha_tile/tile/vt8_layout.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_C11) $< -o $@ -lm

host-tests: $(BUILD)/host/test_vt8_layout

# AMD MFMA fragment layouts against a host model of the instructions
$(BUILD)/host/test_mfma_layout: tests/host/test_mfma_layout.c tests/host/mfma_model.h include/fmha_tile/tile/mfma_layout.h include/fmha_tile/tile/philox.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_C11) $< -o $@ -lm

host-tests: $(BUILD)/host/test_mfma_layout

# the MFMA forward's tile step replayed on the instruction model
$(BUILD)/host/test_fwd_mfma_model: tests/host/test_fwd_mfma_model.c tests/host/mfma_test.h tests/host/mfma_model.h include/fmha_tile/tile/mfma_layout.h include/fmha_tile/tile/philox.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_C11) $< -o $@ -lm

host-tests: $(BUILD)/host/test_fwd_mfma_model

# the MFMA backward's tile step replayed on the instruction model
$(BUILD)/host/test_bwd_mfma_model: tests/host/test_bwd_mfma_model.c tests/host/mfma_test.h tests/host/mfma_model.h include/fmha_tile/tile/mfma_layout.h include/fmha_tile/tile/philox.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_C11) $< -o $@ -lm

host-tests: $(BUILD)/host/test_bwd_mfma_model

# ---- NVIDIA (nvcc) --------------------------------------------------------
ifneq ($(NVCC),)
$(BUILD)/tests/test_fwd: tests/gpu/test_fwd.cu tests/gpu/test_util.h tests/ref/fmha_ref.h $(HEADERS)
	@mkdir -p $(dir $@)
	$(Q)$(T0) $(NVCC) $(NVCC_TEST_FLAGS) -Xptxas -v $< -o $@ 2> $@.ptxas.log || { cat $@.ptxas.log; exit 1; } $(T1)

$(BUILD)/tests/test_prefill: tests/gpu/test_prefill.cu tests/gpu/test_util.h tests/gpu/paged_pool.h tests/ref/fmha_ref.h $(HEADERS)
	@mkdir -p $(dir $@)
	$(Q)$(T0) $(NVCC) $(NVCC_TEST_FLAGS) -Xptxas -v $< -o $@ 2> $@.ptxas.log || { cat $@.ptxas.log; exit 1; } $(T1)

# the same suite with the default prefill set's Hopper rows left out: every
# problem on the portable pipeline, the fast one's fallback (sm_90a only)
$(BUILD)/tests/test_prefill_portable: tests/gpu/test_prefill_portable.cu tests/gpu/test_prefill.cu tests/gpu/test_util.h tests/gpu/paged_pool.h tests/ref/fmha_ref.h $(HEADERS)
	@mkdir -p $(dir $@)
	$(Q)$(T0) $(NVCC) $(NVCC90_TEST) -Itests $< -o $@ $(T1)

# decode with split-KV over contiguous and paged caches (the pools are
# test_prefill's, tests/gpu/paged_pool.h); ptxas report kept like test_fwd's
$(BUILD)/tests/test_decode: tests/gpu/test_decode.cu tests/gpu/test_util.h tests/gpu/paged_pool.h tests/ref/fmha_ref.h $(HEADERS)
	@mkdir -p $(dir $@)
	$(Q)$(T0) $(NVCC) $(NVCC_TEST_FLAGS) -Xptxas -v $< -o $@ 2> $@.ptxas.log || { cat $@.ptxas.log; exit 1; } $(T1)

# the FP8 (e4m3) forward: Hopper rows only (sm_90a), its own translation unit
$(BUILD)/tests/test_fwd_fp8: tests/gpu/test_fwd_fp8.cu tests/gpu/test_util.h tests/ref/fmha_ref.h $(HEADERS)
	@mkdir -p $(dir $@)
	$(Q)$(T0) $(NVCC) $(NVCC90_TEST) -Itests -Xptxas -v $< -o $@ \
	    2> $@.ptxas.log || { cat $@.ptxas.log; exit 1; } $(T1)

# The examples (`make examples`) declare the library's default sets: their
# kernels are the library's parts again, so the test build compiles each
# example with one row instead (examples/<name>_one, FMHA_EXAMPLE_ONE_ROW),
# which checks the example's code; the library checks the sets.
EXAMPLES := fmha_fwd fmha_batch_prefill fmha_decode
$(BUILD)/examples/%_one: examples/%.cu examples/example_util.h tests/ref/fmha_ref.h $(HEADERS)
	@mkdir -p $(dir $@)
	$(Q)$(T0) $(NVCC) $(NVCC_FLAGS) --threads 0 -DFMHA_EXAMPLE_ONE_ROW $< -o $@ $(T1)

# The feature examples (examples/features/*.cu): one short program per feature,
# each with the one kernel-set row it needs (a few seconds to build), printing
# one line ending in valid:y / valid:n; `make examples-run` runs them
# (examples/features/run_all.sh). fwd_fp8 is Hopper-only: sm_90a, and only
# when the archs include it.
FEATURES := $(filter-out $(if $(HAS_SM90A),,fwd_fp8 fwd_fp8_vkmajor),$(basename $(notdir $(wildcard examples/features/*.cu))))
FEATURE_BINS := $(patsubst %,$(BUILD)/examples/features/%,$(FEATURES))
FEATURE_DEPS := examples/features/features.h examples/example_util.h tests/ref/fmha_ref.h \
                tests/ref/fmha_ref_bwd.h tests/ref/fmha_ref_decode.h $(HEADERS)
$(BUILD)/examples/features/%: examples/features/%.cu $(FEATURE_DEPS)
	@mkdir -p $(dir $@)
	$(Q)$(T0) $(NVCC) $(NVCC_FLAGS) $< -o $@ $(T1)

$(BUILD)/examples/features/fwd_fp8: examples/features/fwd_fp8.cu $(FEATURE_DEPS)
	@mkdir -p $(dir $@)
	$(Q)$(T0) $(NVCC) $(NVCC90) $< -o $@ $(T1)

$(BUILD)/examples/fmha_batch_prefill: examples/fmha_batch_prefill.cu examples/example_util.h tests/ref/fmha_ref.h $(HEADERS)
	@mkdir -p $(dir $@)
	$(Q)$(T0) $(NVCC) $(NVCC_FLAGS) $< -o $@ $(T1)

$(BUILD)/bench/bench_prefill: bench/bench_prefill.cu examples/example_util.h $(HEADERS)
	@mkdir -p $(dir $@)
	$(Q)$(T0) $(NVCC) $(NVCC90) $< -o $@ $(T1)

# append-KV with rotary embedding, alone and fused with decode
$(BUILD)/tests/test_appendkv: tests/gpu/test_appendkv.cu tests/gpu/test_util.h tests/ref/fmha_ref_decode.h tests/ref/fmha_ref.h $(HEADERS)
	@mkdir -p $(dir $@)
	$(Q)$(T0) $(NVCC) $(NVCC_TEST_FLAGS) $< -o $@ $(T1)

# split-KV decode bandwidth (bench/run_decode.sh runs it beside PyTorch SDPA): sm_90a only
$(BUILD)/bench/bench_decode: bench/bench_decode.cu examples/example_util.h $(HEADERS)
	@mkdir -p $(dir $@)
	$(Q)$(T0) $(NVCC) $(NVCC90) $< -o $@ $(T1)

# decode with split-KV: plan, run, time and validate one problem
$(BUILD)/examples/fmha_decode: examples/fmha_decode.cu examples/example_util.h tests/ref/fmha_ref.h $(HEADERS)
	@mkdir -p $(dir $@)
	$(Q)$(T0) $(NVCC) $(NVCC_FLAGS) $< -o $@ $(T1)

$(BUILD)/examples/fmha_fwd: examples/fmha_fwd.cu examples/example_util.h tests/ref/fmha_ref.h $(HEADERS)
	@mkdir -p $(dir $@)
	$(Q)$(T0) $(NVCC) $(NVCC_FLAGS) $< -o $@ $(T1)

$(BUILD)/bench/tune_fwd: bench/tune_fwd.cu $(HEADERS)
	@mkdir -p $(dir $@)
	$(Q)$(T0) $(NVCC) $(NVCC90) $< -o $@ $(T1)

# the Hopper forward's products alone at the hdim-256 shapes (sm_90a only)
$(BUILD)/bench/wgmma_rate: bench/wgmma_rate.cu $(HEADERS)
	@mkdir -p $(dir $@)
	$(Q)$(T0) $(NVCC) $(NVCC90) $< -o $@ $(T1)

# the e4m3 softmax's special-function and conversion rates, one tile's exponentials a warp (sm_90a only)
$(BUILD)/bench/sfu_rate: bench/sfu_rate.cu
	@mkdir -p $(dir $@)
	$(Q)$(T0) $(NVCC) $(NVCC90) $< -o $@ $(T1)

# bench_fwd with the Hopper forward's timeline hooks: cycles per phase of a key tile (sm_90a only)
$(BUILD)/bench/fwd_trace: bench/fwd_trace.cu bench/bench_fwd.cu $(HEADERS)
	@mkdir -p $(dir $@)
	$(Q)$(T0) $(NVCC) $(NVCC90) -Itests $< -o $@ $(T1)

# bench_fwd with the Hopper forward's block hooks: prologue, key loop, epilogue, gaps (sm_90a only)
$(BUILD)/bench/fwd_blocks: bench/fwd_blocks.cu bench/bench_fwd.cu $(HEADERS)
	@mkdir -p $(dir $@)
	$(Q)$(T0) $(NVCC) $(NVCC90) -Itests $< -o $@ $(T1)

# bench_bwd with the Hopper backward's timeline hooks: cycles per event of a step (sm_90a only)
$(BUILD)/bench/bwd_trace: bench/bwd_trace.cu bench/bench_bwd.cu $(HEADERS)
	@mkdir -p $(dir $@)
	$(Q)$(T0) $(NVCC) $(NVCC90) -Itests $< -o $@ $(T1)

# ---- shared library (C ABI) and the C program that links it -------------------
# The library is built from several units side by side (make -j): the main
# unit src/fmha_tile_lib.cu defines FMHA_TILE_BUILD_SHARED (the API functions
# get C linkage and default visibility; everything else is hidden), builds
# the helper kernels and joins the default set from its parts; each part of
# src/lib_parts.h is src/fmha_tile_lib_part.cu compiled with
# -DFMHA_LIB_PART=<part> (the list is read from that header, nothing else
# names the parts); src/fmha_tile_lib_decode.cu holds the decode set and
# exports only fmha_default_decode_kernel_set. `-cudart shared`: the library
# uses libcudart.so, the runtime a C program (-lcudart) or PyTorch loads too.
# After linking, nm -D must list exactly the FMHA_API functions of api.h, and
# the size of the .so is printed. --compress-mode=size: the device code is
# stored compressed for size (59 -> 10 MB; unpacked once when the library
# loads).
CUDA_HOME ?= $(patsubst %/bin/,%,$(dir $(realpath $(NVCC))))
LIB_SO    := $(BUILD)/libfmha_tile.so
GIT_REV   := $(shell git rev-parse --short HEAD 2>/dev/null)
LIB_FLAGS := -x cu -std=c++17 -O3 -Iinclude $(LIB_ARCH) $(NVCC_TFLAG) -Xcompiler -fPIC \
             -Xcompiler -fvisibility=hidden --compress-mode=size \
             $(if $(GIT_REV),-DFMHA_TILE_LIB_GIT=\"$(GIT_REV)\")
# parentheses for sed inside $(shell ...), where make would count them
LP        := (
RP        := )
LIB_PARTS := $(shell sed -n 's/^ *P$(LP)\$(LP)[a-z0-9_]*\$(RP), a$(RP).*/\1/p' src/lib_parts.h)
LIB_OBJS  := $(BUILD)/lib/fmha_tile_lib.o $(BUILD)/lib/fmha_tile_lib_decode.o \
             $(patsubst %,$(BUILD)/lib/part_%.o,$(LIB_PARTS))
LIB_API   := $(shell sed -n 's/^FMHA_API.*[ *]\$(LP)fmha_[a-z0-9_]*\$(RP)$(LP).*/\1/p' include/fmha_tile/api.h)

$(BUILD)/lib/fmha_tile_lib.o: src/fmha_tile_lib.cu src/lib_parts.h $(HEADERS)
	@mkdir -p $(dir $@)
	$(Q)$(T0) $(NVCC) $(LIB_FLAGS) -c $< -o $@ $(T1)

$(BUILD)/lib/fmha_tile_lib_decode.o: src/fmha_tile_lib_decode.cu $(HEADERS)
	@mkdir -p $(dir $@)
	$(Q)$(T0) $(NVCC) $(LIB_FLAGS) -c $< -o $@ $(T1)

$(BUILD)/lib/part_%.o: src/fmha_tile_lib_part.cu src/lib_parts.h $(HEADERS)
	@mkdir -p $(dir $@)
	$(Q)$(T0) $(NVCC) $(LIB_FLAGS) -Xptxas -v -DFMHA_LIB_PART=$* -c $< -o $@ 2> $@.ptxas.log || \
	    { cat $@.ptxas.log; exit 1; } $(T1)

$(LIB_SO): $(LIB_OBJS)
	$(Q)$(T0) $(NVCC) -shared -cudart shared $(LIB_ARCH) $(LIB_OBJS) -o $@ $(T1)
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
	@echo "lib: $@ is $$(( ($$(wc -c < $@) + 524288) / 1048576 )) MB ($(words $(LIB_OBJS)) units: $(LIB_PARTS) and the main and decode units; archs: $(or $(FMHA_TILE_LIB_ARCHS),$(FMHA_TILE_ARCHS)))"

# the joined default set lists exactly what one unit of FMHA_LIB_DEFAULT_SET builds
$(BUILD)/host/test_lib_registry: tests/host/test_lib_registry.c src/lib_parts.h $(HEADERS) $(LIB_SO)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_C11) $< -o $@ -ldl -L$(CUDA_HOME)/lib64 -Wl,--no-as-needed -lcudart \
	    -Wl,-rpath,$(CUDA_HOME)/lib64

$(BUILD)/examples/c_api: examples/c_api.c include/fmha_tile/api.h $(LIB_SO)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_C11) -O2 -DFMHA_TILE_LINK_SHARED -I$(CUDA_HOME)/include $< -o $@ \
	    -L$(BUILD) -lfmha_tile -L$(CUDA_HOME)/lib64 -lcudart -lm \
	    -Wl,-rpath,'$$ORIGIN/..' -Wl,-rpath,$(CUDA_HOME)/lib64

lib: $(LIB_SO)
c_api: $(BUILD)/examples/c_api
pytest: $(LIB_SO)

nvcc-build: $(BUILD)/tests/test_fwd $(patsubst %,$(BUILD)/examples/%_one,$(EXAMPLES)) $(FEATURE_BINS) \
            $(LIB_SO) $(BUILD)/examples/c_api \
            $(BUILD)/host/test_lib_registry \
            $(BUILD)/tests/test_prefill

# backward: GPU test (ptxas report kept for the register summary) and benchmark
$(BUILD)/tests/test_bwd: tests/gpu/test_bwd.cu tests/gpu/test_util.h tests/ref/fmha_ref.h tests/ref/fmha_ref_bwd.h $(HEADERS)
	@mkdir -p $(dir $@)
	$(Q)$(T0) $(NVCC) $(NVCC_TEST_FLAGS) -Xptxas -v $< -o $@ 2> $@.ptxas.log || { cat $@.ptxas.log; exit 1; } $(T1)

# variants of test_bwd.cu, each built from the rows its schedule serves and
# running the problems those rows take (sm_90a only). One dq_acc slice: every
# unmasked deterministic problem with two or more key tiles runs the
# ordered-dQ chain at its longest
$(BUILD)/tests/test_bwd_chain: tests/gpu/test_bwd_chain.cu tests/gpu/test_bwd.cu tests/gpu/test_util.h tests/ref/fmha_ref.h tests/ref/fmha_ref_bwd.h $(HEADERS)
	@mkdir -p $(dir $@)
	$(Q)$(T0) $(NVCC) $(NVCC90_TEST) -Itests $< -o $@ $(T1)

# the portable rows single-buffered (the one-stage schedule)
$(BUILD)/tests/test_bwd_stage1: tests/gpu/test_bwd_stage1.cu tests/gpu/test_bwd.cu tests/gpu/test_util.h tests/ref/fmha_ref.h tests/ref/fmha_ref_bwd.h $(HEADERS)
	@mkdir -p $(dir $@)
	$(Q)$(T0) $(NVCC) $(NVCC90_TEST) -Itests $< -o $@ $(T1)

# without the Hopper rows: the portable pipeline's tuned rows of head dims 64
# and 128 on an sm_90 GPU
$(BUILD)/tests/test_bwd_portable: tests/gpu/test_bwd_portable.cu tests/gpu/test_bwd.cu tests/gpu/test_util.h tests/ref/fmha_ref.h tests/ref/fmha_ref_bwd.h $(HEADERS)
	@mkdir -p $(dir $@)
	$(Q)$(T0) $(NVCC) $(NVCC90_TEST) -Itests $< -o $@ $(T1)

# the warpgroup (wgmma) primitives against a CPU product (sm_90a only)
$(BUILD)/tests/test_wgmma: tests/gpu/test_wgmma.cu tests/gpu/test_util.h $(HEADERS)
	@mkdir -p $(dir $@)
	$(Q)$(T0) $(NVCC) $(NVCC90_TEST) -Itests $< -o $@ $(T1)

$(BUILD)/bench/bench_bwd: bench/bench_bwd.cu examples/example_util.h $(HEADERS)
	@mkdir -p $(dir $@)
	$(Q)$(T0) $(NVCC) $(NVCC_FLAGS) $< -o $@ $(T1)

nvcc-build: $(BUILD)/tests/test_bwd $(BUILD)/tests/test_decode $(BUILD)/tests/test_appendkv \
            $(if $(HAS_SM90A),$(BUILD)/tests/test_bwd_chain $(BUILD)/tests/test_bwd_stage1 \
                $(BUILD)/tests/test_bwd_portable $(BUILD)/tests/test_wgmma $(BUILD)/tests/test_prefill_portable \
                $(BUILD)/tests/test_fwd_fp8)
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

# the example forward with the one row its problem needs (bf16, hdim 128, a
# mask): a first result in seconds; `make examples` builds every row
run: $(BUILD)/examples/fmha_fwd_one
	$(BUILD)/examples/fmha_fwd_one -b=2 -h=16 -h_k=4 -s=1000 -s_k=1200 -d=128 -prec=bf16 -mask=b -v=1

examples: $(patsubst %,$(BUILD)/examples/%,$(EXAMPLES)) features

# the feature examples alone, and running them ("N passed, M failed" last)
features: $(FEATURE_BINS)

examples-run: features
	@sh examples/features/run_all.sh "$(BUILD)"

# the Python examples through the torch binding (SKIP without torch or a GPU)
examples-py:
	@sh examples/python/run_all.sh "$(PYTHON)" "$(BUILD)"

bench:
	bash bench/run.sh

tune: $(BUILD)/bench/tune_fwd
	$(BUILD)/bench/tune_fwd

clean:
	rm -rf $(BUILD)
