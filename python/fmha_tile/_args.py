"""Argument checks and fmha_fwd_args construction, without importing torch.

The functions here only use what a tensor exposes (shape, stride(), dtype,
device, is_cuda, data_ptr(), numel()), so the shape, stride, mask and error
logic can be tested with stand-in objects on a machine without PyTorch.
dtypes are recognised by name (str(torch.bfloat16) == "torch.bfloat16").

Conventions (FlashAttention's Python API where the meaning is the same):
  - causal is bottom-right aligned (FlashAttention >= 2.1): query i of a
    sequence with s_q queries and s_k keys sees key j when
    j <= i + s_k - s_q.
  - window=(left, right), -1 meaning unbounded, bottom-right aligned too: query
    i sees keys i + s_k - s_q - left .. i + s_k - s_q + right. causal=True
    sets right to 0.
  - softcap c > 0: scores become c * tanh(s / c); 0 turns it off.
  - alibi_slopes: fp32 [nheads] or [batch, nheads]; adds
    -slope * |i + s_k - s_q - j| to the scores.
  - scale: default 1 / sqrt(head dim).
  - FP8: q, k and v torch.float8_e4m3fn (head dim a multiple of 16, the
    Hopper pipeline only), output torch.bfloat16; q_descale, k_descale,
    v_descale: None (1), 1-element float32 tensors (per tensor) or
    [batch, nhead_k] float32 tensors (per batch entry and KV head; varlen:
    batch = sequences) on q's device, real = stored * descale.
  - dropout_p in [0, 1) drops elements of P (16-bit inputs only); the
    Philox seed and offset are set later (Problem.set_dropout_rng, from
    torch's generator: fmha_tile._dropout).
"""
import math
import operator

from . import _lib

INT32_MAX = 2 ** 31 - 1

FP8 = "torch.float8_e4m3fn"
BF16 = "torch.bfloat16"
DTYPES = {
    "torch.float16": _lib.FMHA_DTYPE_FP16,
    BF16: _lib.FMHA_DTYPE_BF16,
    FP8: _lib.FMHA_DTYPE_FP8,
}
FLOAT32 = "torch.float32"
BIAS_DTYPES = {
    "torch.float16": _lib.FMHA_DTYPE_FP16,
    BF16: _lib.FMHA_DTYPE_BF16,
    FLOAT32: _lib.FMHA_DTYPE_FP32,
}
INT32 = "torch.int32"
INT64 = "torch.int64"
U64_MASK = 2 ** 64 - 1

# A non-NULL, 256-byte aligned placeholder for the data pointer of an empty
# tensor, passed only to fmha_fwd_check (which validates and selects but never
# dereferences); fmha_fwd is never called with it.
PLACEHOLDER_PTR = 256


def _is_tensor(x):
    return all(hasattr(x, a) for a in ("shape", "stride", "dtype", "device", "data_ptr"))


def check_tensor(name, t, ndim, what):
    """Tensor of `ndim` dims on a CUDA device with a unit last-dim stride."""
    if not _is_tensor(t):
        raise TypeError("%s must be a torch.Tensor, got %s" % (name, type(t).__name__))
    if len(t.shape) != ndim:
        raise ValueError("%s must have %d dimensions %s, got shape %s"
                         % (name, ndim, what, tuple(t.shape)))
    if not getattr(t, "is_cuda", False):
        raise ValueError("%s must be on a CUDA device, got %s" % (name, t.device))
    if t.shape[-1] > 1 and t.stride(-1) != 1:
        raise ValueError("%s must have a unit stride in its last (head) dimension, got strides %s "
                         "(call .contiguous())" % (name, tuple(t.stride())))


def check_same_device(q, named):
    for name, t in named:
        if t.device != q.device:
            raise ValueError("%s is on %s but q is on %s: all tensors must be on one device"
                             % (name, t.device, q.device))


