/*
 * appendkv_rope.cu - append-KV with rotary embedding (RoPE), fused with
 * decode: the step's new K/V rows are written into the cache, the new keys
 * and the queries are turned by their positions, then attention runs on the
 * updated cache, in one call on one stream.
 *
 * To the decode args (see decode_splitkv.cu) add k_new / v_new
 * ([b, seqlen_knew, h_k, d] by their own strides) and seqlen_knew, and the
 * rotary tables rotary_cos / rotary_sin (fp32 [rotary_seqlen][rotary_dim/2])
 * with rotary_dim (a multiple of 16 up to d) and rotary_interleaved (pairs
 * (2k, 2k+1), else (k, k + rotary_dim/2)). seqlen_k counts the keys after
 * the append: the new rows land at positions seqlen_k - seqlen_knew .. and
 * turn by those positions; query i turns by seqlen_k - seqlen_q + i into
 * q_rope (which may be q itself). fmha_appendkv() runs the append alone.
 *
 * Checked, bf16, GQA 8:2, d=128, one new token for 2 sequences of 300 and
 * 1030 keys (after the append), half-split rotary over the whole head dim:
 * the new K rows hold the turned keys (within one bf16 rounding), the new V
 * rows hold v_new bit for bit, every other cache slot is unchanged, q_rope
 * holds the turned queries, and O and LSE match the CPU reference computed
 * on the cache and queries the GPU wrote.
 */
#define EX_PROG "appendkv_rope"
#include "features.h"
#include "../../tests/ref/fmha_ref_decode.h"

#define KERNELS(X) \
    X(DECODE, BF16, 128, MASK, SOFTCAP, 0, FMHA_ANY, FMHA_ANY, FMHA_ANY, FMHA_ANY)
DECL_FMHA_KERNEL_SET(kernels, KERNELS)

enum { B = 2, H = 8, HK = 2, S = 1, NEW = 1, D = 128, CAP = 1040, RD = 128, HALF = RD / 2 };

/* |got - want| within one bf16 rounding of want */
static int close_bf16(uint16_t got, double want)
{
    return fabs(fmha_ref_bf16_to_f32(got) - want) <= fabs(want) / 128 + 1e-6;
}

