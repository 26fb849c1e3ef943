#!/usr/bin/env python3
"""Writes tests/fixtures/lm/basic_english.jsonl: torchtext 0.18's basic_english on Multi30k lines and edge
cases, the oracle for tests/lm_test.cpp. torchtext's function is pure Python (torchtext/data/utils.py);
its rules are restated here from that file so that the fixture needs no torchtext import (torchtext's C++
extension does not load against newer torch wheels).

    scripts/make_basic_english_fixture.py data/multi30k > tests/fixtures/lm/basic_english.jsonl
"""
import gzip
import json
import re
import sys

# torchtext/data/utils.py (0.18.0), _patterns and _replacements, verbatim.
_patterns = [r"\'", r"\"", r"\.", r"<br \/>", r",", r"\(", r"\)", r"\!", r"\?", r"\;", r"\:", r"\s+"]
_replacements = [" '  ", "", " . ", " ", " , ", " ( ", " ) ", " ! ", " ? ", " ", " ", " "]
_patterns_dict = list((re.compile(p), r) for p, r in zip(_patterns, _replacements))


def basic_english(line):
    line = line.lower()
    for pattern_re, replaced_str in _patterns_dict:
        line = pattern_re.sub(replaced_str, line)
    return line.split()


EDGE = [
    "Hello, World! It's \"fine\" (ok).<br />Yes; no: maybe?",
    " = Valkyria Chronicles III = ",
    "3 @,@ 000 <unk> ÄRGER Straße",
    "a<br \"/>b",
    "İstanbul ΟΔΟΣ Σ ΑΣ.",
    "tab\there\u2028line\u3000ideographic\u00a0nbsp\u200bzero-width",
    "don't \"quote\" 'single' ... ?!",
    "",
    "   ",
]


def main():
    d = sys.argv[1]
    lines = list(EDGE)
    for name in ("val.en.gz", "val.de.gz"):
        with gzip.open(f"{d}/{name}", "rt", encoding="utf-8") as f:
            lines += [l.rstrip("\n") for l in f][:300]
    for l in lines:
        print(json.dumps({"line": l, "tokens": basic_english(l)}, ensure_ascii=False))


if __name__ == "__main__":
    main()