def dtype_code(q, k, v):
    code = DTYPES.get(str(q.dtype))
    if code is None:
        raise TypeError("q must be torch.float16 or torch.bfloat16 (or torch.float8_e4m3fn for the "
                        "fp8 forward), got %s" % q.dtype)
    for name, t in (("k", k), ("v", v)):
        if t.dtype != q.dtype:
            raise TypeError("%s has dtype %s but q has %s: q, k and v must share one dtype"
                            % (name, t.dtype, q.dtype))
    return code


def strides(t):
    """Element strides, with 0 for dimensions of size 1 (their stride is
    meaningless, and PyTorch may give them any value)."""
    return tuple(0 if n == 1 else s for n, s in zip(t.shape, t.stride()))


def check_no_overlap(name, t):
    """Outputs must not be expanded views (stride 0 on a dimension of size > 1):
    several results would land on one element. (Inputs may be: an expanded
    K/V head dimension reads one head for all.)"""
    for n, s in zip(t.shape, t.stride()):
        if n > 1 and s == 0:
            raise ValueError("%s has a stride of 0 on a dimension of size %d (an expanded view): "
                             "outputs must not overlap" % (name, n))


def check_int(name, x, lo=0, hi=INT32_MAX):
    if isinstance(x, bool):
        raise TypeError("%s must be an int, got bool" % name)
    try:
        x = operator.index(x)
    except TypeError:
        raise TypeError("%s must be an int, got %s" % (name, type(x).__name__)) from None
    if x < lo or x > hi:
        raise ValueError("%s must be in %d..%d, got %d" % (name, lo, hi, x))
    return x


def check_size(name, n):
    if n > INT32_MAX:
        raise ValueError("%s is %d: the library takes sizes below 2^31" % (name, n))
    return int(n)


def mask_from_flash(causal, window):
    """(causal, window) with FlashAttention's meaning -> (mask_type, left, right)."""
    if not isinstance(causal, bool):
        if causal in (0, 1):
            causal = bool(causal)
        else:
            raise TypeError("causal must be a bool, got %r" % (causal,))
    if window is None:
        window = (-1, -1)
    try:
        left, right = window
    except (TypeError, ValueError):
        raise ValueError("window must be a pair (left, right), got %r" % (window,)) from None
    left = check_int("window[0]", left, -1)
    right = check_int("window[1]", right, -1)
    if causal:
        right = 0
    if left < 0 and right < 0:
        return _lib.FMHA_MASK_NONE, -1, -1
    return _lib.FMHA_MASK_BOTTOM_RIGHT, left, right


def check_scalar(name, x, allow_zero):
    try:
        x = float(x)
    except (TypeError, ValueError):
        raise TypeError("%s must be a float, got %s" % (name, type(x).__name__)) from None
    if not math.isfinite(x) or x < 0 or (x == 0 and not allow_zero):
        raise ValueError("%s must be finite and %s 0, got %r"
                         % (name, ">=" if allow_zero else ">", x))
    return x


def check_dropout(dropout_p, fp8):
    """dropout_p: a number in [0, 1) (the drop probability of each element of
    P, taken in 256ths by the kernels); 16-bit inputs only."""
    if isinstance(dropout_p, (bool, str, bytes)):
        raise TypeError("dropout_p must be a float, got %s" % type(dropout_p).__name__)
    try:
        p = float(dropout_p)
    except (TypeError, ValueError):
        raise TypeError("dropout_p must be a float, got %s" % type(dropout_p).__name__) from None
    if not (0.0 <= p < 1.0):   # NaN fails too
        raise ValueError("dropout_p must be in [0, 1), got %r" % (dropout_p,))
    if p > 0 and fp8:
        raise ValueError("dropout_p=%r: dropout is not supported with fp8 inputs (the fp8 forward "
                         "is inference only); pass dropout_p=0.0" % (dropout_p,))
    return p


