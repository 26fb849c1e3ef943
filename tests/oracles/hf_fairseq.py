#!/usr/bin/env python3
"""Builds a small random multilingual model of one of the fairseq families as transformers saves it, and what
transformers computes with it: the oracle of mtx's importer test for NLLB-200, M2M100 and mBART-50
(tests/import_test.cpp). Nothing is downloaded.

    python tests/oracles/hf_fairseq.py --family nllb|m2m100|mbart50 --data MULTI30K_DIR --out DIR [--seed N]

DIR/hf/ holds what save_pretrained writes for the model and its tokenizer (transformers 5: tokenizer.json and
tokenizer_config.json for NLLB and mBART-50; M2M100's vocab.json, sentencepiece.bpe.model and tokenizer_config.json),
plus sentencepiece.bpe.model, as the Hub's repositories ship it. The sentencepiece model is trained here on
Multi30k lines and on lines in other scripts (BPE for NLLB and M2M100, unigram for mBART-50, as theirs are); the
language codes are transformers' own lists. The weights are trained briefly on German -> English pairs with the
language codes in place, so that outputs start with the target code, end, and differ between sentences.

DIR/expect.safetensors holds, per test sentence i: src.i (transformers' source ids: language code, pieces, </s>),
tgt.i (the labels: target code, pieces, </s>), logits.i (teacher-forced from the decoder start </s>, [T, vocab]),
greedy.i and beam.i (generate()'s ids with forced_bos_token_id, without the start token, beam 4); and ids.k for
each line of other scripts (German source ids). DIR/expect.json holds the lines, the language codes and their ids,
the generation settings and the texts transformers decodes.
"""
import argparse
import gzip
import io
import json
import os
import shutil
import sys

OTHER_SCRIPTS = [
    "一只狗在草地上奔跑。",  # Chinese
    "犬が公園で走っている。",  # Japanese
    "كلب يركض في الحديقة.",  # Arabic
    "एक कुत्ता पार्क में दौड़ रहा है।",  # Devanagari
    "Собака бежит по парку.",  # Cyrillic
    "A dog 🐕 runs 🏃 in the park 🌳!",  # emoji
    "Ein Hund  läuft\tüber die Straße – schnell…",  # spaces, a tab, typographic punctuation
]

FAMILIES = {
    # family: (source code, target code, sentencepiece model type)
    "nllb": ("deu_Latn", "eng_Latn", "bpe"),
    "nllb_legacy": ("deu_Latn", "eng_Latn", "bpe"),  # NllbTokenizer(legacy_behaviour=True): pieces </s> code
    "m2m100": ("de", "en", "bpe"),
    "mbart50": ("de_DE", "en_XX", "unigram"),
}


