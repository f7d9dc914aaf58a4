/*
 * test_prefill_portable.cu - test_prefill.cu with the default prefill set built
 * without its Hopper rows: every problem, fp16/bf16 and fp8 KV alike, runs on
 * the portable mma.sync pipeline, the fallback the wgmma pipeline relies on.
 */
#define FMHAI_TTAB_PREFILL_16 FWD
#define FMHAI_TTAB_PREFILL_8 FP8
#define TEST_PREFILL_PORTABLE 1
#include "test_prefill.cu"