def check_u64(name, x):
    """An int taken modulo 2^64 (a seed or an offset; negative int64 values,
    as a torch int64 schema carries them, keep their bit pattern)."""
    if isinstance(x, bool):
        raise TypeError("%s must be an int, got bool" % name)
    try:
        x = operator.index(x)
    except TypeError:
        raise TypeError("%s must be an int, got %s" % (name, type(x).__name__)) from None
    if x < -(2 ** 63) or x > U64_MASK:
        raise ValueError("%s must fit in 64 bits, got %d" % (name, x))
    return x & U64_MASK


def check_alibi(alibi_slopes, q, batch, nhead):
    """-> (pointer or None, batch stride)."""
    if alibi_slopes is None:
        return None, 0
    t = alibi_slopes
    if not _is_tensor(t):
        raise TypeError("alibi_slopes must be a torch.Tensor or None, got %s" % type(t).__name__)
    if str(t.dtype) != FLOAT32:
        raise TypeError("alibi_slopes must be torch.float32, got %s" % t.dtype)
    shape = tuple(t.shape)
    if shape != (nhead,) and shape != (batch, nhead):
        raise ValueError("alibi_slopes must have shape (%d,) or (%d, %d), got %s"
                         % (nhead, batch, nhead, shape))
    if not getattr(t, "is_cuda", False):
        raise ValueError("alibi_slopes must be on a CUDA device, got %s" % t.device)
    check_same_device(q, (("alibi_slopes", t),))
    if nhead > 1 and t.stride(-1) != 1:
        raise ValueError("alibi_slopes must have a unit stride in its head dimension")
    return t.data_ptr(), (strides(t)[0] if len(shape) == 2 else 0)


def _numel(t):
    n = 1
    for x in t.shape:
        n *= x
    return n


def check_descales(q, fp8, named, batch, nhead_k):
    """FP8 descales: each of named ((name, value), ...) None (1), a
    1-element float32 tensor (per tensor) or a [batch, nhead_k] float32
    tensor (per batch entry and KV head, as FlashAttention-3's) on q's
    device; any only with fp8 inputs. The given ones are all of one kind,
    the per-head ones with the same strides (the C API takes one pair).
    -> (their pointers (None for None), batch stride, head stride)."""
    ptrs, kind, strides = [], None, (0, 0)
    for name, t in named:
        if t is None:
            ptrs.append(None)
            continue
        if not fp8:
            raise ValueError("%s needs fp8 inputs (q, k and v torch.float8_e4m3fn), got %s"
                             % (name, q.dtype))
        if not _is_tensor(t):
            raise TypeError("%s must be a 1-element torch.float32 tensor (per tensor) or a [batch, nhead_k] "
                            "one on q's device, or None, got %s" % (name, type(t).__name__))
        if str(t.dtype) != FLOAT32:
            raise TypeError("%s must be torch.float32, got %s" % (name, t.dtype))
        if _numel(t) == 1 and len(t.shape) <= 1:
            k, st = "per tensor", (0, 0)
        elif len(t.shape) == 2 and tuple(t.shape) == (batch, nhead_k):
            k = "per (batch, KV head)"
            st = (t.stride(0) if batch > 1 else 0, t.stride(1) if nhead_k > 1 else 0)
            if st[0] < 0 or st[1] < 0:
                raise ValueError("%s must not have negative strides, got %s" % (name, tuple(t.stride())))
        else:
            raise ValueError("%s must have one element (a per-tensor descale) or shape [batch, nhead_k] "
                             "= [%d, %d], got shape %s" % (name, batch, nhead_k, tuple(t.shape)))
        if kind is not None and (k != kind or st != strides):
            raise ValueError("the descales must be all per tensor or all [batch, nhead_k] with the same "
                             "strides: %s is %s with strides %s, an earlier one %s with %s"
                             % (name, k, st, kind, strides))
        kind, strides = k, st
        if not getattr(t, "is_cuda", False):
            raise ValueError("%s must be on the CUDA device of q (%s), got %s" % (name, q.device, t.device))
        check_same_device(q, ((name, t),))
        ptrs.append(t.data_ptr())
    return ptrs, strides[0], strides[1]


