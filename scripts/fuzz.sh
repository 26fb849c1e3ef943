#!/usr/bin/env bash
# Runs the libFuzzer targets (tests/fuzz/fuzz_*.cpp, built by scripts/sanitize.sh into build-asan/ with
# ASan+UBSan) from seed inputs made here, each for a given time, two at a time. Corpora grow in
# fuzz-corpus/<target>/ (git-ignored) from run to run; a crashing input lands in fuzz-crashes/ and fails
# the run (turn it into a regression test: tests/fuzz_regression_test.cpp replays tests/fixtures/fuzz/).
#   scripts/fuzz.sh [--seconds N] [--build DIR] [--jobs J] [target ...]    (N per target, default 60)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
seconds=60 build=build-asan jobs=$(nproc) targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    -*) echo "usage: $0 [--seconds N] [--build DIR] [--jobs J] [target ...]" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
if [ ${#targets[@]} -eq 0 ]; then
  for f in tests/fuzz/fuzz_*.cpp; do targets+=("$(basename "$f" .cpp)"); done
fi
for t in "${targets[@]}"; do
  [ -x "$build/bin/$t" ] || { echo "fuzz: $build/bin/$t not built: scripts/sanitize.sh --build-only" >&2; exit 2; }
done
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# Seeds (small, valid inputs of each kind) are made fresh each run next to the growing corpora.
seeds=$(mktemp -d)
trap 'rm -rf "$seeds"' EXIT
mkdir -p "$seeds"/{fuzz_config,fuzz_corpus,fuzz_translate_input,fuzz_eval,fuzz_checkpoint,fuzz_api,fuzz_text} fuzz-crashes
mkdir -p "$seeds"/{fuzz_ooxml,fuzz_odf,fuzz_subtitles}
# The document readers' seeds (byte 0 picks the format): small office files made with Python's zipfile, as their
# formats lay them out -- a bold run, a link, a tab, a field, a table cell, a note, a span.
python3 - "$seeds" <<'PY'
import sys, zipfile, io
seeds = sys.argv[1]
def archive(path, lead, parts):
    b = io.BytesIO()
    with zipfile.ZipFile(b, "w", zipfile.ZIP_DEFLATED) as z:
        for name, text in parts:
            z.writestr(zipfile.ZipInfo(name) if name != "mimetype" else name, text,
                       compress_type=zipfile.ZIP_STORED if name == "mimetype" else zipfile.ZIP_DEFLATED)
    open(path, "wb").write(lead + b.getvalue())
W = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main" xmlns:r="r"'
types = ('<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Override PartName="/%s" '
         'ContentType="application/vnd.openxmlformats-officedocument.%s"/></Types>')
archive(f"{seeds}/fuzz_ooxml/docx", b"\x00", [
    ("[Content_Types].xml", types % ("word/document.xml", "wordprocessingml.document.main+xml")),
    ("word/document.xml", f'<?xml version="1.0"?><w:document {W}><w:body><w:p><w:pPr/><w:r><w:t xml:space="preserve">'
     'Ein </w:t></w:r><w:r><w:rPr><w:b/></w:rPr><w:t>großer</w:t></w:r><w:hyperlink r:id="x"><w:r><w:t>Hund</w:t>'
     '</w:r></w:hyperlink><w:r><w:tab/></w:r><w:r><w:fldChar w:fldCharType="begin"/></w:r><w:r><w:instrText>PAGE'
     '</w:instrText></w:r><w:r><w:fldChar w:fldCharType="end"/></w:r><w:r><w:t>läuft.</w:t></w:r></w:p><w:tbl><w:tr>'
     '<w:tc><w:p><w:r><w:t>Zelle</w:t></w:r></w:p></w:tc></w:tr></w:tbl></w:body></w:document>')])
archive(f"{seeds}/fuzz_ooxml/pptx", b"\x01", [
    ("[Content_Types].xml", types % ("ppt/slides/slide1.xml", "presentationml.slide+xml")),
    ("ppt/slides/slide1.xml", '<p:sld xmlns:p="p" xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main">'
     '<a:p><a:r><a:rPr lang="de-DE"/><a:t>Ein </a:t></a:r><a:r><a:rPr b="1"/><a:t>Hund</a:t></a:r><a:br/><a:r>'
     '<a:t>läuft.</a:t></a:r><a:endParaRPr/></a:p></p:sld>')])
T = 'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" xmlns:office="o"'
archive(f"{seeds}/fuzz_odf/odt", b"\x00", [
    ("mimetype", "application/vnd.oasis.opendocument.text"),
    ("content.xml", f'<office:document-content {T}><office:body><office:text><text:h>Titel</text:h><text:p>Ein '
     '<text:span text:style-name="T1">großer</text:span><text:s/>Hund<text:note><text:note-body><text:p>Notiz.'
     '</text:p></text:note-body></text:note> läuft <text:a xlink:href="x">hier</text:a>.</text:p></office:text>'
     '</office:body></office:document-content>'),
    ("styles.xml", f'<office:document-styles {T}/>')])
open(f"{seeds}/fuzz_subtitles/srt", "wb").write(
    "\x00" "1\r\n00:00:01,000 --> 00:00:02,000\r\nEin <i>großer</i> Hund\r\nläuft.\r\n\r\n2\n00:00:03,000 --> "
    "00:00:04,000\n{\\an8}Zwei.\n".encode())
open(f"{seeds}/fuzz_subtitles/vtt", "wb").write(
    "\x01WEBVTT\n\nNOTE x\n\n00:01.000 --> 00:02.000 align:start\n<v Anna>Ein <c.x>Hund</c> &amp; eine "
    "<00:01.500>Katze.\n".encode())
PY
for f in configs/*.json; do cp "$f" "$seeds/fuzz_config/"; done
printf '{"model": {"d_model": 64}}\0train.lr=0.5\0model.heads=8' > "$seeds/fuzz_config/with-set"
printf '{"data": {"dir": "x"}, // comment\n "train": {"max_steps": -1}}' > "$seeds/fuzz_config/comment"
for f in tests/fixtures/eval/*.hyp tests/fixtures/eval/*.en; do cp "$f" "$seeds/fuzz_corpus/"; done
printf 'ein Hund\r\nläuft\n\nim Park' > "$seeds/fuzz_corpus/crlf"
printf '\x08ein Hund läuft über die Straße\r\nzwei\n\n%s\nénd' "$(head -c 300 /dev/zero | tr '\0' 'x')" \
  > "$seeds/fuzz_translate_input/lines"
printf '\x04一二三四五六七八九十\n😀😀😀😀\r\n' > "$seeds/fuzz_translate_input/wide"
printf '\x40Ein Hund läuft. Eine Frau, die liest, sitzt z. B. am 3. Mai dort.\r\n\nZwei Männer.  ' \
  > "$seeds/fuzz_text/plain"
printf '\x41<p class="x">Ein <b>großer</b> Hund &amp; <a href="/a?b=1">Gras</a>.<br>Neu!</p><!-- c --><pre>x</pre>' \
  > "$seeds/fuzz_text/html"
i=0
for h in tests/fixtures/eval/*.hyp tests/fixtures/eval/sysA.en; do
  r=${h%.*}.ref; [ -f "$r" ] || r=tests/fixtures/eval/ref.en
  { printf "\\x$(printf %02x $((i * 37 % 256)))"; head -c 600 "$h"; printf '\0'; head -c 600 "$r"; } \
    > "$seeds/fuzz_eval/seed-$i"
  i=$((i + 1))
done
printf '\x05It'"'"'s a dog.\n\0it is a dog .\0It'"'"'s\xc2\xa0a dog' > "$seeds/fuzz_eval/tercom"
# A real (tiny) checkpoint, and the JSON of a training state.
if [ -f data/multi30k/train.de.gz ]; then
  (
    MTX=$root/$build/bin/mtx DATA=$root/data/multi30k
    source scripts/faults/common.sh
    make_corpus "$seeds/ck-corpus" 500
    write_config "$seeds/ck.json" "$seeds/ck-corpus" "$seeds/ck-cache"
    "$MTX" train --config "$seeds/ck.json" --set train.max_steps=1 \
      --out "$seeds/ck-run" > "$seeds/ck.log" 2>&1 || { cat "$seeds/ck.log" >&2; exit 1; }
  )
  cp "$seeds/ck-run/last.pt" "$seeds/fuzz_checkpoint/"
  export MTX_FUZZ_MODEL=$seeds/ck-run/last.pt   # fuzz_api serves it
fi
# fuzz_api: byte 0 the method, 1 the path, 2 the Content-Type, 3 flags (key, origin, locked server); then the body.
printf '\x01\x00\x00\x00{"text": ["ein Hund", "zwei Männer"], "beam": 2, "nbest": 2, "scores": true}' > "$seeds/fuzz_api/v1"
printf '\x01\x01\x01\x00q=ein+Hund&source=auto&target=en&alternatives=1' > "$seeds/fuzz_api/form"
printf '\x01\x01\x00\x13{"q": ["<p>ein <b>Hund</b> &amp; Katze</p>", ""], "source": "de", "target": "en", "format": "html"}' \
  > "$seeds/fuzz_api/html"
printf '\x00\x05\x03\x11' > "$seeds/fuzz_api/metrics"
printf '\x03\x00\x00\x0c' > "$seeds/fuzz_api/preflight"
printf '{"step": 3, "epoch": 1, "position": {"epoch": 1, "index": 2}, "tgt_tokens": 10, "elapsed_s": 1.5, "best_metric": null, "best_step": 0, "bad_validations": 0, "schedule": {}}' \
  > "$seeds/fuzz_checkpoint/state.json"

max_len() {
  case "$1" in
    fuzz_checkpoint) local m=4096 f; for f in "$seeds/fuzz_checkpoint"/*; do
                       [ "$(stat -c %s "$f")" -lt "$m" ] || m=$(( $(stat -c %s "$f") + 4096 )); done; echo "$m" ;;
    fuzz_eval) echo 2048 ;;   # TER's shift search is quadratic and more in the line length
    fuzz_ooxml|fuzz_odf) echo 16384 ;;  # zip archives: room for their directory and a few entries
    *) echo 8192 ;;
  esac
}

run_one() {
  local t=$1 log=fuzz-crashes/$1.log
  mkdir -p "fuzz-corpus/$t"
  set +e
  "$build/bin/$t" "fuzz-corpus/$t" "$seeds/$t" -max_total_time="$seconds" -max_len="$(max_len "$t")" \
    -timeout=30 -rss_limit_mb=6144 -print_final_stats=1 -artifact_prefix="fuzz-crashes/$t-" > "$log" 2>&1
  local rc=$?
  set -e
  local runs
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  if [ "$rc" = 0 ]; then
    echo "fuzz: $t: ${runs:-?} inputs in ${seconds}s, no crash ($(find "fuzz-corpus/$t" -type f | wc -l) in its corpus)"
  else
    echo "fuzz: $t: FAILED (exit $rc) after ${runs:-?} inputs: see $log and fuzz-crashes/$t-*" >&2
    grep -m3 -E "ERROR: |runtime error|invariant broken|uncaught|terminate" "$log" >&2 || tail -5 "$log" >&2
    return 1
  fi
}

failed=0 pids=()
for t in "${targets[@]}"; do
  run_one "$t" & pids+=($!)
  if [ ${#pids[@]} -ge "$jobs" ]; then wait "${pids[0]}" || failed=1; pids=("${pids[@]:1}"); fi
done
for p in "${pids[@]}"; do wait "$p" || failed=1; done
exit $failed
