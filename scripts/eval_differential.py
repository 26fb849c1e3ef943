#!/usr/bin/env python3
"""Random differential cases for mtx eval against sacreBLEU (from PyPI, in .venv).

Writes DIR/expected.json in the format of tests/fixtures/eval/expected.json, with each case's lines inline
("hyp_lines", "refs_lines") instead of file names: random hypothesis/reference sets (random lengths, Unicode
punctuation and scripts, numbers, entities, empty lines, one to three references, references made by editing
the hypothesis so that n-grams match) scored with random options of BLEU, chrF/chrF++ and TER, at corpus level
and (a share of them) sentence level. EvalParity in tests/eval_test.cpp then holds mtx to every score (0.01),
signature and one-line text:

    scripts/venv.sh sacrebleu==2.6.0
    .venv/bin/python scripts/eval_differential.py --cases 10000 --seed 1 --out /tmp/evaldiff
    MTX_EVAL_FIXTURES_EXTRA=/tmp/evaldiff build/bin/mtx_tests --gtest_filter='EvalParity.*'

The fixed-seed slice in the repository (tests/fixtures/eval-random) is this script's output for
--cases 400 --seed 12; CI checks mtx against it. (It found, among others, that sacreBLEU tokenizes TER's
references twice: with tercom's normalisation that is not a no-op, and mtx now does the same.)
"""
import argparse
import json
import random
from pathlib import Path

import sacrebleu
from sacrebleu.metrics import BLEU, CHRF, TER

WORDS = ["a", "dog", "runs", "The", "man", "in", "the", "park", "two", "children", "play", "soccer", "Hund",
         "läuft", "Straße", "Mädchen", "naïve", "café", "résumé", "Ærø", "İstanbul", "ß", "ǅemal", "ΣΊΣΥΦΟΣ",
         "собака", "бежит", "狗", "在", "公园里", "跑", "犬が", "走る", "강아지", "달린다", "كلب", "يجري",
         "כלב", "रन", "สุนัข", "e-mail", "don't", "it's", "U.S.", "3-4", "1,000", "1.000,50", "3.14",
         "$5", "€20", "50%", "#tag", "@user", "&amp;", "&quot;", "&lt;", "&gt;", "&apos;", "x&y", "A&B",
         "😀", "👍🏽", "e\u0301", "\u00a0", "co-operate", "well—known", "the_end", "C++", "1/2", "10:30"]
PUNCT = [",", ".", "!", "?", ";", ":", "...", "(", ")", "[", "]", "{", "}", "\"", "'", "-", "--", "„", "“", "”",
         "«", "»", "‹", "›", "—", "–", "…", "¿", "¡", "「", "」", "『", "』", "、", "。", "，", "！", "？", "·",
         "•", "†", "§", "¶", "©", "®", "™", "°", "±", "×", "÷", "€", "£", "¥", "¢", "$", "%", "&", "*", "/",
         "\\", "|", "~", "^", "`", "<", ">", "=", "+", "_", "#", "@"]
SPACES = [" ", " ", " ", " ", "  ", "\t", "\u3000", "\u00a0", "\u2009"]


def sentence(rng, max_tokens):
    n = rng.choice([0, 1, 2]) if rng.random() < 0.08 else rng.randint(1, max_tokens)
    out = []
    for _ in range(n):
        tok = rng.choice(PUNCT) if rng.random() < 0.25 else rng.choice(WORDS)
        if rng.random() < 0.15:
            tok = tok.upper() if rng.random() < 0.5 else tok.capitalize()
        out.append(tok)
        out.append(rng.choice(SPACES) if rng.random() < 0.85 else "")
    text = "".join(out)
    if rng.random() < 0.1:
        text = rng.choice(SPACES) + text
    return text


