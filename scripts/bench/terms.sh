#!/usr/bin/env bash
# Terminology constraints on test_2016_flickr: per line 1-2 content words of the reference that the unconstrained
# translation misses (scripts/bench/terms.py pick, seeded), then the same file translated with them as
# constraints (mtx translate --constraints). Prints a markdown table: term accuracy (terms held as whole words),
# BLEU (mtx eval, sacreBLEU's 13a), translation speed (sentences/s from mtx's log: translation only, no loading;
# the median of --rounds runs, the two sides interleaved) and the constrained run's time against the plain one.
# Then a client's synonym glossary (terms.py's SYNONYMS: Hund -> puppy where the model writes "dog") over the same
# file with --glossary: on the lines that hold a glossary word and whose plain translation holds the model's word,
# the term present, the term and the model's word both present, and BLEU against the references with the model's
# word replaced by the term, next to the plain output with that find-and-replace; time over the whole file. A last
# row gives the same glossary with the model's own words as terms, then that find-and-replace: the search's own
# cost.
#   scripts/bench/terms.sh CKPT [--beam 5] [--threads 2] [--rounds 3] [--seed 1] [--out DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
ckpt=${1:?usage: terms.sh CKPT [--beam 5] [--threads 2] [--rounds 3] [--seed 1] [--out DIR]}
shift
beam=5 threads=2 rounds=3 seed=1 out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --beam) beam=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "terms.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
data=${MTX_DATA_DIR:-data/multi30k}
mtx=${MTX_BINARY:-build/bin/mtx}
work=${out:-$(mktemp -d)}
mkdir -p "$work"
[ -n "$out" ] || trap 'rm -rf "$work"' EXIT
zcat -f "$data/test_2016_flickr.de.gz" > "$work/src.de"
zcat -f "$data/test_2016_flickr.en.gz" > "$work/ref.en"

# translate NAME [flags...]: NAME.en, and its sentences/s appended to NAME.rates
translate() {
  local name=$1
  shift
  OMP_WAIT_POLICY=passive "$mtx" translate --ckpt "$ckpt" --beam "$beam" --threads "$threads" "$@" \
    < "$work/src.de" > "$work/$name.en" 2> "$work/$name.log"
  grep -o '[0-9.]* sentences/s' "$work/$name.log" | tail -1 | cut -d' ' -f1 >> "$work/$name.rates"
}
median() { sort -g "$1" | awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }

rm -f "$work"/*.rates
translate plain
python3 scripts/bench/terms.py pick "$work/ref.en" "$work/plain.en" "$work/terms.jsonl" --seed "$seed"
python3 scripts/bench/terms.py synonyms "$work"
for round in $(seq 1 "$rounds"); do
  [ "$round" -gt 1 ] && translate plain
  translate constrained --constraints "$work/terms.jsonl"
  translate glossary --glossary "$work/synonyms.tsv"
done
translate stemmed --glossary "$work/lemmas.tsv" --glossary-stem german
translate own --glossary "$work/own.tsv"

lines=$(wc -l < "$work/src.de")
with_terms=$(grep -cv '^\[\]$' "$work/terms.jsonl" || true)
n_terms=$(python3 -c 'import json,sys; print(sum(len(json.loads(l)) for l in open(sys.argv[1])))' "$work/terms.jsonl")
bleu() { "$mtx" eval --metric bleu --ref "$work/ref.en" < "$1" 2> /dev/null | grep -o 'BLEU[^=]*= [0-9.]*' | head -1 | awk '{ print $NF }'; }
accuracy() { python3 scripts/bench/terms.py score "$work/terms.jsonl" "$1" | cut -f4; }
plain_rate=$(median "$work/plain.rates")
constrained_rate=$(median "$work/constrained.rates")
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
echo "test_2016_flickr, $lines lines; $with_terms lines with terms, $n_terms terms (seed $seed); beam $beam, $threads threads; $cpu; $(date -u +%F)"
echo
echo "| run | term accuracy % | BLEU | sentences/s (median of $rounds) | time vs unconstrained |"
echo "|---|---|---|---|---|"
echo "| unconstrained | $(accuracy "$work/plain.en") | $(bleu "$work/plain.en") | $plain_rate | 1.00x |"
echo "| --constraints | $(accuracy "$work/constrained.en") | $(bleu "$work/constrained.en") | $constrained_rate | $(awk -v a="$plain_rate" -v b="$constrained_rate" 'BEGIN { printf "%.2fx", a / b }') |"
glossary_rate=$(median "$work/glossary.rates")
echo
echo "Synonym glossary (scripts/bench/terms.py SYNONYMS, $(wc -l < "$work/synonyms.tsv") entries); time over all $lines lines: --glossary $(awk -v a="$plain_rate" -v b="$glossary_rate" 'BEGIN { printf "%.2fx", a / b }') unconstrained ($glossary_rate sentences/s)"
echo
MTX_BINARY=$mtx python3 scripts/bench/terms.py synonyms-score "$work/src.de" "$work/ref.en" "$work/plain.en" \
  "--glossary (forms listed)=$work/glossary.en" "--glossary (lemmas) --glossary-stem german=$work/stemmed.en" \
  "--glossary of the model's own words + find-and-replace=$work/own.en"
