#!/usr/bin/env python3
"""Scores `mtx translate --align` output against hand-made gold word pairs (tests/fixtures/align/pairs.tsv):
for every gold pair whose English word appears in the translation, whether the alignment links that word to the
German word. Prints "align: H of N gold pairs (P%)" and exits 1 when P is under --min.

    python3 scripts/checks/align_score.py SOURCES PAIRS ALIGNED [--min PERCENT]
"""
import argparse
import re
import sys


def words(line):
    return [re.sub(r"[^\w]", "", w.lower()) for w in line.split()]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("sources")
    p.add_argument("pairs")
    p.add_argument("aligned", help="mtx translate --align output: 'translation ||| s-t s-t ...'")
    p.add_argument("--min", type=float, default=0)
    a = p.parse_args()
    sources = open(a.sources, encoding="utf-8").read().splitlines()
    aligned = open(a.aligned, encoding="utf-8").read().splitlines()
    gold = {}
    for line in open(a.pairs, encoding="utf-8"):
        if line.startswith("#") or not line.strip():
            continue
        fields = line.rstrip("\n").split("\t")
        gold[int(fields[0])] = [(de.lower(), en.split("|")) for de, en in (f.split("=") for f in fields[1:])]
    hit = total = 0
    for i, line in enumerate(aligned):
        text, links = line.split(" ||| ")
        src, tgt = words(sources[i]), words(text)
        link = {int(t): int(s) for s, t in (x.split("-") for x in links.split())}
        for de, ens in gold.get(i, []):
            for t, w in enumerate(tgt):
                if w in ens:
                    total += 1
                    hit += src[link[t]] == de if t in link else 0
                    break
    share = 100.0 * hit / max(total, 1)
    print(f"align: {hit} of {total} gold pairs ({share:.0f}%)")
    sys.exit(0 if total > 0 and share >= a.min else 1)


if __name__ == "__main__":
    main()