class Problem(object):
    """A checked forward problem: sizes, the output shapes, and a filled
    FmhaFwdArgs (outputs set later with set_outputs)."""

    def __init__(self):
        self.args = _lib.FmhaFwdArgs()
        self.out_shape = None
        self.lse_shape = None
        self.empty_q = False      # no query rows: nothing to launch
        self.empty_k = False      # no keys anywhere: O = 0, LSE = -inf
        self.max_seqlen_k = None  # group mode: the caller's bound (the backward sizes by it)
        self.fp8 = False          # e4m3 q, k, v: a bf16 output
        self.sinks = None         # the sinks tensor (fp32 [h]) or None
        self.dropout_rng = None   # the device {seed, offset} tensor args.dropout_rng points to
        self.bias = None          # the elementwise bias tensor (set_bias) or None
        self.bias_shape = None    # its shape as the library reads it (4-D batch, 3-D varlen)
        self.bias_bcast = 0       # FMHA_BIAS_BCAST_* bits: the dims dbias sums over

    @property
    def dropout(self):
        """True when the problem drops elements of P (dropout_p > 0)."""
        return self.args.dropout_p > 0

    def set_dropout_rng(self, seed, offset, rng=None):
        """The Philox seed and offset of a dropout problem: two integers
        (taken modulo 2^64: a negative int64 is read as its bit pattern), or
        rng, a device tensor of two int64 {seed, offset} (8-byte aligned; then
        the kernels read it when they run and seed/offset are ignored)."""
        a = self.args
        a.dropout_seed = check_u64("dropout seed", seed)
        a.dropout_offset = check_u64("dropout offset", offset)
        if rng is None:
            a.dropout_rng = None
            self.dropout_rng = None
            return
        if not _is_tensor(rng):
            raise TypeError("the dropout rng state must be a torch.Tensor or None, got %s"
                            % type(rng).__name__)
        if str(rng.dtype) not in (INT64, "torch.uint64") or _numel(rng) != 2:
            raise ValueError("the dropout rng state must be 2 int64 {seed, offset}, got %s %s"
                             % (rng.dtype, tuple(rng.shape)))
        if not getattr(rng, "is_cuda", False):
            raise ValueError("the dropout rng state must be on a CUDA device, got %s" % rng.device)
        if len(rng.shape) == 1 and rng.stride(0) != 1:
            raise ValueError("the dropout rng state must be contiguous")
        if rng.data_ptr() % 8:
            raise ValueError("the dropout rng state must be 8-byte aligned")
        a.dropout_rng = rng.data_ptr()
        self.dropout_rng = rng

    def out_dtype(self, torch, q):
        """The output's torch dtype: q's, bf16 for the fp8 forward."""
        return torch.bfloat16 if self.fp8 else q.dtype

    # outputs -----------------------------------------------------------------------
    def check_out(self, out, q):
        if out is None:
            return
        check_tensor("out", out, len(self.out_shape), "")
        if tuple(out.shape) != self.out_shape:
            raise ValueError("out must have shape %s, got %s" % (self.out_shape, tuple(out.shape)))
        if self.fp8:
            if str(out.dtype) != BF16:
                raise TypeError("out must be torch.bfloat16 (the fp8 forward writes bf16), got %s"
                                % out.dtype)
        elif out.dtype != q.dtype:
            raise TypeError("out must have the dtype of q (%s), got %s" % (q.dtype, out.dtype))
        check_same_device(q, (("out", out),))
        check_no_overlap("out", out)

    def check_lse(self, lse, q):
        if lse is None:
            return
        if not _is_tensor(lse):
            raise TypeError("out_lse must be a torch.Tensor, got %s" % type(lse).__name__)
        if str(lse.dtype) != FLOAT32:
            raise TypeError("out_lse must be torch.float32, got %s" % lse.dtype)
        if tuple(lse.shape) != self.lse_shape:
            raise ValueError("out_lse must have shape %s, got %s" % (self.lse_shape, tuple(lse.shape)))
        if not getattr(lse, "is_cuda", False):
            raise ValueError("out_lse must be on a CUDA device, got %s" % lse.device)
        check_same_device(q, (("out_lse", lse),))
        if lse.shape[-1] > 1 and lse.stride(-1) != 1:
            raise ValueError("out_lse must have a unit stride in its last (query) dimension")
        check_no_overlap("out_lse", lse)

    def set_outputs(self, o, lse):
        a = self.args
        so = strides(o)
        a.o = o.data_ptr() or None
        if len(so) == 4:   # [b, s, h, d]
            a.batch_stride_o, a.stride_o, a.nhead_stride_o = so[0], so[1], so[2]
        else:              # [total, h, d]
            a.batch_stride_o, a.stride_o, a.nhead_stride_o = 0, so[0], so[1]
        if lse is not None:
            sl = strides(lse)
            a.lse = lse.data_ptr() or None
            if len(sl) == 3:   # [b, h, s]
                a.batch_stride_lse, a.nhead_stride_lse = sl[0], sl[1]
            else:              # [h, total]
                a.batch_stride_lse, a.nhead_stride_lse = 0, sl[0]
        else:
            a.lse = None
            a.batch_stride_lse = a.nhead_stride_lse = 0

    def check_args(self):
        """A copy of the arguments fit for fmha_fwd_check: NULL data pointers
        of empty tensors replaced by a placeholder (never dereferenced)."""
        c = _lib.FmhaFwdArgs.from_buffer_copy(self.args)
        for f in ("q", "k", "v", "o"):
            if not getattr(c, f):
                setattr(c, f, PLACEHOLDER_PTR)
        return c


