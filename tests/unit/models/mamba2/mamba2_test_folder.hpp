// A tiny mamba_ssm config.json for the Mamba-2 task, kind and model cache tests: d_model 8, expand 2
// (E = 16), headdim 4 (4 heads), 2 groups of d_state 3, chunks of 4 tokens, 2 layers, vocab 30
// padded to 32; and a checkpoint folder written from any WeightSource (RandomWeights, say) in F64
// under MambaLMHeadModel's tensor names, the Linear weights stored [out, in] and the convolution
// [conv_dim, 1, d_conv] as mamba_ssm stores them. Read back by CheckpointWeights, the folder gives
// the source's weights bitwise.
#pragma once
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "models/mamba2/mamba2.hpp"

#include "../../checkpoint/checkpoint_test_support.hpp"

namespace rcsweep::models::mamba2::test {

using checkpoint::test::TempDir;

inline constexpr int d = 8, n_layer = 2, chunk = 4;

inline void write_config(const std::filesystem::path& folder) {
  const nlohmann::json c = {
      {"d_model", d},
      {"n_layer", n_layer},
      {"vocab_size", 30},
      {"pad_vocab_size_multiple", 8},
      {"ssm_cfg",
       {{"layer", "Mamba2"}, {"d_state", 3}, {"headdim", 4}, {"expand", 2}, {"ngroups", 2}, {"chunk_size", chunk}}}};
  checkpoint::test::write_bytes(folder / "config.json", c.dump());
}

inline std::string f64_bytes(const std::vector<double>& v) {
  return {reinterpret_cast<const char*>(v.data()), v.size() * sizeof(double)};  // little-endian hosts
}

inline std::string shape_text(const std::vector<std::size_t>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) out += (i ? "," : "") + std::to_string(shape[i]);
  return out + "]";
}

/// The transpose of A (rows x cols) as a row-major [cols, rows] tensor: an nn.Linear's [out, in].
inline std::vector<double> transposed(const Matrix& A) {
  std::vector<double> out;
  out.reserve(A.rows() * A.cols());
  for (std::size_t j = 0; j < A.cols(); ++j)
    for (std::size_t i = 0; i < A.rows(); ++i) out.push_back(A(i, j));
  return out;
}

/// config.json (write_config's) and model.safetensors (F64) holding `source`'s embedding, final
/// norm and its first n_layer layers (the shape of write_config: no biases, conv bias, D per head,
/// the gated norm).
inline void write_checkpoint(const std::filesystem::path& folder, const WeightSource& source) {
  write_config(folder);
  const Mamba2Shape& s = source.shape();
  const auto z = [](int v) { return static_cast<std::size_t>(v); };
  checkpoint::test::Writer w;
  std::vector<std::int64_t> ids;
  for (int id = 0; id < s.vocab_rows; ++id) ids.push_back(id);
  const Matrix embedding = source.embedding(ids);
  w.add("backbone.embedding.weight", "F64", shape_text({z(s.vocab_rows), z(s.d_model)}),
        f64_bytes(std::vector<double>(embedding.values().begin(), embedding.values().end())));
  w.add("backbone.norm_f.weight", "F64", shape_text({z(s.d_model)}), f64_bytes(source.final_norm()));
  for (int l = 0; l < s.layers; ++l) {
    const LayerWeights lw = source.layer(l);
    const std::string p = "backbone.layers." + std::to_string(l) + ".";
    std::vector<double> conv;  // [conv_dim, 1, d_conv]
    for (std::size_t c = 0; c < lw.conv.cols(); ++c)
      for (std::size_t k = 0; k < lw.conv.rows(); ++k) conv.push_back(lw.conv(k, c));
    w.add(p + "norm.weight", "F64", shape_text({z(s.d_model)}), f64_bytes(lw.norm))
        .add(p + "mixer.in_proj.weight", "F64", shape_text({z(s.d_in_proj()), z(s.d_model)}),
             f64_bytes(transposed(lw.W_in)))
        .add(p + "mixer.conv1d.weight", "F64", shape_text({z(s.conv_dim()), 1, z(s.d_conv)}), f64_bytes(conv))
        .add(p + "mixer.conv1d.bias", "F64", shape_text({z(s.conv_dim())}), f64_bytes(lw.conv_bias))
        .add(p + "mixer.dt_bias", "F64", shape_text({z(s.heads())}), f64_bytes(lw.dt_bias))
        .add(p + "mixer.A_log", "F64", shape_text({z(s.heads())}), f64_bytes(lw.A_log))
        .add(p + "mixer.D", "F64", shape_text({z(s.heads())}), f64_bytes(lw.D))
        .add(p + "mixer.norm.weight", "F64", shape_text({z(s.d_inner())}), f64_bytes(lw.gated_norm))
        .add(p + "mixer.out_proj.weight", "F64", shape_text({z(s.d_model), z(s.d_inner())}),
             f64_bytes(transposed(lw.W_out)));
  }
  w.write(folder / "model.safetensors");
}

}  // namespace rcsweep::models::mamba2::test
