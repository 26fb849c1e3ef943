// mtx's Transformer parameter names, declared once: the model registers its modules under these names, and the
// importers (bundle/import.h) and the CTranslate2 exporter (scripts/ct2_convert.py, through as_json() in the
// export's metadata) name parameters with them.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace mtx::model::names {

// The model's modules and parameters (TransformerImpl).
inline constexpr const char* kSrcEmbed = "src_embed";
inline constexpr const char* kTgtEmbed = "tgt_embed";
inline constexpr const char* kPositions = "positions";           // "embedding" (learned) or the buffer "table"
inline constexpr const char* kTgtPositions = "tgt_positions";    // the decoder's own (model.share_positions false)
inline constexpr const char* kPositionsEmbedding = "embedding";  // learned positions' table
inline constexpr const char* kPositionsTable = "table";          // a sinusoid's buffer
inline constexpr const char* kEncoder = "encoder";
inline constexpr const char* kDecoder = "decoder";
inline constexpr const char* kEncoderNorm = "encoder_norm";             // pre-norm: after the last encoder layer
inline constexpr const char* kDecoderNorm = "decoder_norm";             // pre-norm: after the last decoder layer
inline constexpr const char* kEncoderEmbedNorm = "encoder_embed_norm";  // model.embedding_norm
inline constexpr const char* kDecoderEmbedNorm = "decoder_embed_norm";
inline constexpr const char* kOutput = "output";           // an untied output projection
inline constexpr const char* kOutputBias = "output_bias";  // the tied projection's bias

// A layer's modules (EncoderLayerImpl, DecoderLayerImpl) and theirs.
inline constexpr const char* kSelfAttn = "self_attn";
inline constexpr const char* kSsru = "ssru";  // a decoder layer's SSRU (model.decoder_autoreg ssru), for self_attn
inline constexpr const char* kProj = "proj";  // the SSRU's fused [W; W_f] projection
inline constexpr const char* kCrossAttn = "cross_attn";
inline constexpr const char* kFfn = "ffn";
inline constexpr const char* kNorm1 = "norm1";  // before/after self-attention
inline constexpr const char* kNorm2 = "norm2";  // encoder: the feed-forward block's; decoder: cross-attention's
inline constexpr const char* kNorm3 = "norm3";  // decoder: the feed-forward block's
inline constexpr const char* kQkv = "qkv";      // self-attention's fused [Q; K; V] projection
inline constexpr const char* kQ = "q";          // cross-attention's query projection
inline constexpr const char* kKv = "kv";        // cross-attention's fused [K; V] projection
inline constexpr const char* kOut = "out";      // an attention's output projection
inline constexpr const char* kFc1 = "fc1";
inline constexpr const char* kFc2 = "fc2";

// Layer i's parts by role, full names without ".weight" / ".bias" (an encoder layer's cross_* are empty).
struct LayerNames {
  std::string self_qkv, self_out, self_norm;
  std::string ssru;  // a decoder layer's SSRU projection, where it has one in place of self_qkv and self_out
  std::string cross_q, cross_kv, cross_out, cross_norm;
  std::string fc1, fc2, ffn_norm;
};
LayerNames encoder_layer(int64_t i);
LayerNames decoder_layer(int64_t i);

// "<module>.<parameter>": e.g. join(kOutput, "weight") = "output.weight".
std::string join(const std::string& module, const std::string& parameter);

// Every name above, for a script: {"src_embed": "src_embed.weight", ..., "encoder_layer": {role: "encoder.{i}..."},
// "decoder_layer": {...}} ("{i}" stands for the layer's index).
nlohmann::json as_json();

}  // namespace mtx::model::names
