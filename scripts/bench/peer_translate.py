#!/usr/bin/env python3
"""PyTorch-Python peer for mtx's decoding benchmark.

Loads an mtx checkpoint's weights into torch.nn.Transformer (what a PyTorch tutorial user has) and
translates token ids with batched beam search the usual way: the whole target prefix is re-decoded
at every step (no cache). Batching (longest first, sentences x longest source <= --batch-tokens), length
limit (a * source_length + b), GNMT length normalisation and the stopping rule are mtx's, so the two
differ only in how a step is computed. Input: one line of space-separated source ids per sentence;
output: one line of generated ids per sentence (input order). Prints a JSON summary on stderr.
Run with Debian's python3-torch (the same LibTorch underneath as mtx).
"""
import argparse
import json
import math
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Peer(nn.Module):
    def __init__(self, params, buffers, cfg):
        super().__init__()
        m = cfg["model"]
        d, heads = m["d_model"], m["heads"]
        assert m["norm"] == "post" and m["share_embeddings"] and m["tie_output"] and m["positions"] == "sinusoidal"
        self.scale = math.sqrt(d)
        self.embed = nn.Embedding.from_pretrained(params["model.src_embed.weight"], freeze=True)
        self.register_buffer("pos", buffers["model.positions.table"])
        self.t = nn.Transformer(d_model=d, nhead=heads, num_encoder_layers=m["encoder_layers"],
                                num_decoder_layers=m["decoder_layers"], dim_feedforward=m["ffn_dim"], dropout=0.0,
                                activation=m["activation"], batch_first=True)
        self.t.encoder.norm = None  # post-norm: no final LayerNorms (mtx has none either)
        self.t.decoder.norm = None
        with torch.no_grad():
            for i, layer in enumerate(self.t.encoder.layers):
                p = lambda n: params[f"model.encoder.{i}.{n}"]
                layer.self_attn.in_proj_weight.copy_(p("self_attn.qkv.weight"))
                layer.self_attn.in_proj_bias.copy_(p("self_attn.qkv.bias"))
                layer.self_attn.out_proj.weight.copy_(p("self_attn.out.weight"))
                layer.self_attn.out_proj.bias.copy_(p("self_attn.out.bias"))
                self._ffn_norms(layer, p, 2)
            for i, layer in enumerate(self.t.decoder.layers):
                p = lambda n: params[f"model.decoder.{i}.{n}"]
                layer.self_attn.in_proj_weight.copy_(p("self_attn.qkv.weight"))
                layer.self_attn.in_proj_bias.copy_(p("self_attn.qkv.bias"))
                layer.self_attn.out_proj.weight.copy_(p("self_attn.out.weight"))
                layer.self_attn.out_proj.bias.copy_(p("self_attn.out.bias"))
                layer.multihead_attn.in_proj_weight.copy_(torch.cat([p("cross_attn.q.weight"), p("cross_attn.kv.weight")]))
                layer.multihead_attn.in_proj_bias.copy_(torch.cat([p("cross_attn.q.bias"), p("cross_attn.kv.bias")]))
                layer.multihead_attn.out_proj.weight.copy_(p("cross_attn.out.weight"))
                layer.multihead_attn.out_proj.bias.copy_(p("cross_attn.out.bias"))
                self._ffn_norms(layer, p, 3)

    @staticmethod
    def _ffn_norms(layer, p, norms):
        layer.linear1.weight.copy_(p("ffn.fc1.weight")); layer.linear1.bias.copy_(p("ffn.fc1.bias"))
        layer.linear2.weight.copy_(p("ffn.fc2.weight")); layer.linear2.bias.copy_(p("ffn.fc2.bias"))
        for k in range(1, norms + 1):
            getattr(layer, f"norm{k}").weight.copy_(p(f"norm{k}.weight"))
            getattr(layer, f"norm{k}").bias.copy_(p(f"norm{k}.bias"))

    def embed_pos(self, x):
        return self.embed(x) * self.scale + self.pos[: x.size(1)]

    def encode(self, src, src_pad):
        return self.t.encoder(self.embed_pos(src), src_key_padding_mask=src_pad)

    def next_logp(self, tgt, memory, src_pad):
        mask = self.t.generate_square_subsequent_mask(tgt.size(1))
        out = self.t.decoder(self.embed_pos(tgt), memory, tgt_mask=mask, memory_key_padding_mask=src_pad)
        return F.log_softmax(F.linear(out[:, -1], self.embed.weight), -1)


def lp(length, alpha):
    return ((5.0 + length) / 6.0) ** alpha if alpha else 1.0


