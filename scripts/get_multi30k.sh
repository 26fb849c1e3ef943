#!/usr/bin/env bash
# Fetch Multi30k task 1 (raw, de/en): train, val, test_2016_flickr as .gz files into DEST.
#   scripts/get_multi30k.sh DEST                 download from the upstream multi30k/dataset repository
#   scripts/get_multi30k.sh DEST --mirror DIR    copy from a local mirror directory instead
# Verifies line counts (29000 / 1014 / 1000) and fails clearly otherwise. Idempotent: files that are
# already present and complete are kept.
set -euo pipefail

usage() { echo "usage: $0 DEST [--mirror DIR]" >&2; exit 2; }
[ $# -ge 1 ] || usage
dest=$1; shift
mirror=""
while [ $# -gt 0 ]; do
  case "$1" in
    --mirror) [ $# -ge 2 ] || usage; mirror=$2; shift 2 ;;
    *) usage ;;
  esac
done

upstream="https://github.com/multi30k/dataset/raw/master/data/task1/raw"
declare -A expected=([train]=29000 [val]=1014 [test_2016_flickr]=1000)

count_lines() { gzip -dc "$1" | awk 'END { print NR }'; }

complete() {  # complete FILE SPLIT
  [ -s "$1" ] && gzip -t "$1" 2>/dev/null && [ "$(count_lines "$1")" = "${expected[$2]}" ]
}

mkdir -p "$dest"
for split in train val test_2016_flickr; do
  for lang in de en; do
    f="$split.$lang.gz"
    if complete "$dest/$f" "$split"; then
      continue
    fi
    tmp="$dest/.$f.part"
    if [ -n "$mirror" ]; then
      [ -f "$mirror/$f" ] || { echo "get_multi30k: $mirror/$f not found in the mirror" >&2; exit 1; }
      cp "$mirror/$f" "$tmp"
    else
      echo "get_multi30k: downloading $f"
      ok=1
      if command -v curl >/dev/null; then
        curl -fsL --retry 2 --connect-timeout 15 -o "$tmp" "$upstream/$f" 2>/dev/null || ok=0
      elif command -v wget >/dev/null; then
        wget -q --tries=3 --timeout=15 -O "$tmp" "$upstream/$f" 2>/dev/null || ok=0
      else
        echo "get_multi30k: need curl or wget to download (or pass --mirror DIR)" >&2; exit 1
      fi
      if [ "$ok" = 0 ]; then
        rm -f "$tmp"
        echo "get_multi30k: cannot download $upstream/$f (no network?); copy a local Multi30k with --mirror DIR" >&2
        exit 1
      fi
    fi
    if ! gzip -t "$tmp" 2>/dev/null; then
      rm -f "$tmp"; echo "get_multi30k: $f is not a valid gzip file" >&2; exit 1
    fi
    n=$(count_lines "$tmp")
    if [ "$n" != "${expected[$split]}" ]; then
      rm -f "$tmp"
      echo "get_multi30k: $f has $n lines, expected ${expected[$split]}" >&2; exit 1
    fi
    mv "$tmp" "$dest/$f"
  done
done
echo "get_multi30k: Multi30k task 1 ready in $dest (train 29000, val 1014, test_2016_flickr 1000 pairs)"
