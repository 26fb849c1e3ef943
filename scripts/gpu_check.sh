#!/usr/bin/env bash
# mtx on a GPU machine in one command: build against that machine's PyTorch, run the CUDA tests, train
# configs/base.json briefly with bf16, translate the test set, score it, print seconds per epoch and tokens/s.
#
#   scripts/gpu_check.sh --prepare   here, where the package registries are: downloads the Debian libraries
#                                    mtx builds with (.deb files) into .gpu/debs and copies Multi30k into
#                                    .gpu/data (git-ignored; about 5 MB to carry to the GPU machine)
#   scripts/gpu_check.sh             on the GPU machine (PyTorch with CUDA, CMake, nvcc; no registry needed):
#                                    unpacks the .debs with dpkg -x into .gpu/root, builds into build-gpu/, ...
#   scripts/gpu_check.sh --dry-run   here: every step of the GPU run that needs no GPU, against .venv's
#                                    torch (scripts/setup.sh --torch pip), on the CPU with configs/tiny.json
# Settings: MTX_GPU_PYTHON (the python whose torch to build against; default python3), MTX_GPU_EPOCHS
# (default 2), MTX_GPU_CONFIG (default configs/base.json), MTX_GPU_STEPS (which steps run after the build, in
# this order; default "tests train"):
#   tests   the Cuda.* and Device.* tests
#   suite   the rest of mtx_tests (long: every CPU test)
#   train   MTX_GPU_CONFIG for MTX_GPU_EPOCHS epochs with bf16, translate test_2016_flickr, score it
#   bench   scripts/bench/train_speed_gpu.sh: mtx against torch.nn.Transformer on this card, fp32 and bf16
#           (MTX_GPU_BENCH_UPDATES, default 110)
#   recipe  MTX_GPU_CONFIG for MTX_GPU_RECIPE_EPOCHS (default 20) epochs, the checkpoints of epochs
#           MTX_GPU_SCORE_FROM (default 1), then every MTX_GPU_SCORE_EVERY (default 1) scored on test_2016_flickr
#           at the config's beam: seconds per epoch, BLEU by epoch, the first scored epoch whose BLEU passes
#           MTX_GPU_TARGET_BLEU (default 36.5)
# MTX_GPU_BF16=0 trains (train, recipe) in fp32 instead of with bf16 autocast.
set -euo pipefail
cd "$(dirname "$0")/.."
gpu=.gpu
mode=run
case "${1:-}" in
  --prepare) mode=prepare ;;
  --dry-run) mode=dry-run ;;
  "") ;;
  *) echo "usage: $0 [--prepare | --dry-run]" >&2; exit 2 ;;
esac

# What the build needs beyond torch, CMake and a compiler: the packages scripts/setup.sh installs, as files.
debs=(libsentencepiece-dev libsentencepiece0 libcli11-dev libspdlog-dev libspdlog1.10 libfmt-dev libfmt9
      nlohmann-json3-dev libgtest-dev libutf8proc-dev libutf8proc2 libtcmalloc-minimal4 zlib1g-dev libgloo-dev
      libminizip-dev libminizip1 libyaml-cpp-dev libyaml-cpp0.7 libgumbo-dev libgumbo1 libicu-dev libicu72
      libcld2-dev libcld2-0 libpugixml-dev libpugixml1v5
      libcmark-gfm-dev libcmark-gfm0.29.0.gfm.6 libcmark-gfm-extensions-dev libcmark-gfm-extensions0.29.0.gfm.6
      libstemmer-dev libstemmer0d)

