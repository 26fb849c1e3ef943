#!/usr/bin/env python3
"""Terminology constraints for scripts/bench/terms.sh (standard library only).

pick REF HYP OUT [--seed S]: per line, 1 or 2 content words of the reference (seeded choice) that the
unconstrained translation HYP misses, written to OUT as a JSON list a line ([] where there is none).
score TERMS OUT...: for each translation file, the share of the terms it holds as whole words (case-sensitive).
synonyms DIR: writes DIR/synonyms.tsv, a client's glossary whose terms are not the model's usual words (Hund ->
  puppy where the model writes "dog"), with the source and target forms of each entry; DIR/lemmas.tsv, its first
  forms only; and DIR/own.tsv, the same source words with the model's own words as terms (what a glossary costs
  the search when its terms change nothing).
synonyms-score SRC REF PLAIN NAME=OUT...: on the lines whose source holds a glossary word and whose plain
  translation holds the model's usual word for it: a markdown row per output -- the term present, the term and
  the model's word both present, and BLEU (mtx eval: sacreBLEU's 13a) against the references with the model's word
  replaced by the term; plus a row for PLAIN with that find-and-replace. An output whose NAME ends in
  "+ find-and-replace" is scored after that replacement.
synonyms-bound SRC REF PLAIN OUT: of those lines, the ones whose find-and-replace lacks a term, scored as they are,
  as the human reference, and as OUT translated them, with find-and-replace on every other line: how far
  find-and-replace can be beaten.
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


# A client's glossary: the German forms (every case), the client's term in the same form, and the model's usual
# word in the same form.
SYNONYMS = [
    ("Hund|Hundes|Hunde|Hunden", "puppy|puppy|puppies|puppies", "dog|dog|dogs|dogs"),
    ("Mann|Mannes|Männer|Männern", "gentleman|gentleman|gentlemen|gentlemen", "man|man|men|men"),
    ("Frau|Frauen", "lady|ladies", "woman|women"),
    ("Junge|Jungen", "lad|lads", "boy|boys"),
    ("Kind|Kindes|Kinder|Kindern", "youngster|youngster|youngsters|youngsters", "child|child|children|children"),
    ("Straße|Straßen", "road|roads", "street|streets"),
    ("Auto|Autos", "automobile|automobiles", "car|cars"),
    ("Hut|Hutes|Hüte|Hüten", "cap|cap|caps|caps", "hat|hat|hats|hats"),
    ("Hemd|Hemdes|Hemden", "top|top|tops", "shirt|shirt|shirts"),
]


def forms(side):
    return side.split("|")


def synonyms(directory):
    """synonyms.tsv lists every form (a lemma list); lemmas.tsv only the first, for a stemmer to find the rest."""
    with open(f"{directory}/synonyms.tsv", "w", encoding="utf-8") as f, \
            open(f"{directory}/lemmas.tsv", "w", encoding="utf-8") as g, \
            open(f"{directory}/own.tsv", "w", encoding="utf-8") as h:
        for de, term, model in SYNONYMS:
            f.write(f"{de}\t{term}\n")
            g.write(f"{forms(de)[0]}\t{forms(term)[0]}\n")
            h.write(f"{de}\t{model}\n")


def found(line, word):
    """Whole-word occurrences of `word`, any case of its first letter."""
    return re.search(r"(?<!\w)[" + re.escape(word[0].upper() + word[0].lower()) + "]" + re.escape(word[1:]) +
                     r"(?!\w)", line) is not None


def holds_word(line, word):
    """Whole-word occurrences of `word` as written (German nouns: "Junge" is not the adjective "junge")."""
    return re.search(r"(?<!\w)" + re.escape(word) + r"(?!\w)", line) is not None


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
    """The lines that hold a glossary word and whose plain output holds the model's word for it. Every glossary
    entry whose word the source line holds is substituted in the references and in the find-and-replace row, and
    counted in the columns: term present (every entry's), and term with the model's word (some entry's)."""
    read = lambda p: open(p, encoding="utf-8").read().split("\n")
    src_l, ref_l, plain_l = read(src), read(ref), read(plain)
    picked = []  # (line, the entries whose German word the line holds)
    for i, line in enumerate(src_l[:len(ref_l)]):
        held = [e for e, (de, _, _) in enumerate(SYNONYMS) if any(holds_word(line, d) for d in forms(de))]
        if any(any(found(plain_l[i], m) for m in forms(SYNONYMS[e][2])) for e in held):
            picked.append((i, held))

    def substituted(line, held):
        for e in held:
            line = replaced(line, forms(SYNONYMS[e][2]), forms(SYNONYMS[e][1]))
        return line

    refs = [substituted(ref_l[i], held) for i, held in picked]
    rows = [("plain", [plain_l[i] for i, _ in picked]),
            ("plain, find-and-replace", [substituted(plain_l[i], held) for i, held in picked])]
    for name_out in outs:
        name, path = name_out.split("=", 1)
        lines = read(path)
        replace = name.endswith("+ find-and-replace")
        rows.append((name, [substituted(lines[i], held) if replace else lines[i] for i, held in picked]))
    print(f"{len(picked)} lines hold a glossary word and the model's usual word for it")
    print()
    print("| output | term present % | term and the model's word both % | BLEU vs term references |")
    print("|---|---|---|---|")
    has = lambda h, side: any(found(h, w) for w in forms(side))
    for name, hyps in rows:
        term = sum(all(has(h, SYNONYMS[e][1]) for e in held) for h, (_, held) in zip(hyps, picked))
        both = sum(any(has(h, SYNONYMS[e][1]) and has(h, SYNONYMS[e][2]) for e in held)
                   for h, (_, held) in zip(hyps, picked))
        bleu = corpus_bleu(hyps, refs)
        n = max(len(picked), 1)
        print(f"| {name} | {100.0 * term / n:.1f} | {100.0 * both / n:.1f} | {bleu:.1f} |")


def synonyms_bound(src, ref, plain, out):
    """How far find-and-replace can be beaten: the lines synonyms_score picks whose find-and-replace lacks a term,
    scored three ways with find-and-replace on every other line -- as find-and-replace left them, as the human
    reference itself (the best any translation of them could do), and as OUT translated them."""
    read = lambda p: open(p, encoding="utf-8").read().split("\n")
    src_l, ref_l, plain_l, out_l = read(src), read(ref), read(plain), read(out)
    has = lambda h, side: any(found(h, w) for w in forms(side))

    def substituted(line, held):
        for e in held:
            line = replaced(line, forms(SYNONYMS[e][2]), forms(SYNONYMS[e][1]))
        return line

    picked = []
    for i, line in enumerate(src_l[:len(ref_l)]):
        held = [e for e, (de, _, _) in enumerate(SYNONYMS) if any(holds_word(line, d) for d in forms(de))]
        if any(any(found(plain_l[i], m) for m in forms(SYNONYMS[e][2])) for e in held):
            picked.append((i, held))
    refs = [substituted(ref_l[i], held) for i, held in picked]
    fr = [substituted(plain_l[i], held) for i, held in picked]
    lacking = {k for k, (_, held) in enumerate(picked) if not all(has(fr[k], SYNONYMS[e][1]) for e in held)}
    swap = lambda other: [other[k] if k in lacking else fr[k] for k in range(len(fr))]
    print(f"{len(lacking)} of {len(picked)} lines: find-and-replace lacks a term")
    print(f"find-and-replace: {corpus_bleu(fr, refs):.2f}")
    print(f"those lines as the reference: {corpus_bleu(swap(refs), refs):.2f}")
    print(f"those lines as {out} translated them: {corpus_bleu(swap([out_l[i] for i, _ in picked]), refs):.2f}")


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
    elif sys.argv[1] == "synonyms-bound":
        synonyms_bound(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5])
    else:
        sys.exit(__doc__)
