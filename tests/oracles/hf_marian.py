#!/usr/bin/env python3
"""Builds a small random Hugging Face MarianMTModel directory and what transformers computes with it: the
oracle of mtx's importer test (tests/import_test.cpp). Nothing is downloaded.

    python tests/oracles/hf_marian.py --data MULTI30K_DIR --out DIR [--untied] [--seed N]

DIR/hf/ is a MarianMT directory as save_pretrained writes it (config.json, model.safetensors, source.spm,
target.spm, vocab.json, tokenizer_config.json; with --untied, pytorch_model.bin instead of model.safetensors). The source and target sentencepiece models are trained here on
Multi30k lines (German and English), over one vocabulary map in Marian's order (</s>, <unk>, the pieces, <pad>
last). The weights are random, with a non-zero final_logits_bias and swish; --untied gives the encoder and
decoder their own embeddings and the output layer its own weights (lm_head), else all three are one matrix.

DIR/expect.safetensors holds, for each test sentence i: src.i (the source ids, </s> appended), tgt.i (the
reference's ids, </s> appended), logits.i (teacher-forced logits, [len(tgt.i), vocab]), greedy.i and beam.i
(generate()'s output ids without the start token, beam 4), and the same with a repetition penalty of 1.5
(greedy.rep.i, beam.rep.i) and with no_repeat_ngram_size 2 (greedy.ngram.i, beam.ngram.i). DIR/expect.json holds the sentences, the generation
settings and the texts transformers decodes.
"""
import argparse
import gzip
import io
import json
import os
import sys


def lines(path, n, skip=0):
    with gzip.open(path, "rt", encoding="utf-8") as f:
        out = []
        for k, line in enumerate(f):
            if k >= skip + n:
                break
            if k >= skip:
                out.append(line.rstrip("\n"))
        return out


def marian_semantics(model, torch):
    """Makes the transformers model compute what Marian computes with the same weights: Marian's position table
    (float32: d/2 waves, wave i at 10000^(-i / (d/2 - 1)), sines then cosines) and layer norm epsilon 1e-6. Its
    <pad> row, the decoder start, is zeroed after training: the zero vector Marian starts from."""
    import numpy as np
    for stack in (model.model.encoder, model.model.decoder):
        n, d = stack.embed_positions.weight.shape
        waves = np.float32(d / 2)
        step = np.float32(np.log(np.float32(10000.0)) / (waves - np.float32(1)))
        i = np.arange(d) % int(waves)
        v = np.arange(n, dtype=np.float32)[:, None] * np.exp(i.astype(np.float32) * -step)[None, :]  # [n, d]
        table = np.where(np.arange(d)[None, :] < int(waves), np.sin(v), np.cos(v)).astype(np.float32)
        with torch.no_grad():
            stack.embed_positions.weight.copy_(torch.from_numpy(table))
    for module in model.modules():
        if isinstance(module, torch.nn.LayerNorm):
            module.eps = 1e-6


