#!/usr/bin/env bash
# Fetch WikiText-2 (Merity et al. 2016), the corpus of PyTorch's Transformer language-model tutorial, into
# DEST as wiki.{train,valid,test}.tokens (the tokenised "v1" release the tutorial reads) or, with --raw,
# wiki.{train,valid,test}.raw.
#   scripts/get_wikitext2.sh DEST [--raw]                 download the upstream zip (tried in order: the
#                                                          current host, then the original S3 bucket)
#   scripts/get_wikitext2.sh DEST [--raw] --mirror DIR    copy the three files (or the zip) from DIR
# Verifies every file's line count (36718 / 3760 / 4358, as torchtext's WikiText2 records them) and, for a
# downloaded tokens zip, its MD5 (torchtext's 542ccefacc6c27f945fb54453812b3cd). Idempotent.
# Then: mtx train --config configs/lm-tutorial.json --set data.dir=DEST
set -euo pipefail

usage() { echo "usage: $0 DEST [--raw] [--mirror DIR]" >&2; exit 2; }
[ $# -ge 1 ] || usage
dest=$1; shift
mirror=""; kind=tokens; zipname=wikitext-2-v1.zip; md5=542ccefacc6c27f945fb54453812b3cd
while [ $# -gt 0 ]; do
  case "$1" in
    --mirror) [ $# -ge 2 ] || usage; mirror=$2; shift 2 ;;
    --raw) kind=raw; zipname=wikitext-2-raw-v1.zip; md5=""; shift ;;
    *) usage ;;
  esac
done
urls=("https://wikitext.smerity.com/$zipname" "https://s3.amazonaws.com/research.metamind.io/wikitext/$zipname")
declare -A expected=([train]=36718 [valid]=3760 [test]=4358)

lines() { awk 'END { print NR }' "$1"; }
complete() { [ -s "$1" ] && [ "$(lines "$1")" = "${expected[$2]}" ]; }

all_complete() {
  for split in train valid test; do complete "$dest/wiki.$split.$kind" "$split" || return 1; done
}

mkdir -p "$dest"
if all_complete; then
  echo "get_wikitext2: WikiText-2 ($kind) already complete in $dest"; exit 0
fi
work=$(mktemp -d "$dest/.get.XXXXXX")
trap 'rm -rf "$work"' EXIT

if [ -n "$mirror" ] && [ -f "$mirror/wiki.train.$kind" ]; then
  for split in train valid test; do
    [ -f "$mirror/wiki.$split.$kind" ] || { echo "get_wikitext2: $mirror/wiki.$split.$kind not found" >&2; exit 1; }
    cp "$mirror/wiki.$split.$kind" "$work/"
  done
else
  zip="$work/$zipname"
  if [ -n "$mirror" ]; then
    [ -f "$mirror/$zipname" ] || { echo "get_wikitext2: neither wiki.train.$kind nor $zipname in $mirror" >&2; exit 1; }
    cp "$mirror/$zipname" "$zip"
  else
    command -v curl >/dev/null || command -v wget >/dev/null || {
      echo "get_wikitext2: need curl or wget to download (or pass --mirror DIR)" >&2; exit 1; }
    ok=0
    for url in "${urls[@]}"; do
      echo "get_wikitext2: downloading $url"
      if command -v curl >/dev/null; then
        curl -fsL --retry 2 --connect-timeout 15 -o "$zip" "$url" 2>/dev/null && { ok=1; break; }
      else
        wget -q --tries=3 --timeout=15 -O "$zip" "$url" 2>/dev/null && { ok=1; break; }
      fi
    done
    [ "$ok" = 1 ] || { echo "get_wikitext2: cannot download $zipname (no network?); copy it with --mirror DIR" >&2; exit 1; }
  fi
  if [ -n "$md5" ]; then
    got=$(md5sum "$zip" | cut -d' ' -f1)
    [ "$got" = "$md5" ] || { echo "get_wikitext2: $zipname has MD5 $got, expected $md5" >&2; exit 1; }
  fi
  python3 - "$zip" "$work" "$kind" <<'PY'
import sys, zipfile
zip_path, out, kind = sys.argv[1:4]
with zipfile.ZipFile(zip_path) as z:
    for split in ("train", "valid", "test"):
        names = [n for n in z.namelist() if n.endswith(f"/wiki.{split}.{kind}")]
        if len(names) != 1:
            sys.exit(f"get_wikitext2: wiki.{split}.{kind} not found once in {zip_path}")
        with z.open(names[0]) as src, open(f"{out}/wiki.{split}.{kind}", "wb") as dst:
            dst.write(src.read())
PY
fi
for split in train valid test; do
  f="$work/wiki.$split.$kind"
  n=$(lines "$f")
  [ "$n" = "${expected[$split]}" ] || { echo "get_wikitext2: wiki.$split.$kind has $n lines, expected ${expected[$split]}" >&2; exit 1; }
done
for split in train valid test; do mv "$work/wiki.$split.$kind" "$dest/"; done
echo "get_wikitext2: WikiText-2 ($kind) ready in $dest (36718 / 3760 / 4358 lines)"
