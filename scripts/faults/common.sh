# Shared by the fault scripts (sourced): the binary, a small corpus and a config, and helpers.
# MTX: the mtx binary (default: build/bin/mtx). DATA: Multi30k (default: data/multi30k).
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
MTX=${MTX:-$root/build/bin/mtx}
DATA=${DATA:-$root/data/multi30k}
[ -x "$MTX" ] || { echo "faults: $MTX not found: build first (scripts/build.sh) or set MTX" >&2; exit 2; }
[ -f "$DATA/train.de.gz" ] || { echo "faults: Multi30k not found in $DATA: scripts/get_multi30k.sh $DATA (or set DATA)" >&2; exit 2; }

say() { echo "faults: $*"; }
fail() { echo "faults: FAIL: $*" >&2; exit 1; }

# make_corpus DIR TRAIN_LINES: the first lines of Multi30k's train and val as a small corpus.
make_corpus() {
  mkdir -p "$1"
  for l in de en; do
    gzip -dc "$DATA/train.$l.gz" | awk -v n="$2" "NR <= n" > "$1/train.$l"
    gzip -dc "$DATA/val.$l.gz" | awk "NR <= 60" > "$1/val.$l"
  done
}

# write_config FILE CORPUS CACHE: a seconds-scale model that validates and checkpoints often.
write_config() {
  cat > "$1" <<JSON
{
  "data": {"dir": "$2", "cache_dir": "$3", "test": "", "src_lang": "de", "tgt_lang": "en"},
  "tokenizer": {"type": "unigram", "vocab_size": 500, "joint": true},
  "model": {"d_model": 32, "heads": 4, "encoder_layers": 1, "decoder_layers": 1, "ffn_dim": 64,
            "dropout": 0.1, "attention_dropout": 0.1, "max_len": 128},
  "train": {"device": "cpu", "threads": 2, "max_tokens": 1024, "max_epochs": 0, "seed": 3,
            "schedule": "noam", "warmup_steps": 40, "clip_norm": 1.0, "log_every": 5,
            "validate_every": 6, "keep_last": 3, "average_last": 2, "patience": 0}
}
JSON
}

# sha CKPT: the checkpoint's recorded weights_sha256 (mtx info loads and verifies the whole file).
sha() { "$MTX" info --ckpt "$1" | sed -n 's/.*"weights_sha256": *"\([0-9a-f]*\)".*/\1/p'; }

# all_load DIR: every .pt in DIR loads (exit 0 from mtx info).
all_load() {
  local f
  for f in "$1"/*.pt; do
    [ -e "$f" ] || continue
    "$MTX" info --ckpt "$f" > /dev/null 2>"$1/../info.err" || fail "$f does not load: $(cat "$1/../info.err")"
  done
}
