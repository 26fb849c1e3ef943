#!/usr/bin/env python3
"""Terminology constraints for scripts/bench/terms.sh (standard library only).

pick REF HYP OUT [--seed S]: per line, 1 or 2 content words of the reference (seeded choice) that the
unconstrained translation HYP misses, written to OUT as a JSON list a line ([] where there is none).
score TERMS OUT...: for each translation file, the share of the terms it holds as whole words (case-sensitive).
"""
import json
import random
import re
import sys

STOP = set("""a an the of in on at to for from with without by and or but is are was were be been being
has have had do does did it its this that these those there their they them he she his her him who whom which
while as into onto over under up down out off near next through than then very some two three one four five
other another each all both many several""".split())

WORD = re.compile(r"[^\W\d_]+(?:[-'][^\W\d_]+)*", re.UNICODE)


def words(line):
    return WORD.findall(line)


def holds(line, term):
    return re.search(r"(?<!\w)" + re.escape(term) + r"(?!\w)", line) is not None


def pick(ref, hyp, out, seed):
    rng = random.Random(seed)
    with open(ref, encoding="utf-8") as r, open(hyp, encoding="utf-8") as h, open(out, "w", encoding="utf-8") as o:
        for ref_line, hyp_line in zip(r, h):
            candidates = []
            for w in words(ref_line):
                if len(w) >= 3 and w.lower() not in STOP and not holds(hyp_line, w) and w not in candidates:
                    candidates.append(w)
            n = min(len(candidates), rng.choice([1, 2]))
            o.write(json.dumps(rng.sample(candidates, n), ensure_ascii=False) + "\n")


def score(terms, outs):
    with open(terms, encoding="utf-8") as f:
        wanted = [json.loads(line) for line in f]
    for path in outs:
        with open(path, encoding="utf-8") as f:
            lines = f.read().split("\n")
        total = sum(len(t) for t in wanted)
        met = sum(holds(lines[i], t) for i, ts in enumerate(wanted) for t in ts)
        print(f"{path}\t{met}\t{total}\t{100.0 * met / max(total, 1):.1f}")


if __name__ == "__main__":
    if sys.argv[1] == "pick":
        seed = int(sys.argv[sys.argv.index("--seed") + 1]) if "--seed" in sys.argv else 1
        pick(sys.argv[2], sys.argv[3], sys.argv[4], seed)
    elif sys.argv[1] == "score":
        score(sys.argv[2], sys.argv[3:])
    else:
        sys.exit(__doc__)