if [ "$mode" = prepare ]; then
  mkdir -p "$gpu/debs" "$gpu/data"
  rm -f "$gpu/debs"/*.deb
  if ! (cd "$gpu/debs" && apt-get download -q "${debs[@]}" >/dev/null 2>&1); then
    apt-get update -qq   # package lists may be missing on a fresh machine
    (cd "$gpu/debs" && apt-get download -q "${debs[@]}" >/dev/null)
  fi
  mirror=${MTX_DATA_DIR:-data/multi30k}
  [ -f "$mirror/train.de.gz" ] || mirror=../shared/data/multi30k
  scripts/get_multi30k.sh "$gpu/data/multi30k" --mirror "$mirror" >/dev/null
  echo "gpu_check: prepared $(ls "$gpu/debs" | wc -l) .deb files and Multi30k in $gpu ($(du -sh "$gpu" | cut -f1));" \
       "carry '$gpu' and run scripts/gpu_check.sh there"
  exit 0
fi

[ -d "$gpu/debs" ] && [ -d "$gpu/data/multi30k" ] || { echo "gpu_check: run scripts/gpu_check.sh --prepare first" >&2; exit 1; }
if [ "$mode" = dry-run ]; then
  python=${MTX_GPU_PYTHON:-.venv/bin/python}
  device=cpu
  config=${MTX_GPU_CONFIG:-configs/tiny.json}
  epochs=${MTX_GPU_EPOCHS:-1}
  build=${MTX_BUILD_DIR:-build-gpu-dry}
else
  python=${MTX_GPU_PYTHON:-python3}
  device=cuda
  config=${MTX_GPU_CONFIG:-configs/base.json}
  epochs=${MTX_GPU_EPOCHS:-2}
  build=${MTX_BUILD_DIR:-build-gpu}
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
fi
step() { echo "== gpu_check: $*" >&2; }

step "unpacking ${#debs[@]} Debian packages into $gpu/root"
root=$PWD/$gpu/root
rm -rf "$root"
for f in "$gpu"/debs/*.deb; do dpkg -x "$f" "$root"; done
libdir=$root/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

torch_prefix=$("$python" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')
step "building against $("$python" -c 'import torch; print("PyTorch", torch.__version__, "CUDA", torch.version.cuda)') into $build"
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
t0=$(date +%s)
mkdir -p "$build"
cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DMTX_USE_CCACHE=OFF \
  -DCMAKE_PREFIX_PATH="$torch_prefix;$root/usr" >"$build/configure.log" 2>&1 ||
  { tail -n 30 "$build/configure.log" >&2; exit 1; }
cmake --build "$build" -j "$(nproc)" >"$build/build.log" 2>&1 || { grep -m 20 -B2 -A8 "error" "$build/build.log" >&2; exit 1; }
build_s=$(($(date +%s) - t0))
mtx=$build/bin/mtx
"$mtx" --version

export MTX_DATA_DIR=$PWD/$gpu/data/multi30k
steps=" ${MTX_GPU_STEPS:-tests train} "
bf16=false
[ "$device" = cuda ] && [ "${MTX_GPU_BF16:-1}" = 1 ] && bf16=true
wants() { [[ "$steps" == *" $1 "* ]]; }

if wants tests; then
  step "CUDA tests (skipped without a device), each in a process of its own: a crash names its test"
  failed=()
  for t in $("$build/bin/mtx_tests" --gtest_list_tests --gtest_filter='Cuda.*:Device.*' |
             awk '/^[^ ]/ {suite = $1} /^  / {print suite $1}'); do
    rc=0
    "$build/bin/mtx_tests" --gtest_filter="$t" --gtest_brief=1 > "$gpu/test.log" 2>&1 || rc=$?
    grep -v '\[info\]' "$gpu/test.log" | tail -n 8
    echo "gpu_check: $t exit $rc"
    [ "$rc" = 0 ] || failed+=("$t")
  done
  [ ${#failed[@]} = 0 ] || { echo "gpu_check: failed: ${failed[*]}" >&2; exit 1; }
fi
if wants suite; then
  step "the rest of the suite"
  "$build/bin/mtx_tests" --gtest_filter='-Cuda.*:Device.*' --gtest_brief=1 2>&1 | tail -n 3
fi
if wants bench; then
  step "training speed against torch.nn.Transformer on $device"
  MTX_BENCH_DEVICE=$device MTX_CACHE_DIR=$PWD/$gpu/cache scripts/bench/train_speed_gpu.sh "$mtx" "$python" \
    "$config" "${MTX_GPU_BENCH_UPDATES:-110}" 2
fi
if wants recipe; then
  recipe_epochs=${MTX_GPU_RECIPE_EPOCHS:-20}
  run=$gpu/runs/$(basename "$config" .json)-$device-recipe
  rm -rf "$run"
  step "the full recipe: $config for $recipe_epochs epochs on $device (bf16 $bf16), scored on test_2016_flickr"
  "$mtx" --log-level warn train --config "$config" --out "$run" --set data.dir="$MTX_DATA_DIR" \
    --set data.cache_dir="$gpu/cache" --set train.device="$device" --set train.bf16="$bf16" \
    --set train.max_epochs="$recipe_epochs" --set train.keep_last="$recipe_epochs"
  zcat "$MTX_DATA_DIR/test_2016_flickr.de.gz" > "$run/test.de"
  zcat "$MTX_DATA_DIR/test_2016_flickr.en.gz" > "$run/test.en"
  epoch=0
  for name in $(ls "$run" | grep '^step-[0-9]*\.pt$' | sort -t- -k2 -n); do
    ckpt=$run/$name
    epoch=$((epoch + 1))
    [ "$epoch" -ge "${MTX_GPU_SCORE_FROM:-1}" ] && [ $(((epoch - ${MTX_GPU_SCORE_FROM:-1}) % ${MTX_GPU_SCORE_EVERY:-1})) = 0 ] || continue
    s=$(basename "$ckpt" .pt)
    "$mtx" --log-level warn eval --ckpt "$ckpt" --src "$run/test.de" --ref "$run/test.en" --metric bleu --json \
      --device "$device" --output "$run/test.${s}.hyp" > "$run/${s}.bleu.json"
  done
  "$python" - "$run" "${MTX_GPU_TARGET_BLEU:-36.5}" <<'PY'
import glob, json, os, sys
run, target = sys.argv[1], float(sys.argv[2])
valid = sorted((r for r in map(json.loads, open(f"{run}/metrics.jsonl")) if r.get("type") == "valid"),
               key=lambda r: r["step"])
bleu = {}
for path in glob.glob(f"{run}/step-*.bleu.json"):
    step = int(os.path.basename(path)[5:].split(".")[0])
    bleu[step] = next(r for r in map(json.loads, open(path)) if r.get("name") == "BLEU")["score"]
print("| epoch | updates | seconds (the epoch and its validation) | elapsed s | val. loss | test_2016_flickr BLEU |")
print("|---|---|---|---|---|---|")
before, reached = 0.0, None
for v in valid:
    score = bleu.get(v["step"])
    print(f"| {v['epoch']} | {v['step']} | {v['elapsed_s'] - before:.1f} | {v['elapsed_s']:.1f} | {v['val_loss']:.3f} | "
          + (f"{score:.2f} |" if score is not None else "|"))
    before = v["elapsed_s"]
    if reached is None and score is not None and score >= target:
        reached = (v["epoch"], v["elapsed_s"])
print(f"gpu_check: BLEU {target} " + (f"first reached at epoch {reached[0]} (of those scored), {reached[1]:.0f} s of training"
                                     if reached else "not reached in the epochs scored"))
PY
fi
wants train || exit 0

run=$gpu/runs/$(basename "$config" .json)-$device
rm -rf "$run"
step "training $config for $epochs epoch(s) on $device$([ "$bf16" = true ] && echo ", bf16 autocast")"
"$mtx" train --config "$config" --out "$run" --set data.dir="$MTX_DATA_DIR" --set data.cache_dir="$gpu/cache" \
  --set train.device="$device" --set train.bf16="$bf16" \
  --set train.max_epochs="$epochs" --set train.keep_last=0
zcat "$MTX_DATA_DIR/test_2016_flickr.de.gz" > "$run/test.de"
zcat "$MTX_DATA_DIR/test_2016_flickr.en.gz" > "$run/test.en"
step "translating test_2016_flickr on $device"
"$mtx" translate --ckpt "$run/best.pt" --device "$device" --input "$run/test.de" --output "$run/test.hyp.en" 2> "$run/translate.log"
tail -n 1 "$run/translate.log"
"$mtx" eval --metric bleu,chrf --ref "$run/test.en" --hyp "$run/test.hyp.en"

"$python" - "$run/metrics.jsonl" "$build_s" "$device" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
train = [r for r in rows if r.get("type") == "train"]
valid = [r for r in rows if r.get("type") == "valid"]
# Seconds per epoch from the validation rows (one per epoch); tokens/s over the whole run after the first row.
last = train[-1]
ends = [r["elapsed_s"] for r in valid]
per_epoch = [b - a for a, b in zip([0] + ends, ends)]
first = train[0]
tps = (last["tgt_tokens"] - first["tgt_tokens"]) / max(1e-9, last["elapsed_s"] - first["elapsed_s"])
print(f"gpu_check: build {sys.argv[2]} s; {sys.argv[3]}: {last['step']} updates, seconds per epoch "
      + ", ".join(f"{s:.1f}" for s in per_epoch) + f"; {tps:,.0f} target tokens/s; "
      + f"val. loss {valid[-1]['val_loss']:.3f}")
PY
