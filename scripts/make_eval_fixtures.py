#!/usr/bin/env python3
"""Write tests/fixtures/eval/expected.json: sacreBLEU's scores for the fixture texts beside it.

The C++ parity test (EvalParity in tests/eval_test.cpp) holds mtx eval to these numbers: every corpus
case's score (to 0.01), signature (version field aside) and one-line rendering, and every sentence-level
score. Re-run this when sacreBLEU changes or when a case is added:

    scripts/venv.sh sacrebleu==2.6.0            # project-local .venv (git-ignored)
    .venv/bin/python scripts/make_eval_fixtures.py [--dir tests/fixtures/eval] [--check]

--check recomputes and compares with the file instead of writing it (exit 1 on a difference).
Options are sacreBLEU's Python API names, which the C++ test maps onto mtx's option structs.
"""
import argparse
import json
import sys
from pathlib import Path

import sacrebleu
from sacrebleu.metrics import BLEU, CHRF, TER

SYSTEMS = ["sysA.en", "sysB.en", "sysC.en"]  # decreasing quality; sysB has empty lines, sysC one
ONE_REF = ["ref.en"]
TWO_REFS = ["ref.en", "ref2.en"]

# Every option mtx eval offers for the three sacreBLEU metrics.
BLEU_OPTIONS = [
    {},
    {"lowercase": True},
    {"tokenize": "intl"},
    {"tokenize": "char"},
    {"tokenize": "none"},
    {"tokenize": "intl", "lowercase": True},
    {"smooth_method": "floor"},
    {"smooth_method": "floor", "smooth_value": 0.05},
    {"smooth_method": "add-k"},
    {"smooth_method": "add-k", "smooth_value": 2},
    {"smooth_method": "none"},
    {"use_effective_order": True},
]
CHRF_OPTIONS = [
    {},
    {"word_order": 2},
    {"lowercase": True},
    {"word_order": 2, "lowercase": True},
    {"char_order": 4},
    {"beta": 1},
    {"beta": 3},
    {"whitespace": True},
    {"eps_smoothing": True},
    {"word_order": 1, "char_order": 3, "beta": 1},
]
TER_OPTIONS = [
    {},
    {"case_sensitive": True},
    {"normalized": True},
    {"no_punct": True},
    {"normalized": True, "case_sensitive": True},
    {"normalized": True, "no_punct": True},
]
MULTI_REF = {  # metric -> options scored against two references
    "bleu": [{}, {"lowercase": True}, {"tokenize": "intl"}, {"smooth_method": "floor"}],
    "chrf": [{}, {"word_order": 2}],
    "ter": [{}, {"normalized": True}],
}
UNICODE = {  # the mixed-script file: every tokenizer, case folding, and each metric's default
    "bleu": [{}, {"tokenize": "intl"}, {"tokenize": "char"}, {"tokenize": "none"}, {"lowercase": True},
             {"tokenize": "intl", "lowercase": True}],
    "chrf": [{}, {"word_order": 2}, {"lowercase": True}, {"whitespace": True}],
    "ter": [{}, {"normalized": True}, {"no_punct": True}, {"case_sensitive": True}],
}
EDGES = {  # small files: no matching n-gram at all (BLEU is 0 whatever the smoothing), and short or empty lines
    "nomatch.hyp": ("nomatch.ref", [("bleu", {}), ("bleu", {"smooth_method": "floor"}), ("bleu", {"smooth_method": "add-k"}),
                                    ("chrf", {}), ("ter", {})]),
    "short.hyp": ("short.ref", [("bleu", {}), ("bleu", {"use_effective_order": True}), ("bleu", {"smooth_method": "none"}),
                                ("bleu", {"tokenize": "char"}), ("chrf", {}), ("chrf", {"word_order": 2}), ("ter", {}),
                                ("ter", {"no_punct": True})]),
}
# Sentence level (mtx eval --sentence-level; sacrebleu.sentence_* with effective order for BLEU).
SENTENCE = [
    ("bleu", "sysA.en", ONE_REF, {}),
    ("bleu", "sysB.en", ONE_REF, {}),
    ("bleu", "sysC.en", ONE_REF, {}),
    ("bleu", "sysB.en", TWO_REFS, {}),
    ("bleu", "sysB.en", ONE_REF, {"lowercase": True, "smooth_method": "floor"}),
    ("bleu", "unicode.hyp", ["unicode.ref"], {}),
    ("bleu", "unicode.hyp", ["unicode.ref"], {"tokenize": "intl"}),
    ("chrf", "sysB.en", ONE_REF, {}),
    ("chrf", "sysC.en", ONE_REF, {"word_order": 2}),
    ("chrf", "unicode.hyp", ["unicode.ref"], {}),
    ("ter", "sysB.en", ONE_REF, {}),
    ("ter", "sysC.en", TWO_REFS, {"normalized": True}),
    ("ter", "unicode.hyp", ["unicode.ref"], {}),
    ("bleu", "short.hyp", ["short.ref"], {}),
    ("bleu", "short.hyp", ["short.ref"], {"smooth_method": "add-k"}),
    ("bleu", "nomatch.hyp", ["nomatch.ref"], {}),
    ("chrf", "short.hyp", ["short.ref"], {}),
    ("ter", "short.hyp", ["short.ref"], {}),
]