def lines(path, n, skip=0):
    with gzip.open(path, "rt", encoding="utf-8") as f:
        out = []
        for k, line in enumerate(f):
            if k >= skip + n:
                break
            if k >= skip:
                out.append(line.rstrip("\n"))
        return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--family", required=True, choices=sorted(FAMILIES))
    parser.add_argument("--data", required=True, help="Multi30k directory (train.de.gz, train.en.gz, val.*.gz)")
    parser.add_argument("--out", required=True, help="directory to write hf/, expect.safetensors, expect.json")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--steps", type=int, default=150, help="training updates before the weights are saved")
    parser.add_argument("--sentences", type=int, default=8, help="test sentences (from the validation split)")
    args = parser.parse_args()
    try:
        import sentencepiece as spm
        import torch
        from safetensors.torch import save_file
        import transformers
    except ImportError as e:
        sys.exit(f"hf_fairseq: {e.name or e} is missing: scripts/venv.sh torch transformers sentencepiece "
                 "safetensors protobuf")

    torch.manual_seed(args.seed)
    src_lang, tgt_lang, spm_type = FAMILIES[args.family]
    hf = os.path.join(args.out, "hf")
    spm_dir = os.path.join(args.out, "spm")
    os.makedirs(hf, exist_ok=True)
    os.makedirs(spm_dir, exist_ok=True)

    de = lines(os.path.join(args.data, "train.de.gz"), 3000)
    en = lines(os.path.join(args.data, "train.en.gz"), 3000)
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(de + en + OTHER_SCRIPTS * 20), model_writer=buf,
                                   vocab_size=700, model_type=spm_type, character_coverage=1.0, num_threads=1,
                                   minloglevel=2, seed_sentencepiece_size=20000)
    spm_path = os.path.join(spm_dir, "sentencepiece.bpe.model")
    with open(spm_path, "wb") as f:
        f.write(buf.getvalue())
    sp = spm.SentencePieceProcessor(model_file=spm_path)

    if args.family.startswith("nllb"):
        from transformers import NllbTokenizer
        from transformers.models.nllb.tokenization_nllb import FAIRSEQ_LANGUAGE_CODES
        tok = NllbTokenizer.from_pretrained(spm_dir, src_lang=src_lang, tgt_lang=tgt_lang,
                                            extra_special_tokens=FAIRSEQ_LANGUAGE_CODES,
                                            legacy_behaviour=args.family == "nllb_legacy")
    elif args.family == "mbart50":
        from transformers import MBart50Tokenizer
        tok = MBart50Tokenizer.from_pretrained(spm_dir, src_lang=src_lang, tgt_lang=tgt_lang)
    else:
        from transformers import M2M100Tokenizer
        vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
        for i in range(3, sp.get_piece_size()):
            vocab.setdefault(sp.id_to_piece(i), len(vocab))
        with open(os.path.join(spm_dir, "vocab.json"), "w", encoding="utf-8") as f:
            json.dump(vocab, f, ensure_ascii=False)
        tok = M2M100Tokenizer(os.path.join(spm_dir, "vocab.json"), spm_path, src_lang=src_lang, tgt_lang=tgt_lang)
    n = max(len(tok), max(tok.get_vocab().values()) + 1)
    if args.family == "m2m100":  # its language tokens are not in get_vocab()
        n = max(n, max(tok.lang_token_to_id.values()) + 1) + 8  # M2M100's vocab_size counts its 8 "madeupword" rows, which no tokenizer id reaches
    pad, eos, bos = (tok.convert_tokens_to_ids(t) for t in ("<pad>", "</s>", "<s>"))
    src_code = tok.convert_tokens_to_ids(tok.get_lang_token(src_lang) if args.family == "m2m100" else src_lang)
    tgt_code = tok.convert_tokens_to_ids(tok.get_lang_token(tgt_lang) if args.family == "m2m100" else tgt_lang)
    assert src_code != tok.unk_token_id and tgt_code != tok.unk_token_id, (src_code, tgt_code)

    common = dict(vocab_size=n, d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                  decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128, max_position_embeddings=256,
                  pad_token_id=pad, eos_token_id=eos, bos_token_id=bos, decoder_start_token_id=eos, dropout=0.1)
    if args.family == "mbart50":
        from transformers import MBartConfig, MBartForConditionalGeneration
        config = MBartConfig(activation_function="gelu", scale_embedding=False, **common)
        model = MBartForConditionalGeneration(config)
    else:
        from transformers import M2M100Config, M2M100ForConditionalGeneration
        config = M2M100Config(activation_function="relu", scale_embedding=True, **common)
        model = M2M100ForConditionalGeneration(config)

    pairs = list(zip(de, en))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(args.seed)
    model.train()
    for _ in range(args.steps):
        batch = [pairs[k] for k in torch.randint(len(pairs), (48,), generator=g).tolist()]
        enc = tok([p[0] for p in batch], text_target=[p[1] for p in batch], return_tensors="pt", padding=True)
        labels = enc["labels"].masked_fill(enc["labels"] == pad, -100)
        loss = model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"], labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    if args.family == "mbart50":
        with torch.no_grad():
            model.final_logits_bias.normal_(0, 0.5)  # a buffer transformers never trains: non-zero, so it is seen
    model.save_pretrained(hf)
    tok.save_pretrained(hf)
    if not os.path.exists(os.path.join(hf, "sentencepiece.bpe.model")):
        shutil.copy(spm_path, os.path.join(hf, "sentencepiece.bpe.model"))  # as the Hub's repositories ship it

    src_lines = lines(os.path.join(args.data, "val.de.gz"), args.sentences)
    ref_lines = lines(os.path.join(args.data, "val.en.gz"), args.sentences)
    # The settings mtx matches (docs/import.md): raw log-probabilities, an exact stop, </s> forced at the limit,
    # the target code forced first (mtx: a one-token target prefix).
    max_new = 40
    gen = transformers.GenerationConfig(max_new_tokens=max_new, do_sample=False, length_penalty=0.0,
                                        early_stopping=False, forced_eos_token_id=eos, decoder_start_token_id=eos,
                                        eos_token_id=eos, pad_token_id=pad, forced_bos_token_id=tgt_code,
                                        bad_words_ids=[[pad]])
    kinds = {"greedy": 1, "beam": 4}
    tensors, texts = {}, {kind: [] for kind in kinds}
    with torch.no_grad():
        for i, (src, ref) in enumerate(zip(src_lines, ref_lines)):
            enc = tok(src, text_target=ref, return_tensors="pt")
            s, t = enc.input_ids, enc.labels  # [1, S], [1, T]
            dec_in = torch.cat([torch.tensor([[eos]]), t[:, :-1]], dim=1)  # [1, T]
            tensors[f"src.{i}"] = s[0].clone()
            tensors[f"tgt.{i}"] = t[0].clone()
            tensors[f"logits.{i}"] = model(input_ids=s, decoder_input_ids=dec_in).logits[0].float().contiguous()
            for kind, beams in kinds.items():
                out = model.generate(s, generation_config=gen, num_beams=beams)[0, 1:]  # no start token
                out = out[out != pad]
                tensors[f"{kind}.{i}"] = out.clone()
                texts[kind].append(tok.decode(out, skip_special_tokens=True))
        for k, line in enumerate(OTHER_SCRIPTS):
            tensors[f"ids.{k}"] = torch.tensor(tok(line).input_ids)
    save_file(tensors, os.path.join(args.out, "expect.safetensors"))
    with open(os.path.join(args.out, "expect.json"), "w", encoding="utf-8") as f:
        json.dump({"family": args.family, "source": src_lines, "reference": ref_lines, "other_scripts": OTHER_SCRIPTS,
                   "vocab_size": n, "pad": pad, "eos": eos, "bos": bos, "unk": tok.unk_token_id,
                   "src_lang": src_lang, "tgt_lang": tgt_lang, "src_code": src_code, "tgt_code": tgt_code,
                   "legacy": args.family == "nllb_legacy",
                   "src_code_piece": tok.convert_ids_to_tokens(src_code),
                   "tgt_code_piece": tok.convert_ids_to_tokens(tgt_code), "max_new_tokens": max_new,
                   "files": sorted(os.listdir(hf)), **texts}, f, ensure_ascii=False, indent=1)


if __name__ == "__main__":
    main()
