#!/usr/bin/env bash
# mtx against CTranslate2 on the same weights: the checkpoint exported (mtx export --format ct2, float32 and
# int8) and quantized (mtx quantize), then each of mtx fp32, mtx int8, CTranslate2 fp32 and CTranslate2 int8
# translates test_2016_flickr (1000 lines) with the same beam (1 and 5), length penalty (the checkpoint's
# alpha, GNMT form on both), length limit (200 tokens), threads and batch budget (tokens, padding
# included). Prints a markdown table: generated tokens/s, sentences/s, latency at batch 1 (p50/p95 over
# --latency sentences, beam 5 only), peak RSS, BLEU (sacreBLEU-compatible `mtx eval`, cased 13a), and how many
# lines differ from the other toolkit's output at the same precision.
#   scripts/bench/ct2_compare.sh CKPT [--threads 2] [--batch-tokens 4096] [--latency 200] [--rounds 3] [--workers best]
#                                [--isa native|avx2] [--out DIR]
# --isa avx2: both sides capped at AVX2 (with FMA) on a wider CPU, as on a CPU without AVX-512: mtx's kernels
# (MTX_CPU_ISA=avx2) and its BLAS (OPENBLAS_CORETYPE=Haswell; MKL_ENABLE_INSTRUCTIONS=AVX2 for the 2.x build's
# MKL; DNNL_MAX_CPU_ISA=AVX2 for LibTorch's oneDNN int8), CTranslate2 (CT2_FORCE_CPU_ISA=AVX2, and the same MKL and
# oneDNN caps). The table's header names what each side ran.
# --workers N: N translations at once on both sides, threads / N threads each (mtx --workers; CTranslate2's
# inter_threads, with batches of batch-tokens / N so that both hold the same tokens in flight); --workers best
# (the default) runs each side with 1 and with `threads` translations at once and reports each side's faster
# setting (the table names it), so that each side is at its best. The latency column is measured with one
# translation on all threads either way.
# Timing covers translation only (mtx: tokenizing, searching, detokenizing; CTranslate2: searching, on pieces
# that spm_encode made beforehand; neither: loading). Every throughput run is repeated --rounds times, the sides
# interleaved, and the median is reported (this machine kind's speed drifts by tens of percent from minute to
# minute). Run nothing else on the machine meanwhile. MTX=build-torch2/bin/mtx compares the 2.x build.
set -euo pipefail
cd "$(dirname "$0")/../.."
ckpt=${1:?usage: ct2_compare.sh CKPT [--threads N] [--batch-tokens N] [--latency N] [--out DIR]}
shift
threads=2 batch_tokens=4096 latency=200 rounds=3 workers=best out="" isa=native
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) threads=$2; shift 2 ;;
    --batch-tokens) batch_tokens=$2; shift 2 ;;
    --latency) latency=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --workers) workers=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --isa) isa=$2; shift 2 ;;
    *) echo "ct2_compare.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
case "$isa" in
  native) ;;
  avx2) export MTX_CPU_ISA=avx2 OPENBLAS_CORETYPE=Haswell MKL_ENABLE_INSTRUCTIONS=AVX2 DNNL_MAX_CPU_ISA=AVX2 \
               ONEDNN_MAX_CPU_ISA=AVX2 CT2_FORCE_CPU_ISA=AVX2 ;;
  *) echo "ct2_compare.sh: --isa is native or avx2, not '$isa'" >&2; exit 2 ;;
esac
worker_settings=$workers
[ "$workers" = best ] && worker_settings=$(printf '%s\n' 1 "$threads" | sort -un | tr '\n' ' ')
mtx=${MTX:-build/bin/mtx}
data=${MTX_DATA_DIR:-data/multi30k}
[ -x "$mtx" ] || { echo "ct2_compare.sh: $mtx not built (scripts/build.sh)" >&2; exit 1; }
MTX_EXTRA_PACKAGES="sentencepiece" scripts/setup.sh >/dev/null   # spm_encode / spm_decode
scripts/venv.sh ctranslate2==4.8.5 safetensors numpy >/dev/null
py=.venv/bin/python
[ -n "$out" ] || out=$(mktemp -d)
mkdir -p "$out"
alpha=$("$mtx" info --ckpt "$ckpt" 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["config"]["decode"]["alpha"])')
zcat -f "$data/test_2016_flickr.de.gz" > "$out/test.de"
zcat -f "$data/test_2016_flickr.en.gz" > "$out/test.en"
head -n "$latency" "$out/test.de" > "$out/latency.de"

