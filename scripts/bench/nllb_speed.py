#!/usr/bin/env python3
"""The Python sides of scripts/bench/nllb_speed.sh: a random model with NLLB-200-distilled-600M's shapes, saved as
transformers saves it, and CTranslate2's timed translation of it.

    nllb_speed.py make --data MULTI30K --out DIR [--small] [--sentences 100]
    nllb_speed.py ct2 --model CT2_DIR --input SRC.tokens --output OUT.tokens --beam 4 --length 32 \
        --target-lang fra_Latn --threads 2 [--latency 20]

make: DIR/hf/ (config.json, model.safetensors, tokenizer.json, tokenizer_config.json, sentencepiece.bpe.model;
d_model 1024, 12 + 12 layers, 16 heads, FFN 4096, vocabulary 256,206, as facebook/nllb-200-distilled-600M;
--small: d_model 64, 2 + 2 layers, the same vocabulary), DIR/src.de (the first --sentences lines of
test_2016_flickr) and DIR/src.tokens (NllbTokenizer's source tokens of each line: deu_Latn, pieces, </s>, as
CTranslate2's documentation feeds them). The sentencepiece model is trained on Multi30k (no download); the
weights are random (init_std 0.02), so every output runs to the fixed length.

ct2: translate_batch with the target code as the target prefix and min_decoding_length = max_decoding_length =
--length, timing the translation alone; prints one JSON line: seconds, generated tokens/s (output tokens, the
prefix included, plus the end token), the mean output length, peak RSS (MB), and with --latency N the p50/p95 ms of
N sentences one at a time.
"""
import argparse
import gzip
import io
import json
import os
import resource
import shutil
import sys
import time


def make(a):
    import sentencepiece as spm
    import torch
    from transformers import M2M100Config, M2M100ForConditionalGeneration, NllbTokenizer
    from transformers.models.nllb.tokenization_nllb import FAIRSEQ_LANGUAGE_CODES

    hf = os.path.join(a.out, "hf")
    spm_dir = os.path.join(a.out, "spm")
    os.makedirs(hf, exist_ok=True)
    os.makedirs(spm_dir, exist_ok=True)
    with gzip.open(os.path.join(a.data, "train.de.gz"), "rt", encoding="utf-8") as f:
        text = [line.rstrip("\n") for _, line in zip(range(5000), f)]
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(text), model_writer=buf, vocab_size=2000, model_type="bpe",
                                   character_coverage=1.0, num_threads=2, minloglevel=2)
    spm_path = os.path.join(spm_dir, "sentencepiece.bpe.model")
    with open(spm_path, "wb") as f:
        f.write(buf.getvalue())
    tok = NllbTokenizer.from_pretrained(spm_dir, src_lang="deu_Latn", tgt_lang="fra_Latn",
                                        extra_special_tokens=FAIRSEQ_LANGUAGE_CODES)
    shapes = dict(d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
                  encoder_ffn_dim=256, decoder_ffn_dim=256) if a.small else \
        dict(d_model=1024, encoder_layers=12, decoder_layers=12, encoder_attention_heads=16,
             decoder_attention_heads=16, encoder_ffn_dim=4096, decoder_ffn_dim=4096)
    config = M2M100Config(vocab_size=256206, max_position_embeddings=1024, activation_function="relu",
                          scale_embedding=True, pad_token_id=1, eos_token_id=2, bos_token_id=0,
                          decoder_start_token_id=2, init_std=0.02, dropout=0.1, **shapes)
    torch.manual_seed(1)
    model = M2M100ForConditionalGeneration(config).eval()
    model.save_pretrained(hf)
    tok.save_pretrained(hf)
    shutil.copy(spm_path, os.path.join(hf, "sentencepiece.bpe.model"))
    with gzip.open(os.path.join(a.data, "test_2016_flickr.de.gz"), "rt", encoding="utf-8") as f:
        lines = [line.rstrip("\n") for _, line in zip(range(a.sentences), f)]
    with open(os.path.join(a.out, "src.de"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(a.out, "src.tokens"), "w", encoding="utf-8") as f:
        for line in lines:
            f.write(" ".join(tok.convert_ids_to_tokens(tok(line).input_ids)) + "\n")
    print(f"nllb_speed: wrote {hf} ({sum(p.numel() for p in model.parameters()) / 1e6:.1f}M parameters)",
          file=sys.stderr)


def ct2(a):
    import ctranslate2

    tr = ctranslate2.Translator(a.model, device="cpu", inter_threads=1, intra_threads=a.threads)
    src = [line.split() for line in open(a.input, encoding="utf-8").read().splitlines()]
    opts = dict(beam_size=a.beam, min_decoding_length=a.length, max_decoding_length=a.length, length_penalty=0.0,
                num_hypotheses=1, return_scores=False)
    prefix = [[a.target_lang]] * len(src)
    tr.translate_batch(src[:2], target_prefix=prefix[:2], **opts)  # warm-up
    start = time.perf_counter()
    res = tr.translate_batch(src, target_prefix=prefix, max_batch_size=a.batch_tokens, batch_type="tokens", **opts)
    seconds = time.perf_counter() - start
    outs = [r.hypotheses[0] for r in res]
    with open(a.output, "w", encoding="utf-8") as f:
        for o in outs:
            f.write(" ".join(o) + "\n")
    row = {"seconds": seconds, "tokens_per_s": sum(len(o) + 1 for o in outs) / seconds,
           "mean_length": sum(len(o) for o in outs) / len(outs)}
    if a.latency:
        times = []
        for s in src[: a.latency]:
            t = time.perf_counter()
            tr.translate_batch([s], target_prefix=[[a.target_lang]], **opts)
            times.append(1000 * (time.perf_counter() - t))
        times.sort()
        row["latency_p50_ms"] = times[min(len(times) - 1, int(0.5 * len(times)))]
        row["latency_p95_ms"] = times[min(len(times) - 1, int(0.95 * len(times)))]
    row["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(row))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("--data", required=True)
    m.add_argument("--out", required=True)
    m.add_argument("--small", action="store_true")
    m.add_argument("--sentences", type=int, default=100)
    c = sub.add_parser("ct2")
    c.add_argument("--model", required=True)
    c.add_argument("--input", required=True)
    c.add_argument("--output", required=True)
    c.add_argument("--beam", type=int, default=4)
    c.add_argument("--length", type=int, default=32)
    c.add_argument("--target-lang", default="fra_Latn")
    c.add_argument("--threads", type=int, default=2)
    c.add_argument("--batch-tokens", type=int, default=4096)
    c.add_argument("--latency", type=int, default=0)
    a = p.parse_args()
    make(a) if a.cmd == "make" else ct2(a)


if __name__ == "__main__":
    main()
