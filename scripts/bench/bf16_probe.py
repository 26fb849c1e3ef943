#!/usr/bin/env python3
"""Why is bf16 autocast training slower than fp32 on a GPU? A probe on the benchmark's peer model.

Trains peer_train.py's torch.nn.Transformer on the batches `mtx prepare --export-batches` wrote and times each
update (synchronised), so that the cost of an update whose shapes the process has not seen before can be told
from one whose shapes it has:
  1. fp32, then bf16 autocast: the first N batches twice over (pass 1: every shape new to that precision; pass 2:
     the same batches again, every shape seen);
  2. bf16 on batches whose lengths are padded up to a multiple of --bucket (few distinct shapes);
  3. torch.profiler over a few bf16 updates of new shapes and of seen ones: the top CUDA kernels and CPU ops.
Prints one table (median and mean milliseconds per update, target tokens/s per pass) and the profiles.

  python3 scripts/bench/bf16_probe.py --batches B --config C --vocab V [--updates 110] [--bucket 32]

B, C and V as for peer_train.py (scripts/bench/train_speed_gpu.sh shows how to make them).
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_train import Seq2SeqTransformer, read_batches, train_update  # noqa: E402


def pad_batch(batch, pad, bucket):
    def up(x):
        n = x.size(1)
        m = (n + bucket - 1) // bucket * bucket
        return x if m == n else torch.cat([x, torch.full((x.size(0), m - n), pad, dtype=x.dtype)], 1)
    return tuple(up(x) for x in batch)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", required=True)
    ap.add_argument("--config", required=True)
    ap.add_argument("--vocab", type=int, required=True)
    ap.add_argument("--updates", type=int, default=110)
    ap.add_argument("--bucket", type=int, default=32)
    ap.add_argument("--passes", default="fp32,bf16,bucket,profile")
    ap.add_argument("--device", default="cuda", help="cpu: a dry run of the plumbing")
    ap.add_argument("--no-cudnn-attention", action="store_true",
                    help="torch.backends.cuda.enable_cudnn_sdp(False), as mtx and peer_train.py do")
    args = ap.parse_args()
    if args.no_cudnn_attention:
        torch.backends.cuda.enable_cudnn_sdp(False)
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    torch.manual_seed(1)
    cfg = json.load(open(args.config))
    m, t = cfg["model"], cfg["train"]
    batches, pad = read_batches(args.batches)
    shapes = {tuple(x.shape for x in b) for b in batches[: args.updates]}
    card = (f"{torch.cuda.get_device_name()}, arch list {torch.cuda.get_arch_list()}, "
            f"capability {torch.cuda.get_device_capability()}" if cuda else "CPU")
    print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, {card}, "
          f"CUDA_MODULE_LOADING={os.environ.get('CUDA_MODULE_LOADING', '(unset)')}, "
          f"allow_tf32 matmul={torch.backends.cuda.matmul.allow_tf32} cudnn={torch.backends.cudnn.allow_tf32}, "
          f"cuDNN attention {torch.backends.cuda.cudnn_sdp_enabled() if hasattr(torch.backends.cuda, 'cudnn_sdp_enabled') else '-'}, "
          f"{len(batches)} batches, {len(shapes)} distinct shapes in the first {args.updates}", flush=True)
    model = Seq2SeqTransformer(args.vocab, m, pad).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(t["adam_beta1"], t["adam_beta2"]), eps=t["adam_eps"])
    loss_fn = nn.CrossEntropyLoss(ignore_index=pad, label_smoothing=t["label_smoothing"])
    model.train()

    def update(batch, bf16):
        src, tgt_in, tgt_out = (x.to(device, non_blocking=True) for x in batch)
        train_update(model, opt, loss_fn, src, tgt_in, tgt_out, bf16, t["clip_norm"])

    rows = []

    def timed(label, chosen, bf16):
        ms, tokens = [], 0
        for b in chosen:
            sync()
            start = time.perf_counter()
            update(b, bf16)
            sync()
            ms.append(1000 * (time.perf_counter() - start))
            tokens += int(b[2].ne(pad).sum())
        rows.append((label, len(ms), statistics.median(ms), statistics.mean(ms), max(ms), tokens / (sum(ms) / 1000)))
        print(f"{label}: first ten updates (ms) {' '.join(f'{x:.0f}' for x in ms[:10])}", flush=True)

    first = batches[: args.updates]
    warm = batches[-1:]
    passes = args.passes.split(",")
    if "fp32" in passes:
        timed("fp32, warm-up (1 update)", warm, False)
        timed("fp32 pass 1 (shapes new)", first, False)
        timed("fp32 pass 2 (shapes seen)", first, False)
    if "bf16" in passes:
        timed("bf16 pass 1 (shapes new to bf16)", first, True)
        timed("bf16 pass 2 (shapes seen)", first, True)
    if "bucket" in passes:
        padded = [pad_batch(b, pad, args.bucket) for b in first]
        n = len({tuple(x.shape for x in b) for b in padded})
        timed(f"bf16, lengths padded to x{args.bucket} ({n} shapes), pass 1", padded, True)
        timed(f"bf16, lengths padded to x{args.bucket}, pass 2", padded, True)
    print("\n| pass | updates | median ms | mean ms | max ms | target tokens/s |\n|---|---|---|---|---|---|")
    for label, n, med, mean, worst, tps in rows:
        print(f"| {label} | {n} | {med:.1f} | {mean:.1f} | {worst:.0f} | {tps:,.0f} |")
    sys.stdout.flush()
    if "profile" in passes:
        from torch.profiler import ProfilerActivity, profile
        fresh = batches[args.updates: args.updates + 4]
        for label, chosen in (("bf16, 4 updates of new shapes", fresh), ("bf16, the same 4 again", fresh)):
            sync()
            with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])) as prof:
                for b in chosen:
                    update(b, True)
                sync()
            print(f"\n### profile: {label}")
            print(prof.key_averages().table(sort_by="self_cuda_time_total" if cuda else "cpu_time_total", row_limit=12, max_name_column_width=60))
            print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=12, max_name_column_width=60))
            sys.stdout.flush()


if __name__ == "__main__":
    main()
