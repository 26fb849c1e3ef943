#!/usr/bin/env bash
# mtx against CTranslate2 on a random model with NLLB-200-distilled-600M's shapes (d_model 1024, 12 + 12 layers,
# 16 heads, FFN 4096, vocabulary 256,206; no download), saved by transformers, converted by CTranslate2's own
# ct2-transformers-converter and imported by mtx (mtx import --from hf). Both translate the same 100
# test_2016_flickr sentences German -> French (deu_Latn -> fra_Latn, the target code forced first) at beam 4 and
# beam 1, fp32 and int8, on --threads threads, each output held to --length tokens (equal minimum and maximum
# length on both sides), so that the work is the same. Prints a markdown table: generated tokens/s, mtx / CT2,
# batch-1 latency (p50 over --latency sentences), peak RSS, and the mean output length each side produced.
#   scripts/bench/nllb_speed.sh [--small] [--threads 2] [--length 32] [--sentences 100] [--latency 10] [--out DIR]
# --small: d_model 64 and 2 + 2 layers (the same vocabulary): a quick check of the script itself.
# Needs .venv with torch, transformers, sentencepiece, protobuf, safetensors and ctranslate2 (scripts/venv.sh).
# Run nothing else on the machine meanwhile.
set -euo pipefail
cd "$(dirname "$0")/../.."
small="" threads=2 length=32 sentences=100 latency=10 out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --small) small=--small; shift ;;
    --threads) threads=$2; shift 2 ;;
    --length) length=$2; shift 2 ;;
    --sentences) sentences=$2; shift 2 ;;
    --latency) latency=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "nllb_speed.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
py=${MTX_PYTHON:-.venv/bin/python}
mtx=${MTX:-build/bin/mtx}
data=${MTX_DATA_DIR:-data/multi30k}
[ -n "$out" ] || out=$(mktemp -d)
mkdir -p "$out"
echo "nllb_speed: working in $out" >&2

[ -f "$out/hf/model.safetensors" ] || "$py" scripts/bench/nllb_speed.py make --data "$data" --out "$out" $small \
  --sentences "$sentences"
for q in float32 int8; do
  [ -d "$out/ct2-$q" ] || "$(dirname "$py")/ct2-transformers-converter" --model "$out/hf" --output_dir "$out/ct2-$q" \
    --quantization "$q" > "$out/ct2-$q.log" 2>&1
done
[ -f "$out/mtx-fp32.pt" ] || "$mtx" import --from hf "$out/hf" --out "$out/mtx-fp32.pt" 2> "$out/import.log"
[ -f "$out/mtx-int8.pt" ] || "$mtx" quantize --ckpt "$out/mtx-fp32.pt" --out "$out/mtx-int8.pt" 2> "$out/quantize.log"

# One cell: mtx then CTranslate2, same beam and precision; each side's figures as JSON lines in $out/cells.
: > "$out/cells"
for beam in 4 1; do
  for prec in fp32 int8; do
    ct2dir=$out/ct2-$([ "$prec" = fp32 ] && echo float32 || echo int8)
    log=$out/mtx.$prec.b$beam.log
    /usr/bin/time -f "%M" -o "$out/mtx.rss" "$mtx" translate --ckpt "$out/mtx-$prec.pt" --source-lang deu_Latn \
      --target-lang fra_Latn --beam "$beam" --alpha 0 --min-len "$length" --max-len-a 0 \
      --max-len-b "$((length + 1))" --threads "$threads" --input "$out/src.de" --output "$out/mtx.$prec.b$beam.txt" \
      2> "$log"
    head -n "$latency" "$out/src.de" > "$out/latency.de"
    "$mtx" translate --ckpt "$out/mtx-$prec.pt" --source-lang deu_Latn --target-lang fra_Latn --beam "$beam" \
      --alpha 0 --min-len "$length" --max-len-a 0 --max-len-b "$((length + 1))" --threads "$threads" \
      --chunk-lines 1 --input "$out/latency.de" --output /dev/null 2> "$out/mtx.latency.log"
    "$py" - "$log" "$out/mtx.latency.log" "$out/mtx.rss" "$prec" "$beam" "$sentences" >> "$out/cells" <<'EOF'
import json, re, sys
log, lat, rss, prec, beam, n = sys.argv[1:]
text = open(log).read()
m = re.search(r"(\d+) lines in ([0-9.]+) s: [0-9.]+ sentences/s, ([0-9.]+) generated tokens/s", text)
if not m:
    sys.exit("nllb_speed: no rate in " + log + ":\n" + text[-2000:])
lines, seconds, rate = int(m.group(1)), float(m.group(2)), float(m.group(3))
p50 = re.search(r"p50 ([0-9.]+) ms", open(lat).read())
print(json.dumps({"side": "mtx", "prec": prec, "beam": int(beam), "tokens_per_s": rate,
                  "mean_length": rate * seconds / lines - 1, "latency_p50_ms": float(p50.group(1)) if p50 else None,
                  "peak_rss_mb": int(open(rss).read().split()[-1]) / 1024}))
EOF
    "$py" scripts/bench/nllb_speed.py ct2 --model "$ct2dir" --input "$out/src.tokens" \
      --output "$out/ct2.$prec.b$beam.tokens" --beam "$beam" --length "$length" --target-lang fra_Latn \
      --threads "$threads" --latency "$latency" |
      "$py" -c "import json, sys; r = json.loads(sys.stdin.read()); r.update(side='ct2', prec='$prec', beam=$beam); print(json.dumps(r))" \
      >> "$out/cells"
    echo "nllb_speed: beam $beam $prec done" >&2
  done
done

"$py" - "$out/cells" "$(lscpu | sed -n 's/^Model name: *//p')" "$threads" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print(f"\n{sys.argv[2]}, {sys.argv[3]} threads\n")
print("| beam | precision | mtx tokens/s | CT2 tokens/s | mtx / CT2 | mtx batch-1 p50 ms | CT2 batch-1 p50 ms | "
      "mtx peak RSS MB | CT2 peak RSS MB | RSS mtx / CT2 | mean length mtx / CT2 |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for beam in (4, 1):
    for prec in ("fp32", "int8"):
        m = next(r for r in rows if r["side"] == "mtx" and r["beam"] == beam and r["prec"] == prec)
        c = next(r for r in rows if r["side"] == "ct2" and r["beam"] == beam and r["prec"] == prec)
        print(f"| {beam} | {prec} | {m['tokens_per_s']:.1f} | {c['tokens_per_s']:.1f} | "
              f"{m['tokens_per_s'] / c['tokens_per_s']:.2f} | {m['latency_p50_ms'] or 0:.0f} | {c['latency_p50_ms']:.0f} | "
              f"{m['peak_rss_mb']:.0f} | {c['peak_rss_mb']:.0f} | {m['peak_rss_mb'] / c['peak_rss_mb']:.2f} | "
              f"{m['mean_length']:.1f} / {c['mean_length']:.1f} |")
EOF
