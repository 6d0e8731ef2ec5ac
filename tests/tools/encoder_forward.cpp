// encoder_forward: rcsweep's BERT-family encoder block on a model folder and a token file, every
// layer's hidden states written as a .npy file, for the tests against the NumPy reference
// (tests/python/test_encoder_reference.py, tests/python/encoder_reference.py; docs/ENCODERS.md).
//
//   encoder_forward MODEL_DIR TOKENS OUT.npy [--random SEED DRAW] [--lambda A M] [--no-mlp]
//                   [--no-norm] [--causal] [--layers K] [--save-weights DIR]
//
// MODEL_DIR is a Hugging Face folder (config.json and model.safetensors, or its shards): its
// weights through CheckpointWeights; with --random only its config.json is read and the weights
// are RandomWeights(shape, SEED, DRAW), the published initialisation. Every excerpt of TOKENS is
// padded to the longest with pad_token_id (padded keys masked), embedded and run through K blocks
// (default num_hidden_layers; more than that only for ALBERT, whose groups spread over the depth,
// and for --random). OUT.npy holds excerpts x (K + 1) x T x d float64: X_0 (the embedding), then the
// output of every block. --save-weights DIR (with --random) also writes the drawn weights as a
// model folder of Hugging Face tensor names (F64), so that the reference can run them.
// Exit 0 on success, 2 on bad input (a ConfigError), 1 on any other error.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "base/error.hpp"
#include "base/matrix.hpp"
#include "checkpoint/model_config.hpp"
#include "checkpoint/token_file.hpp"
#include "models/encoder/checkpoint_weights.hpp"
#include "models/encoder/encoder.hpp"

namespace {

namespace fs = std::filesystem;
namespace enc = rcsweep::models::encoder;
using rcsweep::ConfigError;
using rcsweep::Matrix;

const char* const usage =
    "usage: encoder_forward MODEL_DIR TOKENS OUT.npy [--random SEED DRAW] [--lambda A M] [--no-mlp] [--no-norm]\n"
    "                       [--causal] [--layers K] [--save-weights DIR]\n";

struct Args {
  fs::path model, tokens, out, save_weights;
  bool random = false;
  std::uint64_t seed = 0;
  std::uint32_t draw = 0;
  enc::Ablation ablation;
  int layers = -1;
};

[[noreturn]] void bad_usage(const std::string& why) { throw ConfigError({{"encoder_forward", why + "\n" + usage}}); }

template <class T>
T number(const char* text, const char* option) {
  std::size_t used = 0;
  try {
    if constexpr (std::is_floating_point_v<T>) {
      const double v = std::stod(text, &used);
      if (used == std::strlen(text)) return v;
    } else {
      const unsigned long long v = std::stoull(text, &used);
      if (used == std::strlen(text) && text[0] != '-' && v <= std::numeric_limits<T>::max()) return static_cast<T>(v);
    }
  } catch (const std::exception&) {
  }
  bad_usage(std::string(option) + ": '" + text + "' is not a valid value");
}

Args parse(int argc, char** argv) {
  Args a;
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    const std::string_view s = argv[i];
    const auto need = [&](int n) {
      if (i + n >= argc) bad_usage(std::string(s) + " needs " + std::to_string(n) + " value(s)");
    };
    if (s == "--random") {
      need(2);
      a.random = true;
      a.seed = number<std::uint64_t>(argv[i + 1], "--random");
      a.draw = number<std::uint32_t>(argv[i + 2], "--random");
      i += 2;
    } else if (s == "--lambda") {
      need(2);
      a.ablation.lambda_attention = number<double>(argv[i + 1], "--lambda");
      a.ablation.lambda_mlp = number<double>(argv[i + 2], "--lambda");
      i += 2;
    } else if (s == "--no-mlp") {
      a.ablation.mlp = false;
    } else if (s == "--no-norm") {
      a.ablation.norm = false;
    } else if (s == "--causal") {
      a.ablation.causal = true;
    } else if (s == "--layers") {
      need(1);
      a.layers = static_cast<int>(number<std::uint32_t>(argv[++i], "--layers"));
    } else if (s == "--save-weights") {
      need(1);
      a.save_weights = argv[++i];
    } else if (s == "-h" || s == "--help") {
      std::cout << usage;
      std::exit(0);
    } else if (s.starts_with("-")) {
      bad_usage("unknown option " + std::string(s));
    } else {
      positional.emplace_back(s);
    }
  }
  if (positional.size() != 3) bad_usage("expected MODEL_DIR TOKENS OUT.npy");
  if (!a.save_weights.empty() && !a.random) bad_usage("--save-weights is for --random weights");
  a.model = positional[0];
  a.tokens = positional[1];
  a.out = positional[2];
  return a;
}

