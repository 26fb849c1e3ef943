#!/usr/bin/env bash
# Documents as a user brings them, translated by a trained model through `mtx translate --input F --output O` and
# through a live `mtx serve`'s /translate_file (LibreTranslate's way: upload, then GET translatedFileUrl):
# the corpus PyPI's writers make (tests/documents/corpus.py: python-docx, python-pptx, odfpy, pysrt), each output
# read back by the same PyPI readers with the source's structure, nothing left untranslated and every formatting
# run kept (corpus.py check --mode model), and every office and HTML output opened by LibreOffice (headless
# soffice converts it to PDF without error).
#   scripts/checks/documents.sh MTX_BINARY CKPT      (env PY: the .venv's python)
# Exits 0 when all pass, 1 on a failure, 77 (skip) without the Python packages or LibreOffice, unless
# MTX_REQUIRE_ORACLES=1 (then those fail).
set -euo pipefail
say() { echo "documents: $*"; }
fail() { echo "documents: FAIL: $*" >&2; exit 1; }
[ $# -eq 2 ] || { echo "usage: $0 MTX_BINARY CKPT" >&2; exit 2; }
mtx=$(realpath "$1") ckpt=$(realpath "$2")
cd "$(dirname "$0")/../.."
py=${PY:-.venv/bin/python}
missing() {
  [ "${MTX_REQUIRE_ORACLES:-}" = 1 ] && fail "$1"
  echo "documents: SKIP: $1" >&2
  exit 77
}
"$py" -c 'import docx, pptx, odf, pysrt, lxml' 2>/dev/null ||
  missing "no python-docx, python-pptx, odfpy, pysrt in $py (scripts/test.sh installs them)"
command -v soffice >/dev/null || missing "no LibreOffice (apt-get install libreoffice-writer-nogui libreoffice-impress-nogui)"
tmp=$(mktemp -d)
server=""
cleanup() {
  [ -z "$server" ] || kill "$server" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
"$py" tests/documents/corpus.py make "$tmp/in"
mkdir -p "$tmp/cli" "$tmp/serve" "$tmp/pdf"
for f in "$tmp"/in/*; do
  name=$(basename "$f")
  "$mtx" --log-level warn translate --ckpt "$ckpt" --input "$f" --output "$tmp/cli/$name" --threads 1 ||
    fail "mtx translate --input $name"
  "$py" tests/documents/corpus.py check "$f" "$tmp/cli/$name" --mode model || fail "mtx translate's $name"
done
say "mtx translate: $(ls "$tmp/in" | wc -l) files read back with their structure and runs, nothing untranslated"

# A client's glossary over the same files: every paragraph that holds a glossary word holds its term, and the
# files keep their structure and runs (LibreOffice opens the office ones below).
mkdir -p "$tmp/glossary"
printf 'Mann|Männer\tgentleman|gentlemen\nHund|Hunde\tpuppy|puppies\nFrau|Frauen\tlady|ladies\n' > "$tmp/glossary.tsv"
for f in "$tmp"/in/*; do
  name=$(basename "$f")
  "$mtx" --log-level warn translate --ckpt "$ckpt" --glossary "$tmp/glossary.tsv" --input "$f" \
    --output "$tmp/glossary/$name" --threads 1 || fail "mtx translate --glossary --input $name"
  "$py" tests/documents/corpus.py check "$f" "$tmp/glossary/$name" --mode model || fail "--glossary's $name"
  "$py" tests/documents/corpus.py terms "$f" "$tmp/glossary/$name" "$tmp/glossary.tsv" || fail "--glossary's $name"
done
say "mtx translate --glossary: every glossary word's term in its paragraph, in all $(ls "$tmp/in" | wc -l) files"

# The same files through mtx serve's /translate_file, as LibreTranslate's clients post them.
"$mtx" serve --ckpt "$ckpt" --port 0 --threads 1 > "$tmp/serve.log" 2>&1 &  # prints "serving on http://HOST:PORT"
server=$!
url=""
for _ in $(seq 900); do  # 180 s
  kill -0 "$server" 2>/dev/null || fail "mtx serve exited: $(tail -5 "$tmp/serve.log")"
  url=$(grep -o 'serving on http://[^ ]*' "$tmp/serve.log" | head -1 | sed 's/^serving on //') || true
  [ -n "$url" ] && "$py" -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1] + "/health", timeout=2)' \
    "$url" 2>/dev/null && break
  sleep 0.2
done
[ -n "$url" ] || fail "mtx serve printed no address in 180 s: $(tail -5 "$tmp/serve.log")"
"$py" - "$url" "$tmp/in" "$tmp/serve" <<'PY' || fail "/translate_file"
import os, sys, requests
url, src, out = sys.argv[1:]
for name in sorted(os.listdir(src)):
    with open(os.path.join(src, name), "rb") as f:
        r = requests.post(f"{url}/translate_file", files={"file": (name, f)},
                          data={"source": "auto", "target": "en"}, timeout=120)
    r.raise_for_status()
    got = requests.get(r.json()["translatedFileUrl"], timeout=60)
    got.raise_for_status()
    open(os.path.join(out, name), "wb").write(got.content)
PY
for f in "$tmp"/in/*; do
  name=$(basename "$f")
  "$py" tests/documents/corpus.py check "$f" "$tmp/serve/$name" --mode model || fail "/translate_file's $name"
  # One translation, whichever front end: the same bytes (the CLI reads a .txt line by line, the server as text).
  [ "${name##*.}" = txt ] || cmp -s "$tmp/cli/$name" "$tmp/serve/$name" ||
    fail "$name: /translate_file's bytes differ from mtx translate's"
done
say "mtx serve /translate_file: every file downloaded, the same bytes as mtx translate's"

# LibreOffice opens every office and HTML output: each converts to a PDF.
outputs=()
for f in "$tmp"/cli/*.docx "$tmp"/cli/*.pptx "$tmp"/cli/*.odt "$tmp"/cli/*.odp "$tmp"/cli/*.html; do outputs+=("$f"); done
mkdir -p "$tmp/glossary-pdf"
for f in "$tmp"/glossary/*.docx "$tmp"/glossary/*.odt; do  # other names than the cli's: their PDFs do not clash
  cp "$f" "$tmp/glossary-pdf/glossary-$(basename "$f")"
  outputs+=("$tmp/glossary-pdf/glossary-$(basename "$f")")
done
HOME=$tmp soffice -env:UserInstallation="file://$tmp/lo-profile" --headless --convert-to pdf --outdir "$tmp/pdf" \
  "${outputs[@]}" > "$tmp/soffice.log" 2>&1 || fail "soffice: $(tail -3 "$tmp/soffice.log")"
for f in "${outputs[@]}"; do
  pdf=$tmp/pdf/$(basename "${f%.*}").pdf
  [ -s "$pdf" ] || fail "LibreOffice could not open $(basename "$f"): $(grep -i error "$tmp/soffice.log" | head -3)"
done
say "LibreOffice converted all ${#outputs[@]} office and HTML outputs"
