#!/usr/bin/env python3
"""PyTorch-Python peer for mtx's training benchmark.

Trains torch.nn.Transformer -- what a PyTorch tutorial user writes -- on exactly the batches that
`mtx prepare --export-batches` wrote, with the same model size, Adam/Noam, label smoothing and
clipping, and prints one JSON line: updates, target tokens, seconds, tokens/s, peak RSS (and, on CUDA, the
peak memory PyTorch's allocator held). On the CPU run it with Debian's python3-torch (the same LibTorch
underneath as mtx); on a GPU (--device cuda, --bf16 for bf16 autocast as mtx's train.bf16) with the card's torch.
"""
import argparse
import json
import math
import resource
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def read_batches(path):
    data = np.fromfile(path, dtype="<i4")
    magic, count, pad, bos, eos = (int(x) for x in data[:5])
    assert magic == 0x6D747862, "not an mtx batch file"
    pos, batches = 5, []
    for _ in range(count):
        rows, src_len, tgt_len = (int(x) for x in data[pos:pos + 3])
        pos += 3
        parts = []
        for length in (src_len, tgt_len, tgt_len):
            parts.append(torch.from_numpy(data[pos:pos + rows * length].reshape(rows, length).astype(np.int64)))
            pos += rows * length
        batches.append(tuple(parts))
    return batches, pad


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, dropout, max_len=512):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        position = torch.arange(max_len).unsqueeze(1)
        div = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, d_model)
        pe[:, 0::2] = torch.sin(position * div)
        pe[:, 1::2] = torch.cos(position * div)
        self.register_buffer("pe", pe)

    def forward(self, x):
        return self.dropout(x + self.pe[: x.size(1)])


class Seq2SeqTransformer(nn.Module):
    def __init__(self, vocab, m, pad):
        super().__init__()
        self.pad, self.scale = pad, math.sqrt(m["d_model"])
        self.embed = nn.Embedding(vocab, m["d_model"], padding_idx=pad)  # shared source/target, tied output
        self.pos = PositionalEncoding(m["d_model"], m["dropout"])
        self.transformer = nn.Transformer(
            d_model=m["d_model"], nhead=m["heads"], num_encoder_layers=m["encoder_layers"],
            num_decoder_layers=m["decoder_layers"], dim_feedforward=m["ffn_dim"], dropout=m["dropout"],
            batch_first=True, norm_first=m.get("norm", "post") == "pre")
        # nn.Transformer uses one dropout everywhere; match mtx's separate attention/activation dropout
        # so both sides compute the same model.
        for layer in list(self.transformer.encoder.layers) + list(self.transformer.decoder.layers):
            for attn in (getattr(layer, "self_attn", None), getattr(layer, "multihead_attn", None)):
                if attn is not None:
                    attn.dropout = m.get("attention_dropout", m["dropout"])
            layer.dropout.p = m.get("activation_dropout", m["dropout"])
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    def forward(self, src, tgt_in):
        src_pad, tgt_pad = src.eq(self.pad), tgt_in.eq(self.pad)
        tgt_mask = self.transformer.generate_square_subsequent_mask(tgt_in.size(1)).to(tgt_in.device)
        out = self.transformer(self.pos(self.embed(src) * self.scale), self.pos(self.embed(tgt_in) * self.scale),
                               tgt_mask=tgt_mask, src_key_padding_mask=src_pad, tgt_key_padding_mask=tgt_pad,
                               memory_key_padding_mask=src_pad)
        return F.linear(out, self.embed.weight)


def train_update(model, opt, loss_fn, src, tgt_in, tgt_out, bf16, clip_norm):
    """One update: forward (bf16 autocast if asked) and loss, backward, clipping, the optimizer's step."""
    with torch.autocast(src.device.type, dtype=torch.bfloat16, enabled=bf16):
        logits = model(src, tgt_in)
        loss = loss_fn(logits.reshape(-1, logits.size(-1)), tgt_out.reshape(-1))
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
    opt.step()
    return loss


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", required=True)
    ap.add_argument("--config", required=True, help="resolved mtx config (JSON)")
    ap.add_argument("--vocab", type=int, required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--skip", type=int, default=10, help="updates left out of the timing (warm-up)")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--bf16", action="store_true", help="CUDA: bf16 autocast for the forward pass and the loss")
    ap.add_argument("--cudnn-attention", action="store_true",
                    help="keep cuDNN's attention backend, which builds a graph per new shape (mtx turns it off; "
                         "so does this peer unless asked: torch.backends.cuda.enable_cudnn_sdp(False))")
    args = ap.parse_args()
    if not args.cudnn_attention and hasattr(torch.backends.cuda, "enable_cudnn_sdp"):
        torch.backends.cuda.enable_cudnn_sdp(False)
    device = torch.device(args.device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    cfg = json.load(open(args.config))
    m, t = cfg["model"], cfg["train"]
    batches, pad = read_batches(args.batches)
    model = Seq2SeqTransformer(args.vocab, m, pad).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1.0, betas=(t["adam_beta1"], t["adam_beta2"]), eps=t["adam_eps"])
    warmup, factor, d = t["warmup_steps"], t["lr_factor"], m["d_model"]
    noam = lambda s: factor * d ** -0.5 * min((s + 1) ** -0.5, (s + 1) * warmup ** -1.5)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, noam)
    loss_fn = nn.CrossEntropyLoss(ignore_index=pad, label_smoothing=t["label_smoothing"])
    model.train()
    tokens, start = 0, time.perf_counter()
    for i, (src, tgt_in, tgt_out) in enumerate(batches):
        if i == args.skip:
            sync()
            tokens, start = 0, time.perf_counter()
        tokens += int(tgt_out.ne(pad).sum())  # counted on the host: no device sync per update
        src, tgt_in, tgt_out = (x.to(device, non_blocking=True) for x in (src, tgt_in, tgt_out))
        loss = train_update(model, opt, loss_fn, src, tgt_in, tgt_out, args.bf16, t["clip_norm"])
        sched.step()
    sync()
    seconds = time.perf_counter() - start
    print(json.dumps({"updates": len(batches) - args.skip, "tgt_tokens": tokens, "seconds": seconds,
                      "tokens_per_s": tokens / seconds, "last_loss": float(loss),
                      "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                      "peak_gpu_allocated_mb": torch.cuda.max_memory_allocated() / 2**20 if device.type == "cuda" else 0,
                      "torch": torch.__version__}))


if __name__ == "__main__":
    main()