void write_file(const fs::path& path, const std::string& head, const void* data, std::size_t bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(head.data(), static_cast<std::streamsize>(head.size()));
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  if (!out) throw rcsweep::Error("cannot write " + path.string());
}

// NumPy's .npy format 1.0: magic, version, header length, a dict padded to 64 bytes, the data.
void write_npy(const fs::path& path, const std::vector<std::size_t>& shape, const std::vector<double>& data) {
  std::string dims;
  for (const std::size_t n : shape) dims += std::to_string(n) + ", ";
  std::string dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (" + dims + "), }";
  dict += std::string(64 - (10 + dict.size() + 1) % 64, ' ') + "\n";
  std::string head = "\x93NUMPY";
  head += '\x01';  // version 1.0
  head += '\0';
  head += static_cast<char>(dict.size() & 0xff);
  head += static_cast<char>(dict.size() >> 8);
  write_file(path, head + dict, data.data(), data.size() * sizeof(double));
}

// The drawn weights as a model folder: config.json copied, model.safetensors with every tensor
// of the family's table (Hugging Face's names, nn.Linear weights back to [out, in]) as F64.
void save_weights(const fs::path& dir, const fs::path& config, const enc::WeightSource& source) {
  const enc::EncoderShape& s = source.shape();
  enc::EmbeddingRequest all;
  for (int i = 0; i < s.vocab; ++i) all.ids.push_back(i);
  all.max_position = s.max_positions - 1;
  const enc::EmbeddingWeights e = source.embeddings(all);
  std::map<std::string, std::pair<std::vector<std::size_t>, std::vector<double>>> tensors;
  const auto matrix = [](const Matrix& m, bool transpose) {
    std::vector<double> v(m.size());
    for (std::size_t i = 0; i < m.rows(); ++i)
      for (std::size_t j = 0; j < m.cols(); ++j) (transpose ? v[j * m.rows() + i] : v[i * m.cols() + j]) = m(i, j);
    return std::make_pair(
        transpose ? std::vector<std::size_t>{m.cols(), m.rows()} : std::vector<std::size_t>{m.rows(), m.cols()}, v);
  };
  const auto vec = [](const std::vector<double>& v) { return std::make_pair(std::vector<std::size_t>{v.size()}, v); };
  const std::string prefix(enc::tensor_prefixes(s.family)[0]);
  for (int g = 0; g < s.groups(); ++g) {
    const enc::BlockWeights b = source.block(g);
    for (const enc::TensorEntry& t : enc::tensor_table(s.family)) {
      const std::string name = prefix + enc::tensor_name(t.name, g);
      switch (t.role) {
        case enc::Role::word: tensors[name] = matrix(e.word, false); break;
        case enc::Role::position: tensors[name] = matrix(e.position, false); break;
        case enc::Role::token_type: tensors[name] = matrix(e.token_type, false); break;
        case enc::Role::embedding_norm_gamma: tensors[name] = vec(e.norm.gamma); break;
        case enc::Role::embedding_norm_beta: tensors[name] = vec(e.norm.beta); break;
        case enc::Role::projection: tensors[name] = matrix(e.projection, true); break;
        case enc::Role::projection_bias: tensors[name] = vec(e.projection_bias); break;
        case enc::Role::query: tensors[name] = matrix(b.W_Q, true); break;
        case enc::Role::query_bias: tensors[name] = vec(b.b_Q); break;
        case enc::Role::key: tensors[name] = matrix(b.W_K, true); break;
        case enc::Role::key_bias: tensors[name] = vec(b.b_K); break;
        case enc::Role::value: tensors[name] = matrix(b.W_V, true); break;
        case enc::Role::value_bias: tensors[name] = vec(b.b_V); break;
        case enc::Role::attention_output: tensors[name] = matrix(b.W_O, true); break;
        case enc::Role::attention_output_bias: tensors[name] = vec(b.b_O); break;
        case enc::Role::attention_norm_gamma: tensors[name] = vec(b.norm_attention.gamma); break;
        case enc::Role::attention_norm_beta: tensors[name] = vec(b.norm_attention.beta); break;
        case enc::Role::mlp_in: tensors[name] = matrix(b.W_1, true); break;
        case enc::Role::mlp_in_bias: tensors[name] = vec(b.b_1); break;
        case enc::Role::mlp_out: tensors[name] = matrix(b.W_2, true); break;
        case enc::Role::mlp_out_bias: tensors[name] = vec(b.b_2); break;
        case enc::Role::mlp_norm_gamma: tensors[name] = vec(b.norm_mlp.gamma); break;
        case enc::Role::mlp_norm_beta: tensors[name] = vec(b.norm_mlp.beta); break;
      }
    }
  }
  std::string header = "{";
  std::vector<double> data;
  for (const auto& [name, tensor] : tensors) {
    const auto& [shape, values] = tensor;
    std::string dims;
    for (const std::size_t n : shape) dims += (dims.empty() ? "" : ",") + std::to_string(n);
    const std::size_t begin = data.size() * sizeof(double);
    data.insert(data.end(), values.begin(), values.end());
    header += (header.size() > 1 ? "," : "") + std::string("\"") + name + "\":{\"dtype\":\"F64\",\"shape\":[" + dims +
              "],\"data_offsets\":[" + std::to_string(begin) + "," + std::to_string(data.size() * sizeof(double)) +
              "]}";
  }
  header += "}";
  header += std::string((8 - header.size() % 8) % 8, ' ');
  std::string head(8, '\0');
  const std::uint64_t n = header.size();
  std::memcpy(head.data(), &n, 8);  // little-endian hosts only, as the reader
  fs::create_directories(dir);
  fs::copy_file(config, dir / "config.json", fs::copy_options::overwrite_existing);
  write_file(dir / "model.safetensors", head + header, data.data(), data.size() * sizeof(double));
}

