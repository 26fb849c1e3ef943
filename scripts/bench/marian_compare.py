#!/usr/bin/env python3
"""mtx beside Marian itself (pymarian, Marian's C++ engine on PyPI), on one machine in one run.

    .venv/bin/python scripts/bench/marian_compare.py [--data DIR] [--threads 2] [--rounds 3]
                                                    [--train-updates 300] [--out FILE]
                                                    [--ssru] [--batch1] [--no-training] [--beams 1,5]

--ssru decodes the oracle's student instead (an SSRU decoder: transformer-decoder-autoreg rnn, dec-cell ssru);
--batch1 translates one sentence at a time on both sides (Marian: mini-batch 1, maxi-batch 1; mtx: --batch-tokens
1), the latency case an SSRU decoder is for.

Decoding: a transformer that Marian trained (tests/oracles/pymarian_oracle.py's quickstart-shaped model, cached by
its recipe) is imported into mtx (mtx import --from marian), so both translate with the same weights and the same
search (decoder.yml's settings; mtx carries Marian's). Both translate test_2016_flickr (1000 lines) at beam 1 and
5 on `--threads` threads, each with its own batching (Marian: decoder.yml's mini-batch 32 and maxi-batch 100;
mtx: its default token budget), in float32, and mtx also in int8 (mtx quantize) beside Marian's float32. Marian's
int8 does not work from pymarian 1.12.42 here: `--gemm-type packed8avx2` on the .npz changes no output and no time
(it packs only models converted beforehand), and the models that `pymarian convert -g packed8avx2` or
`-g intgemm8avx2` writes translate into garbage ("⁇ ⁇ ⁇", German words) on this model. Timing covers translation only, not loading. Generated tokens are the target pieces of each
side's output, EOS counted. The rounds interleave the sides and the median counts.

Training: the same model shape and data in both (post-norm transformer, 2+2 layers, 128 wide, FFN 512, 4 heads,
swish, tied-embeddings-all, a 4000-piece joint vocabulary, label smoothing 0.1, Adam), each with its own
batching at about the same target tokens per update. Target tokens/s over the updates after the first 50, as
each toolkit counts them (target pieces with EOS: Marian's "words/s", mtx's metrics.jsonl).

Prints markdown tables with the CPU named. Run nothing else on the machine meanwhile.
"""
import argparse
import gzip
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MTX = os.environ.get("MTX", os.path.join(ROOT, "build", "bin", "mtx"))


def cpu_name():
    info = {}
    with open("/proc/cpuinfo") as f:
        for line in f:
            if ":" in line:
                k, v = line.split(":", 1)
                info.setdefault(k.strip(), v.strip())
    flags = info.get("flags", "").split()
    isa = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "SSE"
    return f"{info.get('model name', '?')} (family {info.get('cpu family')} model {info.get('model')}, {isa})"


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def marian_model(data, work, ssru=False):
    out = os.path.join(work, "oracle")
    os.makedirs(out, exist_ok=True)
    run([sys.executable, os.path.join(ROOT, "tests", "oracles", "pymarian_oracle.py"), "--data", data, "--cache",
         os.path.join(ROOT, "data", "cache", "pymarian"), "--out", out, "--sentences", "1"]
        + (["--ssru"] if ssru else []))
    with open(os.path.join(out, "expect.json")) as f:
        return json.load(f)["model"]


def mtx_translate(ckpt, src, out, beam, threads, batch1=False):
    r = run([MTX, "translate", "--ckpt", ckpt, "--beam", str(beam), "--threads", str(threads), "--input", src,
             "--output", out] + (["--batch-tokens", "1"] if batch1 else []))
    m = re.search(r"(\d+) lines in ([0-9.]+) s", r.stderr)
    return float(m.group(2))


def count_tokens(sp, lines):
    return sum(len(sp.encode(line)) + 1 for line in lines)