echo "exporting and quantizing $ckpt ..." >&2
"$mtx" --log-level warn export --format ct2 --python "$py" --ckpt "$ckpt" --out "$out/ct2-fp32" --force
"$mtx" --log-level warn export --format ct2 --python "$py" --ckpt "$ckpt" --out "$out/ct2-int8" --quantization int8 --force
"$mtx" --log-level warn quantize --ckpt "$ckpt" --out "$out/mtx-int8.pt"
spm=$out/ct2-fp32/source.spm.model
tgt_spm=$spm; [ -f "$out/ct2-fp32/target.spm.model" ] && tgt_spm=$out/ct2-fp32/target.spm.model
spm_encode --model="$spm" --output_format=piece < "$out/test.de" > "$out/test.pieces"
head -n "$latency" "$out/test.pieces" > "$out/latency.pieces"

for round in $(seq 1 "$rounds"); do
  for beam in 1 5; do
    for prec in fp32 int8; do
      for w in $worker_settings; do
        name=mtx-$prec-b$beam-w$w
        model=$ckpt; [ $prec = int8 ] && model=$out/mtx-int8.pt
        echo "round $round: $name ..." >&2
        /usr/bin/time -f "%M" -o "$out/$name.r$round.rss" "$mtx" translate --ckpt "$model" --beam "$beam" --alpha "$alpha" \
          --max-len-a 0 --max-len-b 200 --threads "$threads" --batch-tokens "$batch_tokens" --workers "$w" \
          --input "$out/test.de" --output "$out/$name.en" 2> "$out/$name.r$round.log"
        name=ct2-$prec-b$beam-w$w
        echo "round $round: $name ..." >&2
        /usr/bin/time -f "%M" -o "$out/$name.r$round.rss" "$py" scripts/bench/ct2_translate.py --model "$out/ct2-$prec" \
          --input "$out/test.pieces" --output "$out/$name.pieces" --beam "$beam" --length-penalty "$alpha" --max-length 200 \
          --threads "$threads" --batch-tokens "$batch_tokens" --workers "$w" --latency 0 > "$out/$name.r$round.json" 2> "$out/$name.r$round.log"
        spm_decode --model="$tgt_spm" --input_format=piece < "$out/$name.pieces" > "$out/$name.en"
      done
      # Latency at batch 1 (beam 5): one translation on all threads, every round, the sides interleaved.
      if [ "$beam" = 5 ]; then
        model=$ckpt; [ $prec = int8 ] && model=$out/mtx-int8.pt
        "$mtx" translate --ckpt "$model" --beam 5 --alpha "$alpha" --max-len-a 0 --max-len-b 200 --threads "$threads" \
          --chunk-lines 1 --input "$out/latency.de" --output /dev/null 2> "$out/mtx-$prec-b5.latency.r$round.log"
        "$py" scripts/bench/ct2_translate.py --model "$out/ct2-$prec" --input "$out/latency.pieces" \
          --output /dev/null --beam 5 --length-penalty "$alpha" --max-length 200 --threads "$threads" \
          --batch-tokens "$batch_tokens" --latency "$latency" > "$out/ct2-$prec-b5.latency.r$round.json" 2> /dev/null
      fi
    done
  done
done
for f in "$out"/*-b[15]-w*.en; do
  "$mtx" --log-level warn eval --metric bleu --ref "$out/test.en" --json < "$f" > "${f%.en}.bleu.json"
done

# What each side ran on: the CPU, mtx's BLAS (and OpenBLAS kernels), CTranslate2's GEMM backends (its verbose log).
cpu=$(grep -m1 "model name" /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
blas=$("$mtx" --version 2>/dev/null | sed -n 's/^BLAS: //p' | sed 's/ (\/.*//')
blas="$blas; $("$mtx" --version 2>/dev/null | sed -n 's/^\(CPU inference: .*\|CPU ISA: .*\)$/\1/p' | tr '\n' ';' | sed 's/;$//')"
ct2_backend=$(CT2_VERBOSE=1 "$py" -c "import ctranslate2; ctranslate2.Translator('$out/ct2-fp32', device='cpu')" 2>&1 |
  sed -n 's/.*\(GEMM[_A-Z0-9]* backend: [^]]*\|[A-Za-z ]*ISA: [^]]*\).*/\1/p' | tr '\n' ';' | sed 's/;$//')
python3 - "$out" "$threads" "$batch_tokens" "$latency" "$alpha" "$rounds" "$worker_settings" "$("$mtx" --version | head -1)" "$("$py" -c 'import ctranslate2; print(ctranslate2.__version__)')" "$cpu" "$blas" "$ct2_backend" <<'PY' | tee "$out/table.md"
import json, re, sys
import statistics
out, threads, batch_tokens, latency, alpha, rounds, workers, mtx_version, ct2_version, cpu, blas, ct2_backend = sys.argv[1:]
rounds = int(rounds)
def median_of(values):
    return statistics.median(values) if values else None