int main(void)
{
    const int32_t sk[B] = { 300, 1030 };             /* keys after the append */
    const size_t nq = (size_t)B * S * H * D, nn = (size_t)B * NEW * HK * D, nkv = (size_t)B * CAP * HK * D;
    fmha_ref_rng rng = fmha_ref_rng_make(110);
    float *f = (float *)fx_host(nkv * 4), *cosv = (float *)fx_host(CAP * HALF * 4), *sinv = (float *)fx_host(CAP * HALF * 4);
    uint16_t *qh = (uint16_t *)fx_host(nq * 2), *knh = (uint16_t *)fx_host(nn * 2), *vnh = (uint16_t *)fx_host(nn * 2);
    uint16_t *k0 = (uint16_t *)fx_host(nkv * 2), *v0 = (uint16_t *)fx_host(nkv * 2);
    uint16_t *k1 = (uint16_t *)fx_host(nkv * 2), *v1 = (uint16_t *)fx_host(nkv * 2);
    uint16_t *qr = (uint16_t *)fx_host(nq * 2), *oh = (uint16_t *)fx_host(nq * 2);
    float *kf = (float *)fx_host(nkv * 4), *vf = (float *)fx_host(nkv * 4), *qf = (float *)fx_host(nq * 4);
    float *lseh = (float *)fx_host((size_t)B * H * S * 4), row[D];
    fmha_decode_args a;
    fmha_decode_plan plan;
    fx_check c;
    size_t e;
    int b, t, h, x, p;

    fx_device();
    fx_random16(&rng, nq, 1, 1.0f, qh, f);
    fx_random16(&rng, nn, 1, 1.0f, knh, f);
    fx_random16(&rng, nn, 1, 1.0f, vnh, f);
    fx_random16(&rng, nkv, 1, 1.0f, k0, f);          /* the cache: old keys random, */
    fx_random16(&rng, nkv, 1, 1.0f, v0, f);
    for (b = 0; b < B; b++)                          /* the new rows' slots and beyond: NaN */
        for (e = ((size_t)b * CAP + sk[b] - NEW) * HK * D; e < (size_t)(b + 1) * CAP * HK * D; e++) k0[e] = v0[e] = 0xFFFF;
    for (p = 0; p < CAP; p++)                        /* angle of pair k at position p: p / 10000^(2k/RD) */
        for (x = 0; x < HALF; x++) {
            cosv[p * HALF + x] = (float)cos(p * pow(10000.0, -2.0 * x / RD));
            sinv[p * HALF + x] = (float)sin(p * pow(10000.0, -2.0 * x / RD));
        }

    memset(&a, 0, sizeof(a));
    a.q_dtype = a.kv_dtype = FMHA_DTYPE_BF16;
    a.batch = B; a.nhead_q = H; a.nhead_k = HK; a.seqlen_q = S; a.hdim_q = a.hdim_v = D; a.max_seqlen_k = 1030;
    a.q = fx_to_device(qh, nq * 2);
    a.o = fx_poisoned(nq * 2);
    a.lse = (float *)fx_poisoned((size_t)B * H * S * 4);
    a.stride_q = a.stride_o = (int64_t)H * D; a.nhead_stride_q = a.nhead_stride_o = D;
    a.batch_stride_q = a.batch_stride_o = (int64_t)S * H * D;
    a.nhead_stride_lse = S; a.batch_stride_lse = (int64_t)H * S;
    a.k_cache = fx_to_device(k0, nkv * 2); a.v_cache = fx_to_device(v0, nkv * 2);
    a.stride_k = a.stride_v = (int64_t)HK * D; a.nhead_stride_k = a.nhead_stride_v = D;
    a.batch_stride_k = a.batch_stride_v = (int64_t)CAP * HK * D;
    a.seqlen_k = (const int32_t *)fx_to_device(sk, sizeof(sk));
    a.cache_seqlen_max = CAP;
    a.scale = 1.0f / sqrtf((float)D);
    a.mask_type = FMHA_MASK_BOTTOM_RIGHT; a.window_left = -1; a.window_right = 0;
    /* the append: one new row per sequence, [b, NEW, HK, D] */
    a.k_new = fx_to_device(knh, nn * 2); a.v_new = fx_to_device(vnh, nn * 2); a.seqlen_knew = NEW;
    a.stride_knew = a.stride_vnew = (int64_t)HK * D; a.nhead_stride_knew = a.nhead_stride_vnew = D;
    a.batch_stride_knew = a.batch_stride_vnew = (int64_t)NEW * HK * D;
    /* the rotary embedding of the new keys and of the queries (into q_rope) */
    a.rotary_dim = RD; a.rotary_interleaved = 0; a.rotary_seqlen = CAP;
    a.rotary_cos = (const float *)fx_to_device(cosv, CAP * HALF * 4);
    a.rotary_sin = (const float *)fx_to_device(sinv, CAP * HALF * 4);
    a.q_rope = fx_poisoned(nq * 2);
    a.num_splits = 0;

    FX_OK(fmha_decode_plan_make(&kernels, &a, &plan));
    if (plan.workspace_size) CHECK_CUDA(cudaMalloc(&a.workspace, plan.workspace_size));
    a.workspace_size = plan.workspace_size;
    FX_OK(fmha_decode_run(&plan, &a, NULL));
    CHECK_CUDA(cudaDeviceSynchronize());
    fx_to_host(k1, a.k_cache, nkv * 2); fx_to_host(v1, a.v_cache, nkv * 2);
    fx_to_host(qr, a.q_rope, nq * 2); fx_to_host(oh, a.o, nq * 2);
    fx_to_host(lseh, a.lse, (size_t)B * H * S * 4);

    fx_check_init(&c);
    for (b = 0; b < B; b++)                          /* the new rows: turned K, V as given */
        for (t = 0; t < NEW; t++)
            for (h = 0; h < HK; h++) {
                const int pos = sk[b] - NEW + t;
                const size_t src = (((size_t)b * NEW + t) * HK + h) * D, dst = (((size_t)b * CAP + pos) * HK + h) * D;
                for (x = 0; x < D; x++) row[x] = fmha_ref_bf16_to_f32(knh[src + x]);
                fmha_ref_rotary(row, RD, cosv + (size_t)pos * HALF, sinv + (size_t)pos * HALF, 0);
                for (x = 0; x < D; x++) {
                    c.bad += !close_bf16(k1[dst + x], row[x]) || v1[dst + x] != vnh[src + x];
                    k0[dst + x] = k1[dst + x]; v0[dst + x] = v1[dst + x];
                }
            }
    c.bad += memcmp(k0, k1, nkv * 2) != 0 || memcmp(v0, v1, nkv * 2) != 0;   /* nothing else changed */
    for (b = 0; b < B; b++)                          /* q_rope: query i at position s_k - S + i */
        for (t = 0; t < S; t++)
            for (h = 0; h < H; h++) {
                const int pos = sk[b] - S + t;
                const size_t at = (((size_t)b * S + t) * H + h) * D;
                for (x = 0; x < D; x++) row[x] = fmha_ref_bf16_to_f32(qh[at + x]);
                fmha_ref_rotary(row, RD, cosv + (size_t)pos * HALF, sinv + (size_t)pos * HALF, 0);
                for (x = 0; x < D; x++) c.bad += !close_bf16(qr[at + x], row[x]);
            }

    /* the attention: reference on what the GPU wrote, one sequence at a time */
    for (e = 0; e < nkv; e++) { kf[e] = fmha_ref_bf16_to_f32(k1[e]); vf[e] = fmha_ref_bf16_to_f32(v1[e]); }
    for (e = 0; e < nq; e++) qf[e] = fmha_ref_bf16_to_f32(qr[e]);
    for (b = 0; b < B; b++) {
        fmha_ref_fwd r;
        memset(&r, 0, sizeof(r));
        r.batch = 1; r.nhead_q = H; r.nhead_k = HK; r.seqlen_q = S; r.seqlen_k = sk[b]; r.hdim_q = r.hdim_v = D;
        r.q = qf + (size_t)b * S * H * D;
        r.k = kf + (size_t)b * CAP * HK * D;
        r.v = vf + (size_t)b * CAP * HK * D;
        r.stride_q = r.stride_o = (int64_t)H * D; r.nhead_stride_q = r.nhead_stride_o = D;
        r.stride_k = r.stride_v = (int64_t)HK * D; r.nhead_stride_k = r.nhead_stride_v = D;
        r.nhead_stride_lse = S;
        r.scale = a.scale; r.mask_type = FMHA_REF_MASK_BOTTOM_RIGHT; r.window_left = -1; r.window_right = 0;
        fx_check_rows(&c, &r, oh + (size_t)b * S * H * D, 1, lseh + (size_t)b * H * S, 2e-3, 0);
    }
    return fx_report(&c, fx_tol(1), "bf16 append 1 token + half-split RoPE, then decode", plan.kernel->name);
}