@torch.no_grad()
def beam_search(model, srcs, beam, alpha, a, b, max_pos, bos, eos, pad):
    n = len(srcs)
    longest = max(len(s) for s in srcs) + 1
    src = torch.full((n, longest), pad, dtype=torch.long)
    for i, s in enumerate(srcs):
        src[i, : len(s)] = torch.tensor(s)
        src[i, len(s)] = eos
    limits = [min(max(1, int(math.floor(a * len(s) + b))), max_pos) for s in srcs]
    src_pad = src.eq(pad)
    memory = model.encode(src, src_pad)
    rows = torch.arange(n).repeat_interleave(beam)
    memory, src_pad = memory[rows], src_pad[rows]
    prefix = torch.full((n * beam, 1), bos, dtype=torch.long)
    scores = torch.full((n * beam,), -math.inf)
    scores[::beam] = 0
    active, finished = list(range(n)), [[] for _ in range(n)]
    t = 0
    while active:
        logp = model.next_logp(prefix, memory, src_pad)  # [rows, V] -- the whole prefix, every step
        V = logp.size(1)
        for j, s in enumerate(active):
            if t + 1 >= limits[s]:
                keep = logp[j * beam:(j + 1) * beam, eos].clone()
                logp[j * beam:(j + 1) * beam] = -math.inf
                logp[j * beam:(j + 1) * beam, eos] = keep
        cand = (scores.unsqueeze(1) + logp).view(len(active), beam * V)
        top_v, top_i = cand.topk(2 * beam, 1)
        keep_rows, next_tokens, next_scores, next_active = [], [], [], []
        for j, s in enumerate(active):
            chosen = []
            for c in range(2 * beam):
                sc = float(top_v[j, c])
                if sc == -math.inf or len(chosen) == beam:
                    break
                bm, tok = divmod(int(top_i[j, c]), V)
                if tok == eos:
                    if c < beam:
                        h = prefix[j * beam + bm, 1:].tolist()
                        finished[s].append((sc / lp(len(h) + 1, alpha), h))
                else:
                    chosen.append((j * beam + bm, tok, sc))
            if len(finished[s]) >= beam or not chosen:
                continue
            next_active.append(s)
            for k in range(beam):
                r, tok, sc = chosen[min(k, len(chosen) - 1)]
                keep_rows.append(r); next_tokens.append(tok); next_scores.append(sc if k < len(chosen) else -math.inf)
        if not next_active:
            break
        idx = torch.tensor(keep_rows)
        prefix = torch.cat([prefix[idx], torch.tensor(next_tokens).unsqueeze(1)], 1)
        scores = torch.tensor(next_scores)
        if len(next_active) != len(active):
            memory, src_pad = memory[idx], src_pad[idx]
        active = next_active
        t += 1
    return [max(f)[1] if f else [] for f in finished]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--ids", required=True, help="source ids, one sentence per line")
    ap.add_argument("--beam", type=int, default=5)
    ap.add_argument("--alpha", type=float, default=0.6)
    ap.add_argument("--batch-tokens", type=int, default=4096)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--latency", type=int, default=0, help="also time this many sentences one at a time")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    ckpt = torch.jit.load(args.ckpt)
    params = dict(ckpt.named_parameters())
    buffers = dict(ckpt.named_buffers())
    cfg = json.loads(bytes(buffers["mtx_config"].tolist()).decode())
    model = Peer(params, buffers, cfg).eval()
    dec, mlen = cfg["decode"], cfg["model"]["max_len"]
    pad, bos, eos = 0, 2, 3
    srcs = [[int(x) for x in line.split()][: mlen - 1] for line in open(args.ids)]
    order = sorted(range(len(srcs)), key=lambda i: -len(srcs[i]))
    out = [None] * len(srcs)
    start = time.perf_counter()
    i = 0
    while i < len(order):
        fit = max(1, args.batch_tokens // (len(srcs[order[i]]) + 1))
        batch = order[i:i + fit]
        for j, hyp in zip(batch, beam_search(model, [srcs[j] for j in batch], args.beam, args.alpha,
                                             dec["max_len_a"], dec["max_len_b"], mlen, bos, eos, pad)):
            out[j] = hyp
        i += fit
    seconds = time.perf_counter() - start
    for hyp in out:
        print(" ".join(map(str, hyp)))
    generated = sum(len(h) + 1 for h in out)
    summary = {"sentences": len(srcs), "seconds": seconds, "sentences_per_s": len(srcs) / seconds,
               "generated_tokens": generated, "tokens_per_s": generated / seconds}
    if args.latency:
        times = []
        for s in srcs[: args.latency]:
            t0 = time.perf_counter()
            beam_search(model, [s], args.beam, args.alpha, dec["max_len_a"], dec["max_len_b"], mlen, bos, eos, pad)
            times.append(time.perf_counter() - t0)
        times.sort()
        summary["latency_p50_ms"] = 1000 * times[len(times) // 2]
        summary["latency_p95_ms"] = 1000 * times[min(len(times) - 1, int(0.95 * len(times)))]
    print(json.dumps(summary), file=sys.stderr)


if __name__ == "__main__":
    main()
