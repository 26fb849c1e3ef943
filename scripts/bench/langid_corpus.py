#!/usr/bin/env python3
"""Builds a language-identification test corpus from Django's translated message catalogues.

Django's wheel (from PyPI, cached under data/cache/langid/) ships django.po files for ~95 locales:
django/conf/locale/*/LC_MESSAGES/django.po and django/contrib/*/locale/*/LC_MESSAGES/django.po. Each translated
msgstr (not fuzzy, not a copy of its msgid) becomes a sentence once placeholders (%(name)s, %s, {0}), HTML tags and
entities, URLs and e-mail addresses are removed and blanks collapsed; English sentences are the msgids. A sentence
is kept when it has at least --min-chars characters, mostly letters; duplicates go, and so does any text found
under two languages. Each language keeps at most --cap sentences (a seeded sample of its sorted sentences), and
languages with fewer than --min-sentences are left out.

    .venv/bin/python scripts/bench/langid_corpus.py --out data/cache/langid/corpus.tsv [--cap 200] [--seed 13]
        [--min-chars 20] [--min-sentences 50] [--django-version 5.2.19] [--wheel FILE] [--locales de,fr,...]

Writes `lang<TAB>sentence` lines, sorted by language then sentence. lang is the locale's ISO 639-1 code (639-3
where it has none: ast, ckb, dsb, hsb, kab, udm), and zh-Hant and sr-Latn for Django's zh_Hant and sr_Latn;
other regional locales (pt_BR, es_AR, en_GB, ...) are skipped. Prints the languages and their counts to stderr.
"""
import argparse
import html
import random
import re
import subprocess
import sys
import unicodedata
import zipfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CATALOGUE = re.compile(r"^django/(?:conf|contrib/[^/]+)/locale/([^/]+)/LC_MESSAGES/django\.po$")
SCRIPT_LOCALES = {"zh_Hans": "zh", "zh_Hant": "zh-Hant", "sr_Latn": "sr-Latn"}

PLACEHOLDERS = [
    re.compile(r"%\([^)]*\)[-#0 +]*\d*(?:\.\d+)?[a-zA-Z]"),  # %(name)s
    re.compile(r"%(?:\d+\$)?[-#0 +]*\d*(?:\.\d+)?[sdifrxXeEgGcu]"),  # %s %d %1$s %.2f
    re.compile(r"\{[^{}]*\}"),  # {0} {name} {name!r}
    re.compile(r"<[^>]*>"),  # HTML tags
    re.compile(r"https?://\S+|www\.\S+"),  # URLs
    re.compile(r"\S+@\S+\.\w+"),  # e-mail addresses
]


def unquote(s):
    s = s.strip()
    if len(s) < 2 or s[0] != '"' or s[-1] != '"':
        return ""
    out, i, s = [], 0, s[1:-1]
    escapes = {"n": "\n", "t": "\t", '"': '"', "\\": "\\", "r": "", "a": "", "b": "", "f": "", "v": ""}
    while i < len(s):
        if s[i] == "\\" and i + 1 < len(s):
            out.append(escapes.get(s[i + 1], s[i + 1]))
            i += 2
        else:
            out.append(s[i])
            i += 1
    return "".join(out)


def po_entries(text):
    """(msgids, msgstrs, fuzzy) for each entry of a .po file's text; obsolete (#~) entries are skipped."""
    entry, key, fuzzy = {}, None, False
    for line in text.splitlines() + [""]:
        line = line.strip()
        starts_entry = not line or line.startswith("#") or line.startswith("msgctxt") or line.startswith("msgid ")
        if starts_entry and any(k.startswith("msgstr") for k in entry):
            ids = [entry.get("msgid", "")] + ([entry["msgid_plural"]] if "msgid_plural" in entry else [])
            strs = [v for k, v in sorted(entry.items()) if k.startswith("msgstr")]
            yield ids, strs, fuzzy
            entry, key, fuzzy = {}, None, False
        if not line:
            continue
        if line.startswith("#"):
            if line.startswith("#,") and "fuzzy" in line:
                fuzzy = True
            key = None
            continue
        if line.startswith('"'):
            if key:
                entry[key] += unquote(line)
            continue
        key, _, rest = line.partition(" ")
        entry[key] = unquote(rest)


