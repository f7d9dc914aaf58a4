"""hf_llama: fmha_tile as a Hugging Face transformers attention backend.

A small randomly initialised Llama (no download: hidden 1024, 8 layers, 16
query heads, 4 KV heads, head dim 64, vocab 32000, bf16 on the GPU) is built
three times with the same weights: attn_implementation="sdpa" (the
reference), "eager" (a second opinion that sets the bf16 noise floor) and
"fmha_tile" (fmha_tile.hf.register()). Then:
  1. prefill of 4 x 1024 random token ids: the logits of fmha_tile and of
     eager against sdpa (max |diff|, rel-L2);
  2. greedy generation of 64 tokens with a KV cache (prefill + 63 decode
     steps, s_q = 1 against the growing cache) with sdpa and with fmha_tile:
     identical tokens counted, tokens/s for both;
  3. the decode steps checked directly: fmha_tile is fed sdpa's tokens
     (teacher forcing), so both see the same inputs, and each step's logits
     are compared (greedy runs may part ways at a near tie of two logits in
     bf16, which is not an error, so token identity is reported, not required).
valid:y when the prefill and decode logits are within max(3e-2, 3 x eager's
rel-L2) of sdpa's and every attention call was served by fmha_tile (no
fallback).

  PYTHONPATH=python FMHA_TILE_LIB=build/libfmha_tile.so python3 examples/python/hf_llama.py
  options: --layers N --batch B --seqlen S --new-tokens T
"""
import argparse
import time

from _common import setup, skip, main, rel_l2, Checker

NAME = "hf_llama"


def build(torch, transformers, impl, args, state=None):
    cfg = transformers.LlamaConfig(
        vocab_size=32000, hidden_size=args.hidden, intermediate_size=args.hidden * 11 // 4,
        num_hidden_layers=args.layers, num_attention_heads=args.heads,
        num_key_value_heads=args.kv_heads, max_position_embeddings=args.seqlen + args.new_tokens + 64)
    try:
        model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation=impl)
    except TypeError:   # transformers without the keyword
        cfg._attn_implementation = impl
        model = transformers.AutoModelForCausalLM.from_config(cfg)
    model = model.to(device="cuda", dtype=torch.bfloat16).eval()
    if state is not None:
        model.load_state_dict(state)
    return model


def greedy(torch, model, ids, n_new, forced=None):
    """Prefill ids, then n_new - 1 decode steps with the model's KV cache ->
    (tokens [b, n_new], per-step logits [b, n_new, vocab] fp32 of the last
    position, decode seconds). forced: tokens to feed instead of the argmax."""
    out = model(input_ids=ids, use_cache=True)
    cache = out.past_key_values
    step_logits = [out.logits[:, -1].float()]
    tok = step_logits[0].argmax(-1, keepdim=True)
    toks = [tok]
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for i in range(1, n_new):
        feed = forced[:, i - 1:i] if forced is not None else tok
        out = model(input_ids=feed, past_key_values=cache, use_cache=True)
        cache = out.past_key_values
        step_logits.append(out.logits[:, -1].float())
        tok = step_logits[-1].argmax(-1, keepdim=True)
        toks.append(tok)
    torch.cuda.synchronize()
    return torch.cat(toks, 1), torch.stack(step_logits, 1), time.perf_counter() - t0


def run():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--kv-heads", type=int, default=4)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seqlen", type=int, default=1024)
    ap.add_argument("--new-tokens", type=int, default=64)
    args = ap.parse_args()

    torch, fmha_tile = setup(NAME)
    try:
        import transformers
    except ImportError:
        skip(NAME, "transformers is not installed")
    import fmha_tile.hf as hf
    impl = hf.register(fallback="raise")
    print("%s: transformers %s, torch %s, %s" % (NAME, transformers.__version__, torch.__version__,
                                                torch.cuda.get_device_name()))

    torch.manual_seed(0)
    ref = build(torch, transformers, "sdpa", args)
    state = ref.state_dict()
    ours = build(torch, transformers, impl, args, state)
    eager = build(torch, transformers, "eager", args, state)
    ids = torch.randint(0, 32000, (args.batch, args.seqlen), device="cuda")
    c = Checker(NAME)

    with torch.inference_mode():
        # 1. prefill logits
        l_ref = ref(input_ids=ids).logits.float()
        l_ours = ours(input_ids=ids).logits.float()
        l_eager = eager(input_ids=ids).logits.float()
        floor = rel_l2(l_eager, l_ref)
        tol = max(3e-2, 3 * floor)
        print("%s: prefill %dx%d: max|ours - sdpa| %.3e, max|eager - sdpa| %.3e, rel-L2 eager %.2e"
              % (NAME, args.batch, args.seqlen, (l_ours - l_ref).abs().max().item(),
                 (l_eager - l_ref).abs().max().item(), floor))
        c.close("prefill logits vs sdpa", l_ours, l_ref, tol)
        same_arg = (l_ours.argmax(-1) == l_ref.argmax(-1)).float().mean().item()
        print("%s: prefill argmax agreement with sdpa %.4f" % (NAME, same_arg))
        del l_ref, l_ours, l_eager, eager
        torch.cuda.empty_cache()

        # 2. greedy generation, timed (one short warm-up run each first)
        greedy(torch, ref, ids[:, :64], 4)
        greedy(torch, ours, ids[:, :64], 4)
        n = args.new_tokens
        t_ref, lg_ref, s_ref = greedy(torch, ref, ids, n)
        hf.stats.update({"fmha_tile": 0, "decode": 0, "fallback": 0})
        t_ours, lg_ours, s_ours = greedy(torch, ours, ids, n)
        calls = dict(hf.stats)
        same = int((t_ours == t_ref).sum().item())
        steps = args.batch * (n - 1)
        print("%s: generated %d x %d tokens: %d identical to sdpa's (%.1f%%)"
              % (NAME, args.batch, n, same, 100.0 * same / t_ref.numel()))
        print("%s: decode tokens/s: fmha_tile %.1f, sdpa %.1f (%d steps of batch %d, %d-token "
              "prompt)" % (NAME, steps / s_ours, steps / s_ref, n - 1, args.batch, args.seqlen))
        print("%s: attention calls: %s" % (NAME, calls))
        c.true("every attention call served by fmha_tile", calls["fallback"] == 0 and
               calls["decode"] > 0 and calls["fmha_tile"] > 0, str(calls))

        # 3. decode steps with sdpa's tokens fed to fmha_tile
        _, lg_forced, _ = greedy(torch, ours, ids, n, forced=t_ref)
        c.close("decode-step logits vs sdpa (same tokens)", lg_forced, lg_ref, tol)
    c.finish()


if __name__ == "__main__":
    main(run)
