/*
 * test_bwd_chain.cu - test_bwd.cu's deterministic problems without a mask
 * with one dq_acc slice (FMHAI_BWD_MAX_SPLITS 1): every problem with two or
 * more key tiles runs the ordered-dQ chain at its longest (a masked problem
 * has one slice anyway). Built from the default set's deterministic rows and
 * the two auxiliary stages alone.
 */
#define FMHAI_BWD_MAX_SPLITS 1
#define CHAIN_ROW_BWD(X, ...)
#define CHAIN_ROW_BWD_DET(X, ...) X(__VA_ARGS__)
#define CHAIN_ROW_BWD_DOT_DO_O(X, ...) X(__VA_ARGS__)
#define CHAIN_ROW_BWD_CONVERT_DQ(X, ...) X(__VA_ARGS__)
#define TEST_BWD_VARIANT_ROW(X, fam, ...) CHAIN_ROW_##fam(X, fam, __VA_ARGS__)
#define TEST_BWD_VARIANT_KEEP(c) (!(c)->set && (c)->det && (c)->mask == FMHA_MASK_NONE)
#define TEST_BWD_VARIANT_PLAN(plan) ((plan)->dq_dk_dv->family == FMHA_FAMILY_BWD_DET)
#include "test_bwd.cu"