def check_sinks(sinks, q, nhead):
    """Attention sinks: None, or fp32 [nhead] on q's device with a unit stride.
    -> the device pointer (None)."""
    if sinks is None:
        return None
    if not _is_tensor(sinks):
        raise TypeError("sinks must be a torch.Tensor or None, got %s" % type(sinks).__name__)
    if str(sinks.dtype) != FLOAT32:
        raise TypeError("sinks must be torch.float32, got %s" % sinks.dtype)
    if tuple(sinks.shape) != (nhead,):
        raise ValueError("sinks must have shape (%d,) (one logit per query head), got %s"
                         % (nhead, tuple(sinks.shape)))
    if not getattr(sinks, "is_cuda", False):
        raise ValueError("sinks must be on a CUDA device, got %s" % sinks.device)
    check_same_device(q, (("sinks", sinks),))
    if nhead > 1 and sinks.stride(0) != 1:
        raise ValueError("sinks must be contiguous")
    return sinks.data_ptr()


def _common(p, q, k, v, causal, window, softcap, alibi_slopes, scale, batch, nhead_q, descales,
            sinks=None, dropout_p=0.0, v_kmajor=False):
    a = p.args
    a.dtype = dtype_code(q, k, v)
    p.fp8 = a.dtype == _lib.FMHA_DTYPE_FP8
    if v_kmajor and not p.fp8:
        raise ValueError("v_kmajor=True needs fp8 inputs (q, k and v torch.float8_e4m3fn), got %s" % q.dtype)
    a.dropout_p = check_dropout(dropout_p, p.fp8)
    (a.q_descale, a.k_descale, a.v_descale), a.descale_batch_stride, a.descale_head_stride = check_descales(
        q, p.fp8, zip(("q_descale", "k_descale", "v_descale"), descales), batch, k.shape[-2])
    a.hdim_q = check_size("head dim of q", q.shape[-1])
    a.hdim_v = check_size("head dim of v", v.shape[-2] if v_kmajor else v.shape[-1])
    if k.shape[-1] != q.shape[-1]:
        raise ValueError("k has head dim %d but q has %d: they must be equal"
                         % (k.shape[-1], q.shape[-1]))
    a.mask_type, a.window_left, a.window_right = mask_from_flash(causal, window)
    a.logits_soft_cap = check_scalar("softcap", softcap, True)
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1]) if q.shape[-1] > 0 else 1.0
    a.scale = check_scalar("scale", scale, False)
    a.alibi_slopes, a.alibi_batch_stride = check_alibi(alibi_slopes, q, batch, nhead_q)
    a.sinks = check_sinks(sinks, q, nhead_q)
    p.sinks = sinks


