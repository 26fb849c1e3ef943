#!/usr/bin/env python3
"""Converts an mtx safetensors export (mtx export --format safetensors) into a CTranslate2 model directory
through CTranslate2's own converter specs (ctranslate2 from PyPI). mtx export --format ct2 runs this very
file (built into the binary); it also runs alone:

    python scripts/ct2_convert.py --input EXPORT_DIR --output CT2_DIR [--quantization int8] [--force]

The mapping: mtx's fused QKV and cross-attention KV projections are CTranslate2's fused linear layers in
the same order; each layer's self-attention, encoder-attention and feed-forward layer norms are theirs
(pre- or post-norm alike); the position table is exported from the model's position offset on; embeddings
are scaled by sqrt(d_model) where the model scales them, and normalised where it has an embedding norm; the
source gets </s> appended; decoding starts from <s>. mtx's parameter names come from the export's metadata
("names", model/param_names.h), never spelled here.
"""
import argparse
import json
import os
import sys


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", required=True, help="mtx export directory (model.safetensors, mtx_export.json)")
    parser.add_argument("--output", required=True, help="CTranslate2 model directory to write")
    parser.add_argument("--quantization", default=None, help="CTranslate2 weight type, e.g. int8 (default: float32)")
    parser.add_argument("--force", action="store_true", help="Replace an existing output directory")
    args = parser.parse_args()
    try:
        import numpy as np
        from safetensors.numpy import load_file
        from ctranslate2.converters.converter import Converter
        from ctranslate2.specs import common_spec, transformer_spec
    except ImportError as e:
        sys.exit(f"ct2_convert: {e.name or e} is missing: pip install ctranslate2 safetensors numpy "
                 "(e.g. into the project's .venv and pass --python .venv/bin/python)")

    with open(os.path.join(args.input, "mtx_export.json"), encoding="utf-8") as f:
        meta = json.load(f)
    if meta.get("format") != "mtx-export-1":
        sys.exit(f"ct2_convert: {args.input}: not an mtx export (format {meta.get('format')!r})")
    m = meta["model"]
    if m["task"] != "translation":
        sys.exit("ct2_convert: only translation models convert to CTranslate2's TransformerSpec")
    if m["positions"] not in ("sinusoidal", "sinusoidal_halves", "sinusoidal_marian", "learned"):
        sys.exit(f"ct2_convert: unknown positions {m['positions']!r}")
    w = load_file(os.path.join(args.input, "model.safetensors"))

    class MtxConverter(Converter):
        def _load(self):
            activations = {"relu": common_spec.Activation.RELU, "gelu": common_spec.Activation.GELU,
                           "swish": common_spec.Activation.SWISH, "gelu_sigmoid": common_spec.Activation.GELUSigmoid}
            if m["activation"] not in activations:
                sys.exit(f"ct2_convert: unknown activation {m['activation']!r}")
            activation = activations[m["activation"]]
            spec = transformer_spec.TransformerSpec.from_config(
                (m["encoder_layers"], m["decoder_layers"]), m["heads"], pre_norm=m["pre_norm"], activation=activation,
                layernorm_embedding=m.get("embedding_norm", False))
            n = meta["names"]  # mtx's parameter names (model/param_names.h)
            src_embed = w[n["src_embed"]]
            tgt_embed = src_embed if m["share_embeddings"] else w[n["tgt_embed"]]
            def position_table(which):  # CTranslate2 reads row p for position p
                table = w[n[which + "_embedding"]] if m["positions"] == "learned" else w[n[which + "_table"]]
                return table[m.get("position_offset", 0):]

            positions = position_table("positions")
            tgt_positions = positions if m.get("share_positions", True) else position_table("tgt_positions")

            def linear(spec_, name, weight=None):
                spec_.weight = w[name + ".weight"] if weight is None else weight
                if name + ".bias" in w:
                    spec_.bias = w[name + ".bias"]

            def norm(spec_, name):
                spec_.gamma = w[name + ".weight"]
                spec_.beta = w[name + ".bias"]

            def layer_names(side, i):
                return {role: name.replace("{i}", str(i)) for role, name in n[side + "_layer"].items()}

            def self_attention(spec_, ln):
                linear(spec_.linear[0], ln["self_qkv"])  # fused [Q; K; V]
                linear(spec_.linear[1], ln["self_out"])
                norm(spec_.layer_norm, ln["self_norm"])

            def ffn(spec_, ln):
                linear(spec_.linear_0, ln["fc1"])
                linear(spec_.linear_1, ln["fc2"])
                norm(spec_.layer_norm, ln["ffn_norm"])

            def stack(spec_, embed, table, final_norm, embed_norm):
                spec_.scale_embeddings = m.get("scale_embeddings", True)
                spec_.position_encodings.encodings = table
                if m["pre_norm"]:
                    norm(spec_.layer_norm, final_norm)
                if m.get("embedding_norm", False):
                    norm(spec_.layernorm_embedding, embed_norm)
                return embed

            enc = spec.encoder
            enc.embeddings[0].weight = stack(enc, src_embed, positions, n["encoder_norm"], n["encoder_embed_norm"])
            for i, layer in enumerate(enc.layer):
                ln = layer_names("encoder", i)
                self_attention(layer.self_attention, ln)
                ffn(layer.ffn, ln)

            dec = spec.decoder
            dec.embeddings.weight = stack(dec, tgt_embed, tgt_positions, n["decoder_norm"], n["decoder_embed_norm"])
            for i, layer in enumerate(dec.layer):
                ln = layer_names("decoder", i)
                self_attention(layer.self_attention, ln)
                linear(layer.attention.linear[0], ln["cross_q"])
                linear(layer.attention.linear[1], ln["cross_kv"])  # fused [K; V]
                linear(layer.attention.linear[2], ln["cross_out"])
                norm(layer.attention.layer_norm, ln["cross_norm"])
                ffn(layer.ffn, ln)
            if m["tie_output"]:
                dec.projection.weight = tgt_embed
                if m.get("output_bias"):
                    dec.projection.bias = w[n["output_bias"]]
            else:
                linear(dec.projection, n["output"])

            spec.register_source_vocabulary(meta["source_vocabulary"])
            spec.register_target_vocabulary(meta["target_vocabulary"])
            names = meta["special_pieces"]
            spec.config.unk_token = names["unk"]
            spec.config.bos_token = names["bos"]
            spec.config.eos_token = names["eos"]
            spec.config.decoder_start_token = names["bos"]
            spec.config.add_source_eos = True  # mtx's source ends with </s>
            spec.config.layer_norm_epsilon = m.get("layer_norm_epsilon", 1e-5)  # the model's (LibTorch's default)
            return spec

    out = MtxConverter().convert(args.output, quantization=args.quantization, force=args.force)
    for name in meta.get("tokenizer_files", []):  # the sentencepiece models, for CTranslate2 users
        with open(os.path.join(args.input, name), "rb") as src, open(os.path.join(out, name), "wb") as dst:
            dst.write(src.read())
    print(f"ct2_convert: wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