def write_marian(model, config, vocab, hf, out, compressed):
    """The model as Marian saves it: [in, out] matrices, [1, n] biases and norms, 1-based layer names, its options
    in "special:model.yml" (a NUL-ended int8 array), a vocab.yml without <pad> (Marian has none), decoder.yml."""
    import numpy as np
    import shutil
    import yaml
    os.makedirs(out, exist_ok=True)
    sd = {k: v.detach().float().numpy() for k, v in model.state_dict().items()}
    n = len(vocab) - 1  # Marian's pieces: all but the <pad> the converter appends
    a = {}
    def dense(prefix, hf_name, suffix):
        a[f"{prefix}_W{suffix}"] = sd[hf_name + ".weight"].T.copy()
        a[f"{prefix}_b{suffix}"] = sd[hf_name + ".bias"][None, :].copy()
    def norm(prefix, hf_name):
        a[prefix + "_ln_scale"] = sd[hf_name + ".weight"][None, :].copy()
        a[prefix + "_ln_bias"] = sd[hf_name + ".bias"][None, :].copy()
    for side, layers in (("encoder", config.encoder_layers), ("decoder", config.decoder_layers)):
        for l in range(layers):
            h, m = f"model.{side}.layers.{l}", f"{side}_l{l + 1}"
            for p in "qkvo":
                dense(m + "_self", f"{h}.self_attn.{'out' if p == 'o' else p}_proj", p)
            norm(m + "_self_Wo", h + ".self_attn_layer_norm")
            if side == "decoder":
                for p in "qkvo":
                    dense(m + "_context", f"{h}.encoder_attn.{'out' if p == 'o' else p}_proj", p)
                norm(m + "_context_Wo", h + ".encoder_attn_layer_norm")
            dense(m + "_ffn", h + ".fc1", "1")
            dense(m + "_ffn", h + ".fc2", "2")
            norm(m + "_ffn_ffn", h + ".final_layer_norm")
    tied = config.share_encoder_decoder_embeddings
    if tied:
        a["Wemb"] = sd["model.shared.weight"][:n].copy()
    else:
        a["encoder_Wemb"] = sd["model.encoder.embed_tokens.weight"][:n].copy()
        a["decoder_Wemb"] = sd["model.decoder.embed_tokens.weight"][:n].copy()
        a["decoder_ff_logit_out_Wt"] = sd["lm_head.weight"][:n].copy()
    a["decoder_ff_logit_out_b"] = sd["final_logits_bias"][:, :n].copy()
    options = {"type": "transformer", "dim-emb": config.d_model, "dim-vocabs": [n, n], "enc-depth": config.encoder_layers,
               "dec-depth": config.decoder_layers, "transformer-heads": config.encoder_attention_heads,
               "transformer-dim-ffn": config.encoder_ffn_dim, "transformer-ffn-depth": 2,
               "transformer-ffn-activation": "swish", "transformer-preprocess": "", "transformer-postprocess": "dan",
               "transformer-postprocess-emb": "d", "transformer-decoder-autoreg": "self-attention",
               "tied-embeddings-all": tied, "tied-embeddings": tied, "tied-embeddings-src": tied,
               "version": "v1.12.0 (mtx test oracle)"}
    a["special:model.yml"] = np.frombuffer(yaml.safe_dump(options).encode() + b"\0", dtype=np.int8)
    (np.savez_compressed if compressed else np.savez)(os.path.join(out, "model.npz"), **a)
    pieces = sorted(vocab, key=vocab.get)[:n]
    with open(os.path.join(out, "vocab.yml"), "w", encoding="utf-8") as f:
        yaml.safe_dump({p: i for i, p in enumerate(pieces)}, f, allow_unicode=True, sort_keys=False)
    with open(os.path.join(out, "decoder.yml"), "w", encoding="utf-8") as f:
        yaml.safe_dump({"models": ["model.npz"], "vocabs": ["vocab.yml", "vocab.yml"], "beam-size": 4, "normalize": 1.0,
                        "relative-paths": True}, f)
    for name in ("source.spm", "target.spm"):
        shutil.copy(os.path.join(hf, name), os.path.join(out, name))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="Multi30k directory (train.de.gz, train.en.gz, val.*.gz)")
    parser.add_argument("--out", required=True, help="directory to write hf/, expect.safetensors, expect.json")
    parser.add_argument("--untied", action="store_true", help="separate source, target and output matrices")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--marian", action="store_true",
                        help="Marian's semantics (its sinusoid, layer norm epsilon 1e-6, <unk> never generated) and the "
                             "model also as Marian writes it: DIR/marian/ (model.npz, decoder.yml, vocab.yml, *.spm)")
    parser.add_argument("--steps", type=int, default=200, help="training updates before the weights are saved")
    parser.add_argument("--sentences", type=int, default=12, help="test sentences (from the validation split)")
    args = parser.parse_args()
    try:
        import sentencepiece as spm
        import torch
        from safetensors.torch import save_file
        from transformers import GenerationConfig, MarianConfig, MarianMTModel, MarianTokenizer
    except ImportError as e:
        sys.exit(f"hf_marian: {e.name or e} is missing: scripts/venv.sh torch transformers sentencepiece safetensors")

    torch.manual_seed(args.seed)
    hf = os.path.join(args.out, "hf")
    os.makedirs(hf, exist_ok=True)

    # Two sentencepiece models, as OPUS-MT has: one per language, Marian's defaults (nmt_nfkc normalisation).
    models = {}
    for side, lang in (("source", "de"), ("target", "en")):
        buf = io.BytesIO()
        spm.SentencePieceTrainer.train(sentence_iterator=iter(lines(os.path.join(args.data, f"train.{lang}.gz"), 4000)),
                                       model_writer=buf, vocab_size=700, model_type="unigram", seed_sentencepiece_size=20000,
                                       num_threads=1, minloglevel=2)
        path = os.path.join(hf, f"{side}.spm")
        with open(path, "wb") as f:
            f.write(buf.getvalue())
        models[side] = spm.SentencePieceProcessor(model_file=path)

    # One vocabulary map over both, in Marian's order: </s> and <unk> first, <pad> appended last by the converter.
    vocab = {"</s>": 0, "<unk>": 1}
    for side in ("source", "target"):
        sp = models[side]
        for i in range(sp.get_piece_size()):
            piece = sp.id_to_piece(i)
            if piece not in vocab and piece not in ("<s>", "</s>", "<unk>"):
                vocab[piece] = len(vocab)
    vocab["<pad>"] = len(vocab)
    with open(os.path.join(hf, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False, indent=1)
    n, pad = len(vocab), vocab["<pad>"]

    config = MarianConfig(vocab_size=n, decoder_vocab_size=n, d_model=64, encoder_layers=2, decoder_layers=2,
                          encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128,
                          activation_function="swish", scale_embedding=True, max_position_embeddings=256,
                          pad_token_id=pad, eos_token_id=0, decoder_start_token_id=pad, forced_eos_token_id=0,
                          share_encoder_decoder_embeddings=not args.untied, tie_word_embeddings=not args.untied,
                          dropout=0.1, init_std=0.02)
    model = MarianMTModel(config)
    if args.marian:
        marian_semantics(model, torch)
    # A few hundred updates on Multi30k pairs, so that outputs end and differ between sentences; then a non-zero
    # final_logits_bias (a buffer transformers never trains).
    pairs = list(zip(lines(os.path.join(args.data, "train.de.gz"), 4000), lines(os.path.join(args.data, "train.en.gz"), 4000)))
    tok = MarianTokenizer(os.path.join(hf, "source.spm"), os.path.join(hf, "target.spm"), os.path.join(hf, "vocab.json"))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(args.seed)
    model.train()
    for step in range(args.steps):
        batch = [pairs[k] for k in torch.randint(len(pairs), (48,), generator=g).tolist()]
        enc = tok([p[0] for p in batch], text_target=[p[1] for p in batch], return_tensors="pt", padding=True)
        labels = enc["labels"].masked_fill(enc["labels"] == pad, -100)
        loss = model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"], labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        model.final_logits_bias.normal_(0, 0.5)
        if args.marian:  # the decoder start: Marian's zero vector
            for table in (model.model.encoder.embed_tokens, model.model.decoder.embed_tokens, model.lm_head):
                table.weight[pad].zero_()
            model.final_logits_bias[0, pad] = 0
    assert model.final_logits_bias.abs().sum() > 0
    model.save_pretrained(hf)
    if args.marian:
        write_marian(model, config, vocab, hf, os.path.join(args.out, "marian"), compressed=args.untied)
    if args.untied:  # the older format too (mtx import has PyTorch rewrite it)
        os.remove(os.path.join(hf, "model.safetensors"))
        torch.save(model.state_dict(), os.path.join(hf, "pytorch_model.bin"))
    # Saved as a user who fine-tuned a model saves it, with transformers' defaults: tokenizer_config.json then holds
    # "source_lang": null and "target_lang": null (and config.json "bos_token_id": null), which mtx reads as absent.
    # --untied names the languages, as OPUS-MT's Hub directories do.
    langs = {"source_lang": "de", "target_lang": "en"} if args.untied else {}
    tok = MarianTokenizer(os.path.join(hf, "source.spm"), os.path.join(hf, "target.spm"),
                          os.path.join(hf, "vocab.json"), **langs)
    tok.save_pretrained(hf)

    src_lines = lines(os.path.join(args.data, "val.de.gz"), args.sentences)
    ref_lines = lines(os.path.join(args.data, "val.en.gz"), args.sentences)
    # The settings mtx matches (docs/import.md): raw log-probabilities (length_penalty 0 = mtx's alpha 0),
    # a search that ends when no live hypothesis can still win (early_stopping False = mtx's exact_stop),
    # <pad> never generated, </s> forced at the limit (max_new_tokens tokens, </s> included: mtx's max length).
    max_new = 40
    gen = GenerationConfig(max_new_tokens=max_new, do_sample=False, length_penalty=0.0, early_stopping=False,
                           bad_words_ids=[[pad], [1]] if args.marian else [[pad]], forced_eos_token_id=0, decoder_start_token_id=pad,
                           eos_token_id=0, pad_token_id=pad)
    # The repetition controls (mtx's decode.repetition_penalty and no_repeat_ngram_size have transformers'
    # definitions): each kind is (beams, generate()'s extra settings).
    kinds = {"greedy": (1, {}), "beam": (4, {}),
             "greedy.rep": (1, {"repetition_penalty": 1.5}), "beam.rep": (4, {"repetition_penalty": 1.5}),
             "greedy.ngram": (1, {"no_repeat_ngram_size": 2}), "beam.ngram": (4, {"no_repeat_ngram_size": 2})}
    tensors, texts = {}, {kind: [] for kind in kinds}
    with torch.no_grad():
        for i, (src, ref) in enumerate(zip(src_lines, ref_lines)):
            s = tok(src, return_tensors="pt").input_ids  # [1, S], </s> last
            t = tok(text_target=ref, return_tensors="pt").input_ids  # [1, T], </s> last
            dec_in = torch.cat([torch.tensor([[pad]]), t[:, :-1]], dim=1)  # [1, T]
            logits = model(input_ids=s, decoder_input_ids=dec_in).logits[0]  # [T, V]
            tensors[f"src.{i}"] = s[0].clone()
            tensors[f"tgt.{i}"] = t[0].clone()
            tensors[f"logits.{i}"] = logits.float().contiguous()
            for kind, (beams, extra) in kinds.items():
                out = model.generate(s, generation_config=gen, num_beams=beams, **extra)[0, 1:]  # no start token
                out = out[out != pad]
                tensors[f"{kind}.{i}"] = out.clone()
                texts[kind].append(tok.decode(out, skip_special_tokens=True))
    save_file(tensors, os.path.join(args.out, "expect.safetensors"))
    with open(os.path.join(args.out, "expect.json"), "w", encoding="utf-8") as f:
        json.dump({"source": src_lines, "reference": ref_lines, "vocab_size": n, "pad": pad, "max_new_tokens": max_new,
                   "untied": args.untied, "marian": args.marian, **texts}, f, ensure_ascii=False, indent=1)


if __name__ == "__main__":
    main()