def _heads(hq, hk):
    if hq < 1 or hk < 1:
        raise ValueError("q and k need at least one head (got %d and %d)" % (hq, hk))
    if hq % hk != 0:
        raise ValueError("GQA/MQA: the number of query heads (%d) must be a multiple of the "
                         "number of KV heads (%d)" % (hq, hk))


def v_kmajor_keys(s_k):
    """The keys of a V^T row (fmha_fp8_v_kmajor_keys): s_k rounded up to 16."""
    return (s_k + 15) // 16 * 16


def batch_problem(q, k, v, causal=False, window=(-1, -1), softcap=0.0, alibi_slopes=None,
                  scale=None, q_descale=None, k_descale=None, v_descale=None, sinks=None,
                  dropout_p=0.0, v_kmajor=False):
    """Checks of attention(); q [b, s_q, h, d], k/v [b, s_k, h_k, d]; with
    v_kmajor, v is V^T [b, h_k, d_v, keys] (fp8_v_kmajor's layout)."""
    what = "[batch, seqlen, nheads, headdim]"
    v_kmajor = bool(v_kmajor)
    check_tensor("q", q, 4, what)
    check_tensor("k", k, 4, what)
    check_tensor("v", v, 4, "[batch, nheads_k, headdim, keys] (v_kmajor)" if v_kmajor else what)
    check_same_device(q, (("k", k), ("v", v)))
    b, s_q, hq, _ = q.shape
    bk, s_k, hk, _ = k.shape
    if bk != b or v.shape[0] != b:
        raise ValueError("batch sizes differ: q %d, k %d, v %d" % (b, bk, v.shape[0]))
    if v_kmajor:
        if v.shape[1] != hk or v.shape[3] < v_kmajor_keys(s_k):
            raise ValueError("v_kmajor: v must be V^T [batch, nheads_k, headdim, keys] with keys >= %d "
                             "(seqlen of k rounded up to 16; fmha_tile.fp8_v_kmajor writes it): k %s, v %s"
                             % (v_kmajor_keys(s_k), tuple(k.shape), tuple(v.shape)))
    elif v.shape[1] != s_k or v.shape[2] != hk:
        raise ValueError("k and v must have the same seqlen and heads: k %s, v %s"
                         % (tuple(k.shape), tuple(v.shape)))
    _heads(hq, hk)
    p = Problem()
    a = p.args
    a.is_group_mode = 0
    a.batch = check_size("batch", b)
    a.nhead_q = check_size("nheads of q", hq)
    a.nhead_k = check_size("nheads of k", hk)
    a.seqlen_q = check_size("seqlen of q", s_q)
    a.seqlen_k = check_size("seqlen of k", s_k)
    a.max_seqlen_q = a.seqlen_q
    _common(p, q, k, v, causal, window, softcap, alibi_slopes, scale, b, hq,
            (q_descale, k_descale, v_descale), sinks, dropout_p, v_kmajor)
    for name, t in (("q", q), ("k", k), ("v", v)):
        s = strides(t)
        if name == "v" and v_kmajor:
            # V^T [b, h_k, d, keys]: stride_v between d rows, heads nhead_stride_v apart;
            # one of no keys is never read (PyTorch's strides of it may be odd)
            s = (0, 0, 0) if _numel(t) == 0 else (s[0], s[2], s[1])
        setattr(a, name, t.data_ptr() or None)
        setattr(a, "batch_stride_" + name, s[0])
        setattr(a, "stride_" + name, s[1])
        setattr(a, "nhead_stride_" + name, s[2])
    a.v_kmajor = int(v_kmajor)
    p.out_shape = (b, s_q, hq, a.hdim_v)
    p.lse_shape = (b, hq, s_q)
    p.empty_q = b == 0 or s_q == 0
    p.empty_k = s_k == 0
    return p