def make(metric, options, sentence=False):
    if metric == "bleu":
        opts = dict(options)
        if sentence:
            opts["effective_order"] = True
        elif "use_effective_order" in opts:
            opts["effective_order"] = opts.pop("use_effective_order")
        return BLEU(**opts)
    if metric == "chrf":
        return CHRF(**options)
    return TER(**options)


def read(d, name):
    # Same line splitting as mtx (and sacrebleu's CLI): '\n' only, no stripping.
    with open(d / name, encoding="utf-8", newline="\n") as f:
        return f.read().split("\n")[:-1]


def corpus_case(d, metric, hyp, refs, options):
    m = make(metric, options)
    s = m.corpus_score(read(d, hyp), [read(d, r) for r in refs])
    return {"metric": metric, "hyp": hyp, "refs": refs, "options": options, "score": round(s.score, 6),
            "signature": str(m.get_signature()), "text": str(s)}


def sentence_case(d, metric, hyp, refs, options):
    m = make(metric, options, sentence=True)
    hyps, streams = read(d, hyp), [read(d, r) for r in refs]
    scores = [round(m.sentence_score(h, [s[i] for s in streams]).score, 6) for i, h in enumerate(hyps)]
    return {"metric": metric, "hyp": hyp, "refs": refs, "options": options, "scores": scores}


def build(d):
    cases = []
    for hyp in SYSTEMS:
        for metric, options in [("bleu", o) for o in BLEU_OPTIONS] + [("chrf", o) for o in CHRF_OPTIONS] + \
                               [("ter", o) for o in TER_OPTIONS]:
            cases.append(corpus_case(d, metric, hyp, ONE_REF, options))
        for metric, options in [(m, o) for m, os in MULTI_REF.items() for o in os]:
            cases.append(corpus_case(d, metric, hyp, TWO_REFS, options))
    for metric, options in [(m, o) for m, os in UNICODE.items() for o in os]:
        cases.append(corpus_case(d, metric, "unicode.hyp", ["unicode.ref"], options))
    for hyp, (ref, metrics) in EDGES.items():
        cases += [corpus_case(d, metric, hyp, [ref], options) for metric, options in metrics]
    sentence = [sentence_case(d, *c) for c in SENTENCE]
    return {"sacrebleu_version": sacrebleu.__version__, "cases": cases, "sentence_cases": sentence}


def main():
    root = Path(__file__).resolve().parent.parent
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, default=root / "tests" / "fixtures" / "eval")
    ap.add_argument("--check", action="store_true", help="compare with expected.json instead of writing it")
    a = ap.parse_args()
    data = build(a.dir)
    text = json.dumps(data, indent=1, ensure_ascii=False) + "\n"
    out = a.dir / "expected.json"
    n = len(data["cases"]) + sum(len(c["scores"]) for c in data["sentence_cases"])
    if a.check:
        same = out.exists() and out.read_text(encoding="utf-8") == text
        print(f"{out}: {'up to date' if same else 'differs from sacreBLEU ' + sacrebleu.__version__}")
        sys.exit(0 if same else 1)
    out.write_text(text, encoding="utf-8")
    print(f"wrote {out}: {len(data['cases'])} corpus cases, {len(data['sentence_cases'])} sentence-level cases "
          f"({n} scores) from sacreBLEU {sacrebleu.__version__}")


if __name__ == "__main__":
    main()
