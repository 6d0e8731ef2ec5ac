// A tiny mamba_ssm config.json for the Mamba-2 task, kind and model cache tests: d_model 8, expand 2
// (E = 16), headdim 4 (4 heads), 2 groups of d_state 3, chunks of 4 tokens, 2 layers, vocab 30
// padded to 32.
#pragma once
#include <filesystem>
#include <nlohmann/json.hpp>

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

}  // namespace rcsweep::models::mamba2::test
