#!/usr/bin/env bash
# The text layer's benchmark, three markdown tables on stdout (the CPU, date and commit at the top):
#   1. paragraphs of 2-4 test_2016_flickr.de sentences through `mtx translate --format text`, against the same
#      sentences one per line (--format lines): agreement, separators, BLEU, time (text / lines, target <= 1.03);
#   2. one word of each of --markup sentences in <b>, <i> or <a href>, as <p> lines through --format html, against
#      the plain sentences: tags kept, nesting, text with tags stripped, BLEU, time;
#   3. `mtx detect` (CLD2) on data/cache/langid/corpus.tsv (built by langid_corpus.py when missing) beside
#      langdetect and lingua (langid_peers.py): every language, those all three know, ~28 widely used ones.
#   scripts/bench/text.sh MODEL.pt [--threads 2] [--paragraphs 150] [--markup 300] [--rounds 3] [--beam N]
#       [--tables 1,2,3] [--langid-cap N]
# Env: MTX_BUILD_DIR (build), MTX_DATA_DIR (data/multi30k, else ../shared/data/multi30k), PY (.venv/bin/python,
# with sacrebleu, langdetect, lingua-language-detector), MTX_LANGID_CORPUS (data/cache/langid/corpus.tsv).
# --langid-cap N keeps N sentences a language (a quick try). Progress goes to stderr. Run nothing else meanwhile.
# The logic is in scripts/bench/text_bench.py; intermediate files go to a temporary folder, removed at exit.
set -euo pipefail
caller=$PWD
here() { case "$1" in /*) printf '%s\n' "$1" ;; *) printf '%s\n' "$caller/$1" ;; esac; }
if [ $# -lt 1 ] || [ "${1#-}" != "$1" ]; then
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0" >&2
  exit 2
fi
model=$(here "$1"); shift
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --threads|--paragraphs|--markup|--rounds|--beam|--tables|--langid-cap|--seed)
      [ $# -ge 2 ] || { echo "text.sh: $1 needs a value" >&2; exit 2; }
      args+=("$1" "$2"); shift 2 ;;
    *) echo "text.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
# Paths given in the environment are the caller's; the rest are the repository's.
[ -n "${MTX_DATA_DIR:-}" ] && MTX_DATA_DIR=$(here "$MTX_DATA_DIR")
[ -n "${MTX_BUILD_DIR:-}" ] && MTX_BUILD_DIR=$(here "$MTX_BUILD_DIR")
[ -n "${MTX_LANGID_CORPUS:-}" ] && MTX_LANGID_CORPUS=$(here "$MTX_LANGID_CORPUS")
case "${PY:-}" in */*) PY=$(here "$PY") ;; esac
cd "$(dirname "$0")/../.."
build=${MTX_BUILD_DIR:-build}
py=${PY:-.venv/bin/python}
corpus=${MTX_LANGID_CORPUS:-data/cache/langid/corpus.tsv}
if [ -n "${MTX_DATA_DIR:-}" ]; then
  data=$MTX_DATA_DIR
elif [ -f data/multi30k/test_2016_flickr.de.gz ]; then
  data=data/multi30k
else
  data=../shared/data/multi30k
fi
for f in "$model" "$build/bin/mtx" "$data/test_2016_flickr.de.gz" "$data/test_2016_flickr.en.gz"; do
  [ -f "$f" ] || { echo "text.sh: no such file: $f" >&2; exit 1; }
done
command -v "$py" > /dev/null || { echo "text.sh: no Python at $py (set PY)" >&2; exit 1; }
tables=1,2,3
for ((i = 0; i < ${#args[@]}; i += 2)); do [ "${args[i]}" = --tables ] && tables=${args[i+1]}; done
if [[ ,$tables, == *,3,* ]] && [ ! -s "$corpus" ]; then
  echo "text.sh: building $corpus" >&2
  "$py" scripts/bench/langid_corpus.py --out "$corpus"
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$py" scripts/bench/text_bench.py --mtx "$build/bin/mtx" --model "$model" --data "$data" --work "$work" \
  --langid-corpus "$corpus" ${args[@]+"${args[@]}"}