int run(const Args& a) {
  std::shared_ptr<const enc::WeightSource> source;
  enc::EncoderShape shape;
  if (a.random) {
    shape = enc::encoder_shape(rcsweep::checkpoint::ModelConfig::load(a.model / "config.json"));
    if (a.layers >= 0) shape.layers = a.layers;  // a deeper random stack: more groups, the first ones unchanged
    source = std::make_shared<enc::RandomWeights>(shape, a.seed, a.draw);
  } else {
    source = enc::CheckpointWeights::open(a.model);
    shape = source->shape();
    if (a.layers > shape.layers && shape.family != enc::Family::albert)
      throw ConfigError({{a.model.string(), "--layers " + std::to_string(a.layers) + ": the checkpoint has " +
                                                std::to_string(shape.layers) + " layers (only ALBERT shares them)"}});
    if (a.layers >= 0) shape.layers = a.layers;  // ALBERT: the groups spread over the new depth
  }
  if (!a.save_weights.empty()) save_weights(a.save_weights, a.model / "config.json", *source);

  const rcsweep::checkpoint::TokenFile tokens = rcsweep::checkpoint::read_token_file(a.tokens);
  tokens.check_vocabulary(shape.vocab);
  const std::size_t T = tokens.longest();
  const std::size_t positions = static_cast<std::size_t>(shape.position_offset()) + T;
  if (positions > static_cast<std::size_t>(shape.max_positions))
    throw ConfigError(
        {{a.tokens.string(), "the longest excerpt has " + std::to_string(T) + " tokens: positions up to " +
                                 std::to_string(positions - 1) +
                                 ", beyond max_position_embeddings = " + std::to_string(shape.max_positions)}});

  std::set<std::int64_t> ids{shape.pad_token_id};
  for (const auto& e : tokens.excerpts) ids.insert(e.begin(), e.end());
  enc::EmbeddingRequest request;
  request.ids.assign(ids.begin(), ids.end());
  request.max_position = static_cast<int>(positions - 1);
  const enc::EmbeddingWeights embedding = source->embeddings(request);

  const std::size_t n = tokens.size(), depth = static_cast<std::size_t>(shape.layers) + 1;
  const auto d = static_cast<std::size_t>(shape.d);
  std::vector<double> out(n * depth * T * d);
  const auto store = [&](std::size_t k, std::size_t layer, const Matrix& X) {
    std::copy(X.data(), X.data() + X.size(), out.begin() + static_cast<std::ptrdiff_t>(((k * depth + layer) * T) * d));
  };
  std::vector<Matrix> X(n);
  std::vector<std::vector<bool>> real(n);
  for (std::size_t k = 0; k < n; ++k) {
    const rcsweep::checkpoint::PaddedTokens p = tokens.padded(k, T, shape.pad_token_id);
    enc::Excerpt excerpt{p.ids, {}, p.real};
    real[k] = p.real;
    X[k] = enc::embed(shape, embedding, request, excerpt);
    store(k, 0, X[k]);
  }
  for (int layer = 1; layer <= shape.layers; ++layer) {
    const enc::BlockWeights block = source->block(shape.group_of(layer));
    for (std::size_t k = 0; k < n; ++k) {
      enc::apply_block(shape, block, a.ablation, real[k], X[k]);
      store(k, static_cast<std::size_t>(layer), X[k]);
    }
  }
  write_npy(a.out, {n, depth, T, d}, out);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const ConfigError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
