#!/usr/bin/env bash
# The Python package's overhead: test_2016_flickr translated through mtx.Translator (translate_file and
# translate on a list) and through the CLI of the same build, on the same model, threads and options, alternated
# --rounds times; prints each side's median seconds of translation (the CLI's own clock; Python's around the call,
# the model loaded before) and of the whole process, and the ratios. Also Python with tcmalloc preloaded, which the
# CLI links.
#   scripts/bench/python_overhead.sh MODEL.pt [--threads 2] [--rounds 3] [--beam 4]
# Needs the 2.x build with the package (scripts/build.sh --torch pip). Run nothing else meanwhile.
set -euo pipefail
cd "$(dirname "$0")/../.."
model=$1; shift
threads=2 rounds=3 beam=4
while [ $# -gt 0 ]; do
  case "$1" in
    --threads) threads=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --beam) beam=$2; shift 2 ;;
    *) echo "python_overhead.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
build=${MTX_BUILD_DIR:-build-torch2}
data=${MTX_DATA_DIR:-data/multi30k}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
zcat "$data/test_2016_flickr.de.gz" > "$work/src.de"
PYTHONPATH="$build/python" .venv/bin/python - "$build/bin/mtx" "$model" "$work" "$threads" "$rounds" "$beam" <<'PY'
import re, statistics, subprocess, sys, time
cli, model, work, threads, rounds, beam = sys.argv[1:]
threads, rounds, beam = int(threads), int(rounds), int(beam)
src = f"{work}/src.de"
# Each Python run prints the seconds of its translation alone (the model loaded before the clock starts).
code = ("import sys, time, mtx\n"
        "t = mtx.Translator(sys.argv[1], threads=int(sys.argv[2]))\n"
        "start = time.perf_counter()\n"
        "if sys.argv[5] == 'file':\n"
        "    t.translate_file(sys.argv[3], sys.argv[4], beam=int(sys.argv[6]))\n"
        "else:\n"
        "    lines = open(sys.argv[3], encoding='utf-8').read().split('\\n')[:-1]\n"
        "    out = ''.join(r.text + '\\n' for r in t.translate(lines, beam=int(sys.argv[6])))\n"
        "    open(sys.argv[4], 'w', encoding='utf-8').write(out)\n"
        "print(time.perf_counter() - start)\n")
import os
tcmalloc = "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4"
def run(cmd, python, preload=False):
    env = dict(os.environ, LD_PRELOAD=tcmalloc) if preload else None
    start = time.perf_counter()
    p = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    if python:
        return wall, float(p.stdout.split()[-1])
    m = re.search(r"lines in ([0-9.]+) s", p.stderr)  # the CLI's own clock: translation, loading excluded
    return wall, float(m.group(1))
ways = {"cli": lambda: run([cli, "translate", "--ckpt", model, "--threads", str(threads), "--beam", str(beam),
                            "--input", src, "--output", f"{work}/cli.en"], False),
        "python translate_file": lambda: run([sys.executable, "-c", code, model, str(threads), src, f"{work}/py.en",
                                              "file", str(beam)], True),
        "python translate(list)": lambda: run([sys.executable, "-c", code, model, str(threads), src,
                                               f"{work}/list.en", "list", str(beam)], True)}
if os.path.exists(tcmalloc):  # the CLI links tcmalloc; Python keeps glibc's malloc unless it is preloaded
    ways["python translate_file, tcmalloc preloaded"] = lambda: run(
        [sys.executable, "-c", code, model, str(threads), src, f"{work}/tc.en", "file", str(beam)], True, True)
times = {k: [] for k in ways}
for _ in range(rounds):
    for k, f in ways.items():
        times[k].append(f())
same = open(f"{work}/cli.en", "rb").read() == open(f"{work}/py.en", "rb").read() == open(f"{work}/list.en", "rb").read()
wall0 = statistics.median(w for w, _ in times["cli"])
tr0 = statistics.median(t for _, t in times["cli"])
print(f"| way | translation s (median of {rounds}) | / CLI | process wall s | / CLI |")
print("|---|---|---|---|---|")
for k, v in times.items():
    tr, wall = statistics.median(t for _, t in v), statistics.median(w for w, _ in v)
    print(f"| {k} | {tr:.2f} | {tr / tr0:.3f} | {wall:.2f} | {wall / wall0:.3f} |")
print(f"outputs byte-identical: {same}")
PY