def decoding(args, model_dir, work, lines, sp):
    import pymarian
    ckpt, ckpt8 = os.path.join(work, "m.pt"), os.path.join(work, "m8.pt")
    run([MTX, "import", "--from", "marian", os.path.join(model_dir, "model.npz"), "--config",
         os.path.join(model_dir, "decoder.yml"), "--out", ckpt])
    run([MTX, "quantize", "--ckpt", ckpt, "--out", ckpt8])
    src = os.path.join(work, "src.de")
    with open(src, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    common = dict(models=os.path.join(model_dir, "model.npz"), vocabs=[os.path.join(model_dir, "vocab.spm")] * 2,
                  mini_batch=1 if args.batch1 else 32, maxi_batch=1 if args.batch1 else 100,
                  cpu_threads=args.threads, quiet=True)
    rows = []
    for beam in [int(b) for b in args.beams.split(",")]:
        for weights in ("fp32", "int8"):
            translator = pymarian.Translator(beam_size=beam, **common)  # float32: see the docstring on int8
            times = {"marian": [], "mtx": []}
            outs = {}
            for _ in range(args.rounds):
                t0 = time.perf_counter()
                outs["marian"] = translator.translate(lines)
                times["marian"].append(time.perf_counter() - t0)
                out = os.path.join(work, f"mtx.{beam}.{weights}.en")
                times["mtx"].append(mtx_translate(ckpt8 if weights == "int8" else ckpt, src, out, beam, args.threads,
                                                  args.batch1))
                with open(out, encoding="utf-8") as f:
                    outs["mtx"] = f.read().splitlines()
            differ = sum(a != b for a, b in zip(outs["marian"], outs["mtx"]))
            for side in ("mtx", "marian"):
                t = statistics.median(times[side])
                shown = weights if side == "mtx" else "fp32"
                rows.append({"beam": beam, "weights": shown, "side": side, "seconds": t,
                             "tok_s": count_tokens(sp, outs[side]) / t, "sent_s": len(lines) / t,
                             "min": min(times[side]), "max": max(times[side]), "differ": differ})
            del translator
    return rows


def marian_training(args, data, work):
    from pymarian.utils import kwargs_to_cli
    d = os.path.join(work, "marian-train")
    os.makedirs(d, exist_ok=True)
    options = kwargs_to_cli(
        type="transformer", model=os.path.join(d, "model.npz"), vocabs=[os.path.join(d, "v.spm")] * 2,
        dim_vocabs=[4000, 4000], train_sets=[os.path.join(data, "train.de.gz"), os.path.join(data, "train.en.gz")],
        enc_depth=2, dec_depth=2, dim_emb=128, transformer_dim_ffn=512, transformer_heads=4, tied_embeddings_all=True,
        after_batches=args.train_updates, mini_batch=64, maxi_batch=100, learn_rate=0.0003, lr_warmup=100,
        label_smoothing=0.1, transformer_dropout=0.1, cpu_threads=args.threads, workspace=2000, disp_freq=50,
        save_freq=100000, seed=1111)
    log = run([sys.executable, "-m", "pymarian", *options.split()]).stderr.splitlines()
    labels = seconds = 0.0
    updates = before = 0
    for line in log:  # one line per disp-freq updates: the labels and the time of those updates
        m = re.search(r"Up\. (\d+) .*Cost [0-9.]+ \* ([0-9,]+) .*Time ([0-9.]+)s", line)
        if not m:
            continue
        up = int(m.group(1))
        if before >= 50:  # the first 50 updates are warm-up
            labels += float(m.group(2).replace(",", ""))
            seconds += float(m.group(3))
            updates += up - before
        before = up
    return labels / seconds, labels / updates


def mtx_training(args, data, work, max_tokens):
    run_dir = os.path.join(work, "mtx-train")
    sets = {"data.dir": data, "data.cache_dir": os.path.join(work, "cache"), "model.norm": "post",
            "model.activation": "swish", "model.share_embeddings": "true", "model.tie_output": "true",
            "train.max_minutes": "0", "train.max_steps": str(args.train_updates), "train.max_tokens": str(max_tokens),
            "train.threads": str(args.threads), "train.log_every": "50", "train.validate_every": "0",
            "train.schedule": "noam", "train.lr": "0.0003", "train.warmup_steps": "100"}
    cmd = [MTX, "train", "--config", os.path.join(ROOT, "configs", "quick.json"), "--out", run_dir]
    for k, v in sets.items():
        cmd += ["--set", f"{k}={v}"]
    run(cmd)
    rows = [json.loads(line) for line in open(os.path.join(run_dir, "metrics.jsonl"))]
    rows = [r for r in rows if r.get("type") == "train"]
    first = next(r for r in rows if r["step"] >= 50)
    last = rows[-1]
    tokens = last["tgt_tokens"] - first["tgt_tokens"]
    return tokens / (last["elapsed_s"] - first["elapsed_s"]), tokens / (last["step"] - first["step"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=os.path.join(ROOT, "data", "multi30k"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--train-updates", type=int, default=300)
    ap.add_argument("--mtx-max-tokens", type=int, default=1280,
                    help="mtx's batch budget (padding included), set near Marian's target tokens per update")
    ap.add_argument("--out")
    ap.add_argument("--ssru", action="store_true", help="the SSRU student instead of the transformer")
    ap.add_argument("--batch1", action="store_true", help="one sentence at a time on both sides")
    ap.add_argument("--no-training", action="store_true", help="decoding only")
    ap.add_argument("--beams", default="1,5")
    args = ap.parse_args()
    import pymarian
    import sentencepiece as spm

    work = tempfile.mkdtemp(prefix="marian-compare-")
    model_dir = marian_model(args.data, work, args.ssru)
    sp = spm.SentencePieceProcessor(model_file=os.path.join(model_dir, "vocab.spm"))
    with gzip.open(os.path.join(args.data, "test_2016_flickr.de.gz"), "rt", encoding="utf-8") as f:
        lines = f.read().splitlines()
    report = [f"CPU: {cpu_name()}; {args.threads} threads; pymarian {pymarian.__version__}; "
              f"{run([MTX, '--version']).stdout.splitlines()[0]}", ""]
    model = "an SSRU student (SSRU decoder)" if args.ssru else "a transformer"
    batching = "one sentence at a time" if args.batch1 else "each side's own batching"
    report += [f"Decoding test_2016_flickr ({len(lines)} lines), the same Marian-trained weights ({model}), Marian's "
               f"search on both, {batching}; median of {args.rounds} interleaved rounds (min-max seconds)", "",
               "| beam | weights | side | generated tok/s | sentences/s | seconds (min-max) | mtx / Marian | "
               "lines differing |", "|---|---|---|---|---|---|---|---|"]
    rows = decoding(args, model_dir, work, lines, sp)
    for i in range(0, len(rows), 2):
        m, a = rows[i], rows[i + 1]
        for r in (m, a):
            ratio = f"**{m['tok_s'] / a['tok_s']:.2f}x**" if r is m else ""
            report.append(f"| {r['beam']} | {r['weights']} | {r['side']} | {r['tok_s']:.0f} | {r['sent_s']:.1f} | "
                          f"{r['seconds']:.2f} ({r['min']:.2f}-{r['max']:.2f}) | {ratio} | "
                          f"{r['differ'] if r is m else ''} |")
    if args.no_training:
        text = "\n".join(report) + "\n"
        print(text)
        if args.out:
            with open(args.out, "w") as f:
                f.write(text)
        return
    marian_rate, marian_per_update = marian_training(args, args.data, work)
    mtx_rate, mtx_per_update = mtx_training(args, args.data, work, args.mtx_max_tokens)
    report += ["", f"Training {args.train_updates} updates (rate over updates 51..{args.train_updates})", "",
               "| side | target tokens/s | target tokens per update | mtx / Marian |", "|---|---|---|---|",
               f"| mtx | {mtx_rate:.0f} | {mtx_per_update:.0f} | **{mtx_rate / marian_rate:.2f}x** |",
               f"| Marian | {marian_rate:.0f} | {marian_per_update:.0f} | |"]
    text = "\n".join(report) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
