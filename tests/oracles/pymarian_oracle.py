#!/usr/bin/env python3
"""Marian itself (pymarian, the Marian C++ engine on PyPI) as the oracle of mtx's Marian importer
(tests/import_test.cpp): it trains a small Marian model on Multi30k, then translates and scores test sentences.

    python tests/oracles/pymarian_oracle.py --data MULTI30K_DIR --cache DIR --out DIR [--untied] [--ssru]
                                            [--updates N] [--sentences N]

The model is a transformer shaped like mtx's quickstart (2 + 2 layers, 128 wide, 4 heads, a 4k sentencepiece
vocabulary that Marian trains itself), tied-embeddings-all, or with --untied separate source and target
embeddings and its own output layer; with --ssru its decoder layers have an SSRU in place of self-attention
(transformer-decoder-autoreg rnn, dec-cell ssru: the decoder of Marian's and Bergamot's student models). Training it takes a minute or two on two cores, so it is kept under
DIR/<recipe hash>/ (model.npz, vocab.spm, decoder.yml) and trained only when that is missing.

DIR/expect.json (DIR being --out) holds:
- "model": the model's directory (model.npz, decoder.yml beside it);
- "source", "reference": the first N lines of test_2016_flickr;
- "greedy", "beam": Marian's translations, beam 1 and beam 5, with decoder.yml's other settings (normalize,
  word-penalty, max-length-factor) and one sentence per mini-batch, so that Marian's length limit is each
  sentence's own, as mtx's is;
- "beam_scores": Marian's score of each beam output (normalised as decoder.yml says);
- "forced", "forced_total": per reference, Marian's teacher-forced log-probability of each target piece, EOS
  last (`marian score --word-scores`, printed with 5 decimals), and their sum (6 decimals).
"""
import argparse
import gzip
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile


def lines(path, n):
    out = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            if len(out) == n:
                break
            out.append(line.rstrip("\n"))
    return out


def recipe(args):
    return {
        "type": "transformer",
        "enc_depth": 2,
        "dec_depth": 2,
        "dim_emb": 128,
        "transformer_dim_ffn": 512,
        "transformer_heads": 4,
        "dim_vocabs": [4000, 4000],
        "tied_embeddings_all": not args.untied,
        **({"transformer_decoder_autoreg": "rnn", "dec_cell": "ssru"} if args.ssru else {}),
        "after_batches": args.updates,
        "mini_batch": 64,
        "maxi_batch": 100,
        "learn_rate": 0.0003,
        "lr_warmup": 100,
        "label_smoothing": 0.1,
        "transformer_dropout": 0.1,
        "max_length": 100,
        "seed": 1111,
        "cpu_threads": 2,
        "workspace": 2000,
    }


def train(args, recipe_, model_dir):
    import pymarian
    work = tempfile.mkdtemp(prefix="train-", dir=os.path.dirname(model_dir))
    kw = dict(recipe_)
    kw.update(
        model=os.path.join(work, "model.npz"),
        vocabs=[os.path.join(work, "vocab.spm")] * 2,
        train_sets=[os.path.join(args.data, "train.de.gz"), os.path.join(args.data, "train.en.gz")],
        disp_freq=100,
        save_freq=100000,
        overwrite=True,
        quiet=True,
        relative_paths=True,
    )
    pymarian.Trainer(**kw).train()
    os.replace(os.path.join(work, "model.npz.decoder.yml"), os.path.join(work, "decoder.yml"))
    for name in os.listdir(work):  # the optimizer's state and progress: not needed
        if name not in ("model.npz", "decoder.yml", "vocab.spm"):
            os.remove(os.path.join(work, name))
    try:
        os.rename(work, model_dir)  # another process may have trained the same recipe meanwhile
    except OSError:
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--cache", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--untied", action="store_true")
    ap.add_argument("--ssru", action="store_true", help="an SSRU decoder (Marian's student models)")
    ap.add_argument("--updates", type=int, default=300)
    ap.add_argument("--sentences", type=int, default=200)
    args = ap.parse_args()
    import pymarian
    import yaml

    recipe_ = recipe(args)
    key = json.dumps({"recipe": recipe_, "pymarian": pymarian.__version__,
                      "data": os.path.getsize(os.path.join(args.data, "train.de.gz"))}, sort_keys=True)
    os.makedirs(args.cache, exist_ok=True)
    model_dir = os.path.join(os.path.abspath(args.cache), hashlib.sha256(key.encode()).hexdigest()[:16])
    if not os.path.exists(os.path.join(model_dir, "model.npz")):
        train(args, recipe_, model_dir)
    with open(os.path.join(model_dir, "decoder.yml")) as f:
        decoder = yaml.safe_load(f)

    source = lines(os.path.join(args.data, "test_2016_flickr.de.gz"), args.sentences)
    reference = lines(os.path.join(args.data, "test_2016_flickr.en.gz"), args.sentences)
    common = dict(models=os.path.join(model_dir, "model.npz"), vocabs=[os.path.join(model_dir, "vocab.spm")] * 2,
                  mini_batch=1, maxi_batch=1, cpu_threads=2, quiet=True,
                  normalize=decoder.get("normalize", 0), word_penalty=decoder.get("word-penalty", 0),
                  max_length_factor=decoder.get("max-length-factor", 3))
    expect = {"model": model_dir, "source": source, "reference": reference}
    expect["greedy"] = pymarian.Translator(beam_size=1, **common).translate(source)
    beam = pymarian.Translator(beam_size=5, n_best=True, **common).translate(source)
    best = {}
    for line in beam:  # n-best lines, best first per sentence: "i ||| text ||| F0= ... ||| score"
        fields = line.split(" ||| ")
        best.setdefault(int(fields[0]), (fields[1], float(fields[-1])))
    expect["beam"] = [best[i][0] for i in range(len(source))]
    expect["beam_scores"] = [best[i][1] for i in range(len(source))]
    # Teacher-forced: Marian's scorer (`marian score`) over the references.
    for name, text in (("src.de", source), ("ref.en", reference)):
        with open(os.path.join(args.out, name), "w", encoding="utf-8") as f:
            f.write("\n".join(text) + "\n")
    scores = os.path.join(args.out, "scores.txt")
    subprocess.run([sys.executable, "-m", "pymarian", "score", "-m", common["models"], "-v", *common["vocabs"],
                    "-t", os.path.join(args.out, "src.de"), os.path.join(args.out, "ref.en"), "--word-scores",
                    "--cpu-threads", "2", "--quiet", "-o", scores], check=True)
    expect["forced"], expect["forced_total"] = [], []
    with open(scores, encoding="utf-8") as f:
        for line in f:  # "total ||| WordScores= w1 w2 ... EOS"
            total, words = line.rstrip("\n").split(" ||| ")
            expect["forced_total"].append(float(total))
            expect["forced"].append([float(x) for x in words[len("WordScores="):].split()])
    with open(os.path.join(args.out, "expect.json"), "w", encoding="utf-8") as f:
        json.dump(expect, f, ensure_ascii=False, indent=1)


if __name__ == "__main__":
    sys.exit(main())
