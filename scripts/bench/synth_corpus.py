#!/usr/bin/env python3
"""Synthetic parallel corpora of distinct pairs, recombined from Multi30k's training pairs.

Pair i joins the first half of Multi30k pair a with the second half of pair b, on both sides alike, where
(a, b) = (i mod P, (i div P + i) mod P) for the P training pairs: distinct i < P^2 give distinct (a, b), so a corpus
of up to P^2 (841M) pairs repeats no combination, and a sentence's two halves come from different pairs. Every
i-th pair also gets a number word from i, so that no two pairs are the same text either.

    scripts/bench/synth_corpus.py --multi30k data/multi30k --pairs 1000000 --out DIR
    scripts/bench/synth_corpus.py --multi30k data/multi30k --repeat 100 --out DIR

writes DIR/train.de and DIR/train.en (plain text) and copies val and test_2016_flickr beside them. --repeat N
writes Multi30k's training pairs N times over instead (repeated text, as a quick test of scale would).
"""
import argparse
import gzip
import os
import shutil


def read(path):
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [line.rstrip("\n").split(" ") for line in f]


def halves(sentences):
    first, second = [], []
    for words in sentences:
        cut = max(1, len(words) // 2)
        first.append(" ".join(words[:cut]))
        second.append(" ".join(words[cut:]))
    return first, second


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--multi30k", required=True)
    ap.add_argument("--pairs", type=int)
    ap.add_argument("--repeat", type=int)
    ap.add_argument("--out", required=True)
    ap.add_argument("--src", default="de")
    ap.add_argument("--tgt", default="en")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    src = halves(read(os.path.join(a.multi30k, f"train.{a.src}.gz")))
    tgt = halves(read(os.path.join(a.multi30k, f"train.{a.tgt}.gz")))
    p = len(src[0])
    if (a.pairs is None) == (a.repeat is None):
        raise SystemExit("give --pairs or --repeat")
    if a.repeat is not None:
        for lang in (a.src, a.tgt):
            with gzip.open(os.path.join(a.multi30k, f"train.{lang}.gz"), "rt", encoding="utf-8") as f:
                text = f.read()
            with open(os.path.join(a.out, f"train.{lang}"), "w", encoding="utf-8") as out:
                for _ in range(a.repeat):
                    out.write(text)
    elif a.pairs > p * p:
        raise SystemExit(f"at most {p * p} distinct pairs")
    else:
        recombine(src, tgt, a)
    for split in ("val", "test_2016_flickr"):
        for lang in (a.src, a.tgt):
            name = f"{split}.{lang}.gz"
            shutil.copyfile(os.path.join(a.multi30k, name), os.path.join(a.out, name))


def recombine(src, tgt, a):
    p = len(src[0])
    with open(os.path.join(a.out, f"train.{a.src}"), "w", encoding="utf-8", buffering=1 << 22) as fs, open(
        os.path.join(a.out, f"train.{a.tgt}"), "w", encoding="utf-8", buffering=1 << 22
    ) as ft:
        block = 100000
        for start in range(0, a.pairs, block):
            ls, lt = [], []
            for i in range(start, min(a.pairs, start + block)):
                x = i % p
                y = (i // p + i) % p
                tag = str(i)
                ls.append(f"{src[0][x]} {tag} {src[1][y]}\n")
                lt.append(f"{tgt[0][x]} {tag} {tgt[1][y]}\n")
            fs.write("".join(ls))
            ft.write("".join(lt))


if __name__ == "__main__":
    main()
