#!/usr/bin/env python3
"""Terminology constraints for scripts/bench/terms.sh (standard library only).

pick REF HYP OUT [--seed S]: per line, 1 or 2 content words of the reference (seeded choice) that the
unconstrained translation HYP misses, written to OUT as a JSON list a line ([] where there is none).
score TERMS OUT...: for each translation file, the share of the terms it holds as whole words (case-sensitive).
synonyms DIR: writes DIR/synonyms.tsv, a client's glossary whose terms are not the model's usual words (Hund ->
  puppy where the model writes "dog"), with the source and target forms of each entry.
synonyms-score SRC REF PLAIN NAME=OUT...: on the lines whose source holds a glossary word and whose plain
  translation holds the model's usual word for it: a markdown row per output -- the term present, the term and
  the model's word both present, and BLEU (mtx eval: sacreBLEU's 13a) against the references with the model's word
  replaced by the term; plus a row for PLAIN with that find-and-replace. Writes the lines' numbers to stdout's
  header.
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


# A client's glossary: German forms (singular|plural), the client's term forms, the model's usual word forms.
SYNONYMS = [
    ("Hund|Hunde", "puppy|puppies", "dog|dogs"),
    ("Mann|Männer", "gentleman|gentlemen", "man|men"),
    ("Frau|Frauen", "lady|ladies", "woman|women"),
    ("Junge|Jungen", "lad|lads", "boy|boys"),
    ("Kind|Kinder", "youngster|youngsters", "child|children"),
    ("Straße|Straßen", "road|roads", "street|streets"),
    ("Auto|Autos", "automobile|automobiles", "car|cars"),
    ("Hut|Hüte", "cap|caps", "hat|hats"),
    ("Hemd|Hemden", "top|tops", "shirt|shirts"),
]


def forms(side):
    return side.split("|")


def synonyms(directory):
    """synonyms.tsv lists every form (a lemma list); lemmas.tsv only the first, for a stemmer to find the rest."""
    with open(f"{directory}/synonyms.tsv", "w", encoding="utf-8") as f, \
            open(f"{directory}/lemmas.tsv", "w", encoding="utf-8") as g:
        for de, term, _ in SYNONYMS:
            f.write(f"{de}\t{term}\n")
            g.write(f"{forms(de)[0]}\t{forms(term)[0]}\n")


def found(line, word):
    """Whole-word occurrences of `word`, any case of its first letter."""
    return re.search(r"(?<!\w)[" + re.escape(word[0].upper() + word[0].lower()) + "]" + re.escape(word[1:]) +
                     r"(?!\w)", line) is not None


def replaced(line, model_words, terms):
    for w, t in sorted(zip(model_words, terms), key=lambda p: -len(p[0])):
        line = re.sub(r"(?<!\w)" + re.escape(w) + r"(?!\w)", t, line)
        line = re.sub(r"(?<!\w)" + re.escape(w.capitalize()) + r"(?!\w)", t.capitalize(), line)
    return line


def corpus_bleu(hyps, refs):
    """mtx eval's BLEU (sacreBLEU's 13a), from the binary in $MTX_BINARY (default build/bin/mtx)."""
    import os
    import subprocess
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        open(f"{d}/ref", "w", encoding="utf-8").write("\n".join(refs) + "\n")
        out = subprocess.run([os.environ.get("MTX_BINARY", "build/bin/mtx"), "eval", "--metric", "bleu", "--ref",
                              f"{d}/ref"], input="\n".join(hyps) + "\n", capture_output=True, text=True,
                             check=True).stdout
    return float(re.search(r"BLEU[^=]*= ([0-9.]+)", out).group(1))


def synonyms_score(src, ref, plain, outs):
    read = lambda p: open(p, encoding="utf-8").read().split("\n")
    src_l, ref_l, plain_l = read(src), read(ref), read(plain)
    picked = []  # (line, entry)
    for i, line in enumerate(src_l[:len(ref_l)]):
        for e, (de, term, model) in enumerate(SYNONYMS):
            if any(found(line, d) for d in forms(de)) and any(found(plain_l[i], m) for m in forms(model)):
                picked.append((i, e))
                break
    refs = [replaced(ref_l[i], forms(SYNONYMS[e][2]), forms(SYNONYMS[e][1])) for i, e in picked]
    rows = [("plain", [plain_l[i] for i, _ in picked]),
            ("plain, find-and-replace", [replaced(plain_l[i], forms(SYNONYMS[e][2]), forms(SYNONYMS[e][1]))
                                         for i, e in picked])]
    for name_out in outs:
        name, path = name_out.split("=", 1)
        lines = read(path)
        rows.append((name, [lines[i] for i, _ in picked]))
    print(f"{len(picked)} lines hold a glossary word and the model's usual word for it")
    print()
    print("| output | term present % | term and the model's word both % | BLEU vs term references |")
    print("|---|---|---|---|")
    for name, hyps in rows:
        term = sum(any(found(h, t) for t in forms(SYNONYMS[e][1])) for h, (_, e) in zip(hyps, picked))
        both = sum(any(found(h, t) for t in forms(SYNONYMS[e][1])) and any(found(h, m) for m in forms(SYNONYMS[e][2]))
                   for h, (_, e) in zip(hyps, picked))
        bleu = corpus_bleu(hyps, refs)
        n = max(len(picked), 1)
        print(f"| {name} | {100.0 * term / n:.1f} | {100.0 * both / n:.1f} | {bleu:.1f} |")


if __name__ == "__main__":
    if sys.argv[1] == "pick":
        seed = int(sys.argv[sys.argv.index("--seed") + 1]) if "--seed" in sys.argv else 1
        pick(sys.argv[2], sys.argv[3], sys.argv[4], seed)
    elif sys.argv[1] == "score":
        score(sys.argv[2], sys.argv[3:])
    elif sys.argv[1] == "synonyms":
        synonyms(sys.argv[2])
    elif sys.argv[1] == "synonyms-score":
        synonyms_score(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:])
    else:
        sys.exit(__doc__)