def edited(rng, text):
    """A reference made from the hypothesis: words dropped, swapped, replaced, re-cased."""
    toks = text.split(" ")
    out = []
    for t in toks:
        r = rng.random()
        if r < 0.1:
            continue
        if r < 0.2:
            t = rng.choice(WORDS + PUNCT)
        elif r < 0.25:
            t = t.lower()
        out.append(t)
        if rng.random() < 0.05:
            out.append(rng.choice(WORDS))
    if len(out) > 2 and rng.random() < 0.3:
        i = rng.randrange(len(out) - 1)
        out[i], out[i + 1] = out[i + 1], out[i]
    return " ".join(out)


def options(rng, metric):
    if metric == "bleu":
        o = {}
        if rng.random() < 0.6:
            o["tokenize"] = rng.choice(["13a", "intl", "char", "none"])
        if rng.random() < 0.3:
            o["lowercase"] = True
        if rng.random() < 0.5:
            o["smooth_method"] = rng.choice(["exp", "floor", "add-k", "none"])
            if o["smooth_method"] in ("floor", "add-k") and rng.random() < 0.5:
                o["smooth_value"] = rng.choice([0.01, 0.05, 0.1, 0.5, 1, 2]) if o["smooth_method"] == "floor" \
                    else rng.choice([1, 2, 3])
        if rng.random() < 0.3:
            o["use_effective_order"] = True
        return o
    if metric == "chrf":
        o = {}
        if rng.random() < 0.4:
            o["char_order"] = rng.randint(1, 6)
        if rng.random() < 0.4:
            o["word_order"] = rng.randint(0, 2)
        if rng.random() < 0.3:
            o["beta"] = rng.randint(1, 3)
        for k in ("lowercase", "whitespace", "eps_smoothing"):
            if rng.random() < 0.25:
                o[k] = True
        return o
    o = {}
    for k in ("normalized", "no_punct", "case_sensitive"):
        if rng.random() < 0.35:
            o[k] = True
    return o


def make(metric, o, sentence_level=False):
    if metric == "bleu":
        opts = dict(o)
        eff = opts.pop("use_effective_order", False)
        return BLEU(**opts, effective_order=eff or sentence_level)
    if metric == "chrf":
        return CHRF(**o)
    return TER(**o)


def case(rng, i, sentence_share):
    metric = rng.choice(["bleu", "bleu", "chrf", "chrf", "ter"])
    o = options(rng, metric)
    n = rng.randint(1, 12)
    nrefs = rng.choice([1, 1, 1, 2, 3])
    max_tokens = rng.choice([3, 8, 20, 40])
    hyps = [sentence(rng, max_tokens) for _ in range(n)]
    refs = [[edited(rng, h) if rng.random() < 0.7 else sentence(rng, max_tokens) for h in hyps] for _ in range(nrefs)]
    c = {"metric": metric, "hyp": f"random-{i}", "refs": [f"random-{i}-ref{j}" for j in range(nrefs)],
         "options": o, "hyp_lines": hyps, "refs_lines": refs}
    if rng.random() < sentence_share:
        m = make(metric, o, True)
        c["scores"] = [round(m.sentence_score(h, [r[k] for r in refs]).score, 6) for k, h in enumerate(hyps)]
        return "sentence", c
    m = make(metric, o)
    s = m.corpus_score(hyps, refs)
    c.update({"score": round(s.score, 6), "signature": str(m.get_signature()), "text": str(s)})
    return "corpus", c


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--sentence-share", type=float, default=0.2)
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    data = {"sacrebleu_version": sacrebleu.__version__, "generator": f"scripts/eval_differential.py --cases {a.cases} "
            f"--seed {a.seed}", "cases": [],
            "sentence_cases": []}
    for i in range(a.cases):
        kind, c = case(rng, i, a.sentence_share)
        data["cases" if kind == "corpus" else "sentence_cases"].append(c)
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "expected.json").write_text(json.dumps(data, ensure_ascii=False, indent=0) + "\n", encoding="utf-8")
    print(f"wrote {a.out / 'expected.json'}: {len(data['cases'])} corpus and {len(data['sentence_cases'])} "
          f"sentence-level cases ({sum(len(c['scores']) for c in data['sentence_cases'])} sentence scores), "
          f"sacreBLEU {sacrebleu.__version__}, seed {a.seed}")


if __name__ == "__main__":
    main()
