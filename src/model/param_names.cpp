#include "mtx/model/param_names.h"

namespace mtx::model::names {
namespace {

LayerNames layer(const std::string& at, bool decoder) {
  const auto in = [&](const char* module, const char* part) { return at + "." + module + "." + part; };
  LayerNames n;
  n.self_qkv = in(kSelfAttn, kQkv);
  n.self_out = in(kSelfAttn, kOut);
  n.self_norm = at + "." + kNorm1;
  if (decoder) {
    n.ssru = in(kSsru, kProj);
    n.cross_q = in(kCrossAttn, kQ);
    n.cross_kv = in(kCrossAttn, kKv);
    n.cross_out = in(kCrossAttn, kOut);
    n.cross_norm = at + "." + kNorm2;
  }
  n.fc1 = in(kFfn, kFc1);
  n.fc2 = in(kFfn, kFc2);
  n.ffn_norm = at + "." + (decoder ? kNorm3 : kNorm2);
  return n;
}

nlohmann::json layer_json(const LayerNames& n) {
  nlohmann::json j = {{"self_qkv", n.self_qkv}, {"self_out", n.self_out}, {"self_norm", n.self_norm},
                      {"fc1", n.fc1},           {"fc2", n.fc2},           {"ffn_norm", n.ffn_norm}};
  if (!n.cross_q.empty()) {
    j["cross_q"] = n.cross_q;
    j["cross_kv"] = n.cross_kv;
    j["cross_out"] = n.cross_out;
    j["cross_norm"] = n.cross_norm;
  }
  return j;
}

}  // namespace

LayerNames encoder_layer(int64_t i) { return layer(std::string(kEncoder) + "." + std::to_string(i), false); }
LayerNames decoder_layer(int64_t i) { return layer(std::string(kDecoder) + "." + std::to_string(i), true); }

std::string join(const std::string& module, const std::string& parameter) { return module + "." + parameter; }

nlohmann::json as_json() {
  return {{"src_embed", join(kSrcEmbed, "weight")},
          {"tgt_embed", join(kTgtEmbed, "weight")},
          {"positions_embedding", join(join(kPositions, kPositionsEmbedding), "weight")},
          {"positions_table", join(kPositions, kPositionsTable)},
          {"tgt_positions_embedding", join(join(kTgtPositions, kPositionsEmbedding), "weight")},
          {"tgt_positions_table", join(kTgtPositions, kPositionsTable)},
          {"encoder_norm", kEncoderNorm},
          {"decoder_norm", kDecoderNorm},
          {"encoder_embed_norm", kEncoderEmbedNorm},
          {"decoder_embed_norm", kDecoderEmbedNorm},
          {"output", kOutput},
          {"output_bias", kOutputBias},
          {"encoder_layer", layer_json(layer(std::string(kEncoder) + ".{i}", false))},
          {"decoder_layer", layer_json(layer(std::string(kDecoder) + ".{i}", true))}};
}

}  // namespace mtx::model::names