def reported(stem, pattern, keys):
    """Two figures one run reported: from mtx's log (the pattern's two groups) or CTranslate2's JSON line (keys)."""
    if stem.startswith("mtx"):
        m = re.search(pattern, open(f"{out}/{stem}.log").read())
        return float(m.group(1)), float(m.group(2))
    j = json.loads(open(f"{out}/{stem}.json").read().strip().splitlines()[-1])
    return j[keys[0]], j[keys[1]]

def run(name):
    """One worker setting of one side: median tokens/s over the rounds, peak RSS, BLEU, output lines."""
    r = {"rss": max(int(open(f"{out}/{name}.r{i}.rss").read().split()[-1]) for i in range(1, rounds + 1)) / 1024,
         "bleu": json.loads(open(f"{out}/{name}.bleu.json").readline())["score"],
         "lines": open(f"{out}/{name}.en", encoding="utf-8").read().splitlines()}
    sps, tps = zip(*(reported(f"{name}.r{i}", r"([\d.]+) sentences/s, (\d+) generated tokens/s",
                              ("sentences_per_s", "tokens_per_s")) for i in range(1, rounds + 1)))
    r.update(tps=statistics.median(tps), sps=statistics.median(sps), spread=(min(tps), max(tps)))
    return r

def side(prefix):
    """A side at its best: the worker setting with the highest median tokens/s; latency (beam 5) as the median
    over the rounds of each round's p50 and p95."""
    best = max(((w, run(f"{prefix}-w{w}")) for w in workers.split()), key=lambda wr: wr[1]["tps"])
    r = dict(best[1], workers=best[0])
    p50, p95 = [], []
    for i in range(1, rounds + 1):
        try:
            a, b = reported(f"{prefix}.latency.r{i}", r"p50 ([\d.]+) ms, p95 ([\d.]+) ms",
                            ("latency_p50_ms", "latency_p95_ms"))
            p50.append(a); p95.append(b)
        except (FileNotFoundError, AttributeError, KeyError, IndexError):
            pass
    r.update(p50=median_of(p50), p95=median_of(p95))
    return r

how = (f"{threads} threads, each side at its best of {' and '.join(workers.split())} translations at once "
       f"(mtx --workers; CTranslate2 inter_threads)" if len(workers.split()) > 1 else
       f"{threads} threads as {workers} translations at once (mtx --workers {workers}; CTranslate2 inter_threads {workers})")
print(f"test_2016_flickr ({len(open(f'{out}/test.de').read().splitlines())} lines), {how}, batches of "
      f"{batch_tokens} tokens, length penalty {alpha} (GNMT), at most 200 tokens; {mtx_version}, CTranslate2 {ct2_version}; "
      f"median of {rounds} interleaved rounds (min-max in brackets); latency: median over the rounds of {latency} "
      f"sentences one at a time")
print()
print(f"CPU: {cpu}; mtx's BLAS: {blas}; CTranslate2: {ct2_backend or 'backend not reported'}")
print()
print("| beam | weights | side | translations at once | generated tok/s (min-max) | sentences/s | mtx / CT2 tok/s | latency p50 / p95 ms (batch 1) | mtx / CT2 p50 | peak RSS MiB | BLEU | lines differing from the other side |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for beam in (1, 5):
    for prec in ("fp32", "int8"):
        m, c = side(f"mtx-{prec}-b{beam}"), side(f"ct2-{prec}-b{beam}")
        differ = sum(a != b for a, b in zip(m["lines"], c["lines"]))
        for label, r in (("mtx", m), ("CTranslate2", c)):
            lat = f"{r['p50']:.1f} / {r['p95']:.1f}" if r.get("p50") is not None else "-"
            ratio = f"{m['tps'] / c['tps']:.2f}x" if label == "mtx" else ""
            lat_ratio = (f"{m['p50'] / c['p50']:.2f}x" if label == "mtx" and m.get("p50") and c.get("p50") else "")
            print(f"| {beam} | {prec} | {label} | {r['workers']} | {r['tps']:.0f} ({r['spread'][0]:.0f}-{r['spread'][1]:.0f}) | "
                  f"{r['sps']:.1f} | {ratio} | {lat} | {lat_ratio} | {r['rss']:.0f} | {r['bleu']:.2f} | {differ if label == 'mtx' else ''} |")
PY