def clean(s):
    for pattern in PLACEHOLDERS:
        s = pattern.sub(" ", s)
    s = html.unescape(s).replace("%%", "%")
    return " ".join(s.split())


def mostly_letters(s, share=0.6):
    chars = [c for c in s if not c.isspace()]
    letters = sum(1 for c in chars if unicodedata.category(c)[0] in "LM")
    return bool(chars) and letters >= share * len(chars)


def label(locale):
    if locale in SCRIPT_LOCALES:
        return SCRIPT_LOCALES[locale]
    if "_" in locale:
        return None  # regional variant of a base locale
    return locale


def get_wheel(version, cache):
    cache.mkdir(parents=True, exist_ok=True)
    found = sorted(cache.glob(f"[Dd]jango-{version}-py3-none-any.whl"))
    if found:
        return found[0]
    cmd = [sys.executable, "-m", "pip", "download", f"django=={version}", "--no-deps", "--only-binary=:all:",
           "--quiet", "-d", str(cache)]
    print("langid_corpus: " + " ".join(cmd), file=sys.stderr)
    subprocess.run(cmd, check=True)
    found = sorted(cache.glob(f"[Dd]jango-{version}-py3-none-any.whl"))
    if not found:
        raise SystemExit(f"langid_corpus: no Django {version} wheel in {cache}")
    return found[0]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--cap", type=int, default=200)
    p.add_argument("--seed", type=int, default=13)
    p.add_argument("--min-chars", type=int, default=20)
    p.add_argument("--min-sentences", type=int, default=50)
    p.add_argument("--django-version", default="5.2.19")
    p.add_argument("--wheel", help="a Django wheel instead of downloading one")
    p.add_argument("--cache", default=str(ROOT / "data/cache/langid"))
    p.add_argument("--locales", help="comma-separated Django locales to read (default: all)")
    a = p.parse_args()

    wheel = Path(a.wheel) if a.wheel else get_wheel(a.django_version, Path(a.cache))
    wanted = set(a.locales.split(",")) if a.locales else None
    texts = defaultdict(set)
    with zipfile.ZipFile(wheel) as z:
        for name in sorted(z.namelist()):
            m = CATALOGUE.match(name)
            if not m or (wanted and m.group(1) not in wanted):
                continue
            lang = label(m.group(1))
            if lang is None:
                continue
            for ids, strs, fuzzy in po_entries(z.read(name).decode("utf-8")):
                if not ids or not ids[0]:
                    continue  # the header entry
                if lang == "en":
                    candidates = ids
                elif fuzzy:
                    continue
                else:
                    candidates = [s for s in strs if s and s not in ids]
                for s in candidates:
                    s = clean(s)
                    if len(s) >= a.min_chars and mostly_letters(s):
                        texts[lang].add(s)
    where = defaultdict(set)
    for lang, sentences in texts.items():
        for s in sentences:
            where[s].add(lang)
    rng = random.Random(a.seed)
    corpus = {}
    for lang in sorted(texts):
        kept = sorted(s for s in texts[lang] if len(where[s]) == 1)
        if len(kept) > a.cap:
            kept = sorted(rng.sample(kept, a.cap))
        if len(kept) >= a.min_sentences:
            corpus[lang] = kept
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", encoding="utf-8") as f:
        for lang, sentences in corpus.items():
            for s in sentences:
                f.write(f"{lang}\t{s}\n")
    dropped = sorted(set(texts) - set(corpus))
    print(f"langid_corpus: {sum(map(len, corpus.values()))} sentences in {len(corpus)} languages from "
          f"{wheel.name} -> {out}", file=sys.stderr)
    print("  " + " ".join(f"{lang}:{len(s)}" for lang, s in corpus.items()), file=sys.stderr)
    if dropped:
        print(f"  under {a.min_sentences} sentences, left out: " +
              " ".join(f"{lang}:{len([s for s in texts[lang] if len(where[s]) == 1])}" for lang in dropped),
              file=sys.stderr)


if __name__ == "__main__":
    main()
