// Keyed counter-based random numbers (Random123 Philox4x64-10). A stream is identified by a
// StreamKey; the same key always yields the same numbers, whatever rank or thread draws them.
#pragma once
#include <cstdint>
#include <span>

namespace rcsweep::rng {

/// Which random tensor of a layer a stream feeds (part of the key; never reuse a value).
enum class Tensor : std::uint32_t {
  input = 0,        ///< X_0
  value = 1,        ///< W_V
  query = 2,        ///< W_Q
  key = 3,          ///< W_K
  markov = 4,       ///< the Gaussian G of a Markov attention matrix
  gate = 5,         ///< W_G of the SiLU gate
  mlp_in = 6,       ///< W_1 of the MLP
  mlp_out = 7,      ///< W_2 of the MLP
  ssm_b = 8,        ///< W_B of the selective SSM, b of the LTI gain
  ssm_c = 9,        ///< W_C of the selective SSM, c of the LTI gain
  s4d_step = 10,    ///< the log-uniform step sizes Delta_c of S4D
  grad_probe = 11,  ///< the Hutchinson probes v (layer = output depth L, head = probe index)
  // The BERT-family encoders' published initialisation (models/encoder/random_weights.cpp): one
  // stream per tensor kind, layer = the weight group (0 for the embedding tables).
  encoder_word = 12,        ///< word embedding (vocab x embedding_size)
  encoder_position = 13,    ///< position embedding (max_positions x embedding_size)
  encoder_token_type = 14,  ///< token-type embedding (type_vocab x embedding_size)
  encoder_projection = 15,  ///< ALBERT's embedding projection (embedding_size x d)
  encoder_query = 16,       ///< W_Q (d x d)
  encoder_key = 17,         ///< W_K (d x d)
  encoder_value = 18,       ///< W_V (d x d)
  encoder_output = 19,      ///< the attention's output projection W_O (d x d)
  encoder_mlp_in = 20,      ///< W_1 (d x intermediate)
  encoder_mlp_out = 21,     ///< W_2 (intermediate x d)
  // Mamba-2's published initialisation (models/mamba2/random_weights.cpp): one stream per tensor
  // kind, layer = the layer (0-based; 0 for the embedding).
  mamba2_embedding = 22,  ///< the embedding (vocab_rows x d_model), normal
  mamba2_in_proj = 23,    ///< W_in (d_model x d_in_proj), uniform
  mamba2_conv = 24,       ///< the convolution's weights (d_conv x conv_dim), uniform
  mamba2_conv_bias = 25,  ///< the convolution's bias (conv_dim), uniform
  mamba2_dt = 26,         ///< the log-uniform dt behind dt_bias (heads), uniform
  mamba2_A = 27,          ///< A = -U(A_init_range) behind A_log (heads), uniform
  mamba2_out_proj = 28,   ///< W_out (d_inner x d_model), uniform
};

/// Identifies one random tensor. Never contains the rank, thread, lambda or a component switch
/// (MODELS.md "Randomness"): tasks that differ only in those see the same numbers.
struct StreamKey {
  std::uint64_t seed = 0;
  std::uint32_t replicate = 0;
  std::uint32_t T = 0;
  std::uint32_t d = 0;
  std::uint32_t layer = 0;  ///< 0 for the input, 1..L for layers
  Tensor tensor = Tensor::input;
  std::uint32_t head = 0;
};

/// Fill `out` with i.i.d. standard normals of stream `key` (Box–Muller on Philox uniforms).
/// Element i depends only on (key, i): filling a prefix gives the prefix of a longer fill.
/// Runs the widest build of the kernel the CPU has (AVX-512, AVX2 or baseline x86-64); the numbers
/// are bitwise the same on every x86-64 CPU (MODELS.md "Randomness").
void fill_normal(const StreamKey& key, std::span<double> out);
/// Fill `out` with elements first .. first + out.size() - 1 of the normal stream `key`: the same
/// values as out.size() entries from `first` on of one longer fill_normal (a row of a table drawn
/// without the rows before it).
void fill_normal(const StreamKey& key, std::uint64_t first, std::span<double> out);

/// Fill `out` with i.i.d. uniforms in the open interval (0, 1) of stream `key`.
/// Uses a different counter range than fill_normal for the same key.
void fill_uniform(const StreamKey& key, std::span<double> out);

}  // namespace rcsweep::rng
