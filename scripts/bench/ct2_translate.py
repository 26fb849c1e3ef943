#!/usr/bin/env python3
"""CTranslate2's side of scripts/bench/ct2_compare.sh: translates sentencepiece-encoded lines (pieces separated
by spaces) with a CTranslate2 model directory, timing the translation alone, and prints one JSON line:
sentences/s, generated tokens/s (output pieces plus the end token per sentence, as mtx counts), and with
--latency N the p50/p95 milliseconds of N sentences translated one at a time.

    ct2_translate.py --model DIR --input PIECES --output PIECES_OUT --beam 5 --length-penalty 1.0 \
        --max-length 200 --threads 2 --batch-tokens 4096 [--workers 1] [--latency 100]
--workers N: N translations at once (CTranslate2's inter_threads), threads / N threads each (intra_threads), each
on batches of batch-tokens / N (the same tokens in flight); latency is always measured with one translator on
every thread.
"""
import argparse
import json
import time


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True)
    p.add_argument("--input", required=True)
    p.add_argument("--output", required=True)
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--length-penalty", type=float, default=1.0)
    p.add_argument("--max-length", type=int, default=200)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch-tokens", type=int, default=4096)
    p.add_argument("--latency", type=int, default=0)
    p.add_argument("--workers", type=int, default=1)
    a = p.parse_args()
    import ctranslate2

    tr = ctranslate2.Translator(a.model, device="cpu", inter_threads=a.workers,
                                intra_threads=max(1, a.threads // a.workers))
    src = [line.split() for line in open(a.input, encoding="utf-8").read().splitlines()]
    opts = dict(beam_size=a.beam, length_penalty=a.length_penalty, max_decoding_length=a.max_length,
                num_hypotheses=1, return_scores=False)
    tr.translate_batch(src[:8], **opts)  # warm-up: first-call allocations, as mtx's first batch pays them too
    start = time.perf_counter()
    res = tr.translate_batch(src, max_batch_size=max(1, a.batch_tokens // a.workers), batch_type="tokens", **opts)
    seconds = time.perf_counter() - start
    outs = [r.hypotheses[0] for r in res]
    with open(a.output, "w", encoding="utf-8") as f:
        for o in outs:
            f.write(" ".join(o) + "\n")
    row = {"seconds": seconds, "sentences_per_s": len(src) / seconds,
           "tokens_per_s": sum(len(o) + 1 for o in outs) / seconds}
    if a.latency:
        if a.workers != 1:
            tr = ctranslate2.Translator(a.model, device="cpu", inter_threads=1, intra_threads=a.threads)
            tr.translate_batch(src[:8], **opts)
        times = []
        for s in src[: a.latency]:
            t = time.perf_counter()
            tr.translate_batch([s], **opts)
            times.append(1000 * (time.perf_counter() - t))
        times.sort()
        row["latency_p50_ms"] = times[min(len(times) - 1, int(0.5 * len(times)))]
        row["latency_p95_ms"] = times[min(len(times) - 1, int(0.95 * len(times)))]
    print(json.dumps(row))


if __name__ == "__main__":
    main()
