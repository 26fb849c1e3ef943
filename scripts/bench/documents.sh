#!/usr/bin/env bash
# The documents benchmark, one markdown table on stdout (the CPU, date and commit at the top): test_2016_flickr.de
# as .docx, .pptx, .odt, .srt and .md documents (4 sentences a paragraph, a bold, an italic and a link word inside
# each), translated by `mtx translate --input F --output O` against the same sentences one per line: BLEU per
# paragraph (target: within 0.5), time against the plain lines plus the zip archive's reading and writing
# (target: <= 1.2), formatting runs kept and segments left untranslated. With --argos, argos-translate-files
# (LibreTranslate's file translation) runs on the same files with mtx's translations plugged in underneath, so
# only the formatting method differs; it is installed into data/cache/argos-venv (its own venv: its pins clash).
#   scripts/bench/documents.sh MODEL.pt [--threads 2] [--paragraphs 250] [--rounds 3] [--formats docx,pptx,odt,srt,md]
#       [--argos]
# Env: MTX_BUILD_DIR (build), MTX_DATA_DIR (data/multi30k, else ../shared/data/multi30k), PY (.venv/bin/python,
# with python-docx, python-pptx, odfpy, pysrt, lxml). Run nothing else meanwhile.
set -euo pipefail
caller=$PWD
here() { case "$1" in /*) printf '%s\n' "$1" ;; *) printf '%s\n' "$caller/$1" ;; esac; }
if [ $# -lt 1 ] || [ "${1#-}" != "$1" ]; then
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0" >&2
  exit 2
fi
model=$(here "$1"); shift
args=() argos=0
while [ $# -gt 0 ]; do
  case "$1" in
    --threads|--paragraphs|--rounds|--formats)
      [ $# -ge 2 ] || { echo "documents.sh: $1 needs a value" >&2; exit 2; }
      args+=("$1" "$2"); shift 2 ;;
    --argos) argos=1; shift ;;
    *) echo "documents.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -n "${MTX_DATA_DIR:-}" ] && MTX_DATA_DIR=$(here "$MTX_DATA_DIR")
[ -n "${MTX_BUILD_DIR:-}" ] && MTX_BUILD_DIR=$(here "$MTX_BUILD_DIR")
case "${PY:-}" in */*) PY=$(here "$PY") ;; esac
cd "$(dirname "$0")/../.."
build=${MTX_BUILD_DIR:-build}
py=${PY:-.venv/bin/python}
if [ -n "${MTX_DATA_DIR:-}" ]; then
  data=$MTX_DATA_DIR
elif [ -f data/multi30k/test_2016_flickr.de.gz ]; then
  data=data/multi30k
else
  data=../shared/data/multi30k
fi
"$py" -c 'import docx, pptx, odf, pysrt, lxml' ||
  { echo "documents.sh: $py lacks python-docx, python-pptx, odfpy, pysrt (scripts/venv.sh)" >&2; exit 1; }
if [ "$argos" = 1 ]; then
  venv=data/cache/argos-venv
  if ! "$venv/bin/python" -c 'import argostranslatefiles.argostranslatefiles' 2>/dev/null; then
    echo "documents.sh: installing argos-translate-files into $venv" >&2
    python3 -m venv "$venv"
    # Its own requirements pull stanza and PyTorch for sentence splitting, which file translation does not use.
    "$venv/bin/pip" install -q --no-deps argos-translate-files==1.4.4 argos-translate-lt==1.12.1
    "$venv/bin/pip" install -q beautifulsoup4==4.9.3 lxml pysrt packaging ctranslate2==4.8.5 sentencepiece \
      'sacremoses<0.2' PyMuPDF minisbd
  fi
  args+=(--argos-python "$PWD/$venv/bin/python")
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) cores; $(date -u +%F); $(git rev-parse --short HEAD)"
echo
"$py" scripts/bench/documents_bench.py --mtx "$build/bin/mtx" --model "$model" --data "$data" --work "$work" \
  ${args[@]+"${args[@]}"}