def varlen_problem(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                   causal=False, window=(-1, -1), softcap=0.0, alibi_slopes=None, scale=None,
                   q_descale=None, k_descale=None, v_descale=None, sinks=None, dropout_p=0.0):
    """Checks of attention_varlen(); q [total_q, h, d], k/v [total_k, h_k, d],
    cu_seqlens_* int32 [batch + 1] on the device (never read on the host)."""
    what = "[total_tokens, nheads, headdim]"
    check_tensor("q", q, 3, what)
    check_tensor("k", k, 3, what)
    check_tensor("v", v, 3, what)
    check_same_device(q, (("k", k), ("v", v)))
    for name, t in (("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k)):
        if not _is_tensor(t):
            raise TypeError("%s must be a torch.Tensor, got %s" % (name, type(t).__name__))
        if str(t.dtype) != INT32:
            raise TypeError("%s must be torch.int32, got %s" % (name, t.dtype))
        if len(t.shape) != 1 or t.shape[0] < 1:
            raise ValueError("%s must be 1-D with batch + 1 >= 1 entries, got shape %s"
                             % (name, tuple(t.shape)))
        if not getattr(t, "is_cuda", False):
            raise ValueError("%s must be on the CUDA device of q (%s), got %s"
                             % (name, q.device, t.device))
        check_same_device(q, ((name, t),))
        if t.shape[0] > 1 and t.stride(0) != 1:
            raise ValueError("%s must be contiguous" % name)
    if cu_seqlens_k.shape[0] != cu_seqlens_q.shape[0]:
        raise ValueError("cu_seqlens_q has %d entries but cu_seqlens_k has %d"
                         % (cu_seqlens_q.shape[0], cu_seqlens_k.shape[0]))
    total_q, hq, _ = q.shape
    total_k, hk, _ = k.shape
    if v.shape[0] != total_k or v.shape[1] != hk:
        raise ValueError("k and v must have the same total tokens and heads: k %s, v %s"
                         % (tuple(k.shape), tuple(v.shape)))
    _heads(hq, hk)
    batch = cu_seqlens_q.shape[0] - 1
    p = Problem()
    a = p.args
    a.is_group_mode = 1
    a.batch = check_size("batch", batch)
    a.nhead_q = check_size("nheads of q", hq)
    a.nhead_k = check_size("nheads of k", hk)
    check_size("total tokens of q", total_q)
    check_size("total tokens of k", total_k)
    a.max_seqlen_q = check_int("max_seqlen_q", max_seqlen_q)
    max_seqlen_k = check_int("max_seqlen_k", max_seqlen_k)
    a.seqlen_q = a.max_seqlen_q      # ignored in group mode
    a.seqlen_k = max_seqlen_k        # ignored in group mode
    p.max_seqlen_k = max_seqlen_k
    a.seqstart_q = cu_seqlens_q.data_ptr()
    a.seqstart_k = cu_seqlens_k.data_ptr()
    _common(p, q, k, v, causal, window, softcap, alibi_slopes, scale, batch, hq,
            (q_descale, k_descale, v_descale), sinks, dropout_p)
    for name, t in (("q", q), ("k", k), ("v", v)):
        s = strides(t)
        setattr(a, name, t.data_ptr() or None)
        setattr(a, "batch_stride_" + name, 0)
        setattr(a, "stride_" + name, s[0])
        setattr(a, "nhead_stride_" + name, s[1])
    p.out_shape = (total_q, hq, v.shape[-1])
    p.lse_shape = (hq, total_q)
    p.empty_q = total_q == 0 or batch == 0 or a.max_seqlen_q == 0
    p.empty_k = total_k == 0
    return p


def set_bias(p, bias, q):
    """The elementwise bias of problem p (None: none): added to the scaled,
    soft-capped scores before the mask, a -inf element hiding its key.
    Batch mode [b or 1, h or 1, s_q, s_k] (missing leading dims read as 1,
    so [s_q, s_k] and [h, s_q, s_k] work too); varlen [h or 1, total_q,
    cols] or [total_q, cols], cols >= max_seqlen_k (row cu_seqlens_q[i] + r
    is query r of sequence i, column j its key j). fp16, bf16 or fp32 on q's
    device, unit stride in the last dim; a dim of size 1 broadcasts."""
    a = p.args
    if bias is None:
        return
    if not _is_tensor(bias):
        raise TypeError("bias must be a torch.Tensor or None, got %s" % type(bias).__name__)
    code = BIAS_DTYPES.get(str(bias.dtype))
    if code is None:
        raise TypeError("bias must be torch.float16, torch.bfloat16 or torch.float32, got %s" % bias.dtype)
    if p.fp8:
        raise ValueError("bias is not supported with fp8 inputs")
    if a.alibi_slopes:
        raise ValueError("bias and alibi_slopes together are not supported (one bias column)")
    if not getattr(bias, "is_cuda", False):
        raise ValueError("bias must be on a CUDA device, got %s" % bias.device)
    check_same_device(q, (("bias", bias),))
    shape, st = tuple(bias.shape), strides(bias)
    group = bool(a.is_group_mode)
    nd = 3 if group else 4
    if not 2 <= len(shape) <= nd:
        raise ValueError("bias must have 2 to %d dims (%s), got shape %s"
                         % (nd, "[h or 1, total_q, cols]" if group else "[b or 1, h or 1, s_q, s_k]", shape))
    shape = (1,) * (nd - len(shape)) + shape
    st = (0,) * (nd - len(st)) + tuple(st)
    if group:
        want = "[%d or 1, %d, >= %d]" % (a.nhead_q, q.shape[0], p.max_seqlen_k)
        ok = shape[0] in (1, a.nhead_q) and shape[1] == q.shape[0] and shape[2] >= p.max_seqlen_k
    else:
        want = "[%d or 1, %d or 1, %d, %d]" % (a.batch, a.nhead_q, a.seqlen_q, a.seqlen_k)
        ok = (shape[0] in (1, a.batch) and shape[1] in (1, a.nhead_q) and shape[2] == a.seqlen_q
              and shape[3] == a.seqlen_k)
    if not ok:
        raise ValueError("bias must have shape %s (leading dims may be missing), got %s"
                         % (want, tuple(bias.shape)))
    if shape[-1] > 1 and st[-1] != 1:
        raise ValueError("bias must have a unit stride in its last dim")
    # a dim of size 1 broadcasts: stride 0
    st = tuple(0 if n == 1 else x for n, x in zip(shape, st))
    a.bias, a.bias_dtype = bias.data_ptr() or PLACEHOLDER_PTR, code
    if group:
        a.nhead_stride_bias, a.stride_bias, a.batch_stride_bias = st[0], st[1], 0
        p.bias_bcast = _lib.FMHA_BIAS_BCAST_HEAD if shape[0] == 1 and a.nhead_q > 1 else 0
    else:
        a.batch_stride_bias, a.nhead_stride_bias, a.stride_bias = st[0], st[1], st[2]
        p.bias_bcast = ((_lib.FMHA_BIAS_BCAST_BATCH if shape[0] == 1 and a.batch > 1 else 0)
                        | (_lib.FMHA_BIAS_BCAST_HEAD if shape[1] == 1 and a.nhead_q > 1 else 0))
    p.bias, p.bias_shape = bias, shape
