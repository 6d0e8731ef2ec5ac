// mamba2_forward: rcsweep's Mamba-2 block on a model folder and a token file, every layer's hidden
// state and the final normed output written as a .npy file, for the tests against the NumPy
// reference (tests/python/test_mamba2_forward.py, tests/python/mamba2_reference.py).
//
//   mamba2_forward MODEL_DIR IDS OUT.npy [--random SEED DRAW] [--lambda L] [--no-norm] [--no-gate]
//                  [--no-gated-norm] [--layers K] [--ssd scan|quadratic|chunked] [--chunk Q]
//                  [--save-weights DIR]
//
// MODEL_DIR is a mamba_ssm folder (config.json and model.safetensors, or its shards): its weights
// through CheckpointWeights; with --random only its config.json is read and the weights are
// RandomWeights(shape, SEED, DRAW), the published initialisation. IDS is a token file
// (checkpoint/token_file.hpp), its lines one sequence of T ids, each below the embedding's rows;
// or a .npy file holding X_0 itself (T x d_model float64, C order). The sequence runs through K
// blocks (default n_layer; more only with --random) with lambda L (default 1) and the ablations,
// the SSD in the form asked (default chunked, chunks of Q tokens, default ssm_cfg's chunk_size).
// OUT.npy holds (K + 2) x T x d_model float64: X_0 .. X_K, then the final RMSNorm of X_K (norm_f;
// X_K itself with --no-norm). --save-weights DIR (with --random) also writes the drawn weights of
// max(K, n_layer) layers as a model folder of mamba_ssm's tensor names (F64), config.json copied,
// so that the reference can run them. Exit 0 on success, 2 on bad input (a ConfigError), 1 on any
// other error. The block runs on OMP_NUM_THREADS threads (1 when unset; the same bits on any
// number), each calling a one-thread BLAS, as a rank of rcsweep run; the weights are converted
// one layer at a time, each freed before the next.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "base/allocator.hpp"
#include "base/error.hpp"
#include "base/matrix.hpp"
#include "base/parallel.hpp"
#include "checkpoint/model_config.hpp"
#include "checkpoint/token_file.hpp"
#include "linalg/linalg.hpp"
#include "models/mamba2/checkpoint_weights.hpp"
#include "models/mamba2/mamba2.hpp"

namespace {

namespace fs = std::filesystem;
namespace m2 = rcsweep::models::mamba2;
using rcsweep::ConfigError;
using rcsweep::Matrix;

const char* const usage =
    "usage: mamba2_forward MODEL_DIR IDS OUT.npy [--random SEED DRAW] [--lambda L] [--no-norm] [--no-gate]\n"
    "                      [--no-gated-norm] [--layers K] [--ssd scan|quadratic|chunked] [--chunk Q]\n"
    "                      [--save-weights DIR]\n";

struct Args {
  fs::path model, ids, out, save_weights;
  bool random = false;
  std::uint64_t seed = 0;
  std::uint32_t draw = 0;
  m2::Ablation ablation;
  int layers = -1;
  m2::SsdForm form = m2::SsdForm::chunked;
  int chunk = 0;
};

[[noreturn]] void bad_usage(const std::string& why) { throw ConfigError({{"mamba2_forward", why + "\n" + usage}}); }

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
      need(1);
      a.ablation.lambda = number<double>(argv[++i], "--lambda");
    } else if (s == "--no-norm") {
      a.ablation.norm = false;
    } else if (s == "--no-gate") {
      a.ablation.gate = false;
    } else if (s == "--no-gated-norm") {
      a.ablation.gated_norm = false;
    } else if (s == "--layers") {
      need(1);
      a.layers = static_cast<int>(number<std::uint16_t>(argv[++i], "--layers"));
    } else if (s == "--ssd") {
      need(1);
      const std::string_view form = argv[++i];
      if (form == "scan")
        a.form = m2::SsdForm::scan;
      else if (form == "quadratic")
        a.form = m2::SsdForm::quadratic;
      else if (form == "chunked")
        a.form = m2::SsdForm::chunked;
      else
        bad_usage("--ssd: '" + std::string(form) + "' is not scan, quadratic or chunked");
    } else if (s == "--chunk") {
      need(1);
      a.chunk = static_cast<int>(number<std::uint32_t>(argv[++i], "--chunk"));
      if (a.chunk < 1) bad_usage("--chunk: a chunk has at least 1 token");
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
  if (positional.size() != 3) bad_usage("expected MODEL_DIR IDS OUT.npy");
  if (!a.save_weights.empty() && !a.random) bad_usage("--save-weights is for --random weights");
  a.model = positional[0];
  a.ids = positional[1];
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

// A T x d float64 C-order array of a .npy file (versions 1 to 3), d = `cols`.
Matrix read_npy(const fs::path& path, std::size_t cols) {
  const auto refuse = [&](const std::string& why) -> ConfigError { return ConfigError({{path.string(), why}}); };
  std::ifstream in(path, std::ios::binary);
  if (!in) throw refuse("cannot be read");
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0) throw refuse("not a .npy file");
  const auto byte = [&](std::size_t i) { return static_cast<std::size_t>(static_cast<unsigned char>(bytes[i])); };
  const bool v1 = bytes[6] == 1;
  const std::size_t start = v1 ? 10 : 12;
  if (bytes.size() < start) throw refuse("not a .npy file");
  const std::size_t length = v1 ? byte(8) | byte(9) << 8 : byte(8) | byte(9) << 8 | byte(10) << 16 | byte(11) << 24;
  if (bytes.size() < start + length) throw refuse("its header is cut short");
  const std::string header = bytes.substr(start, length);
  if (header.find("'descr': '<f8'") == std::string::npos || header.find("'fortran_order': False") == std::string::npos)
    throw refuse("holds " + header + ": X_0 must be little-endian float64 ('<f8') in C order");
  const auto open = header.find("'shape': (");
  const auto close = header.find(')', open);
  if (open == std::string::npos || close == std::string::npos) throw refuse("has no shape: " + header);
  std::vector<std::size_t> shape;
  std::string dims = header.substr(open + 10, close - open - 10);
  for (std::size_t at = 0; at < dims.size();) {
    const std::size_t comma = std::min(dims.find(',', at), dims.size());
    const std::string dim = dims.substr(at, comma - at);
    at = comma + 1;
    if (dim.find_first_not_of(' ') == std::string::npos) continue;
    std::size_t used = 0;
    try {
      shape.push_back(std::stoull(dim, &used));
    } catch (const std::exception&) {
    }
    if (used == 0) throw refuse("has shape (" + dims + "), not one of integers");
  }
  if (shape.size() != 2 || shape[1] != cols || shape[0] == 0)
    throw refuse("has shape (" + dims + "), not T x d_model = T x " + std::to_string(cols) + " with T >= 1");
  Matrix X(shape[0], cols, Matrix::uninitialized);
  if (bytes.size() != start + length + X.size() * sizeof(double)) throw refuse("its data do not match its shape");
  std::memcpy(X.data(), bytes.data() + start + length, X.size() * sizeof(double));  // little-endian hosts only
  return X;
}

// The drawn weights as a model folder: config.json copied, model.safetensors with every tensor of
// `layers` layers under mamba_ssm's names (nn.Linear weights back to [out, in], the convolution to
// [conv_dim, 1, d_conv]) as F64.
void save_weights(const fs::path& dir, const fs::path& config, const m2::WeightSource& source, int layers) {
  const m2::Mamba2Shape& s = source.shape();
  std::map<std::string, std::pair<std::vector<std::size_t>, std::vector<double>>> tensors;
  const auto transposed = [](const Matrix& m) {
    std::vector<double> v(m.size());
    for (std::size_t i = 0; i < m.rows(); ++i)
      for (std::size_t j = 0; j < m.cols(); ++j) v[j * m.rows() + i] = m(i, j);
    return v;
  };
  const auto put = [&](m2::Role role, int layer, std::vector<double> values) {
    std::string name;
    for (const m2::TensorEntry& e : m2::tensor_table())
      if (e.role == role) name = m2::tensor_name(e.name, layer);
    tensors[name] = {m2::stored_shape(s, role), std::move(values)};
  };
  std::vector<std::int64_t> all(static_cast<std::size_t>(s.vocab_rows));
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<std::int64_t>(i);
  const Matrix embedding = source.embedding(all);
  put(m2::Role::embedding, 0, {embedding.values().begin(), embedding.values().end()});
  put(m2::Role::final_norm, 0, source.final_norm());
  for (int l = 0; l < layers; ++l) {
    const m2::LayerWeights w = source.layer(l);
    put(m2::Role::norm, l, w.norm);
    put(m2::Role::in_proj, l, transposed(w.W_in));
    put(m2::Role::conv, l, transposed(w.conv));  // K x C -> [C, 1, K]
    put(m2::Role::dt_bias, l, w.dt_bias);
    put(m2::Role::A_log, l, w.A_log);
    put(m2::Role::D, l, w.D);
    put(m2::Role::out_proj, l, transposed(w.W_out));
    if (s.bias) {
      put(m2::Role::in_proj_bias, l, w.b_in);
      put(m2::Role::out_proj_bias, l, w.b_out);
    }
    if (s.conv_bias) put(m2::Role::conv_bias, l, w.conv_bias);
    if (s.rmsnorm) put(m2::Role::gated_norm, l, w.gated_norm);
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
  rcsweep::keep_freed_memory();  // as the rcsweep program does
  rcsweep::parallel::set_threads(rcsweep::parallel::threads_from_environment());
  rcsweep::linalg::set_blas_threads(1);
  std::shared_ptr<const m2::WeightSource> source;
  if (a.random)
    source = std::make_shared<m2::RandomWeights>(
        m2::mamba2_shape(rcsweep::checkpoint::ModelConfig::load(a.model / "config.json")), a.seed, a.draw);
  else
    source = m2::CheckpointWeights::open(a.model);
  m2::Mamba2Shape shape = source->shape();
  const int layers = a.layers >= 0 ? a.layers : shape.layers;
  if (!a.random && layers > shape.layers)
    throw ConfigError({{a.model.string(), "--layers " + std::to_string(layers) + ": the checkpoint has " +
                                              std::to_string(shape.layers) + " layers"}});
  if (a.chunk > 0) shape.chunk_size = a.chunk;
  if (!a.save_weights.empty())
    save_weights(a.save_weights, a.model / "config.json", *source, std::max(layers, shape.layers));

  Matrix X;
  if (a.ids.extension() == ".npy") {
    X = read_npy(a.ids, static_cast<std::size_t>(shape.d_model));
  } else {
    const rcsweep::checkpoint::TokenFile tokens = rcsweep::checkpoint::read_token_file(a.ids);
    tokens.check_vocabulary(shape.vocab_rows);
    std::vector<std::int64_t> ids;
    for (const auto& e : tokens.excerpts) ids.insert(ids.end(), e.begin(), e.end());
    X = source->embedding(ids);
  }
  const std::size_t T = X.rows(), d = X.cols(), depth = static_cast<std::size_t>(layers) + 2;
  std::vector<double> out(depth * T * d);
  const auto store = [&](std::size_t k) {
    std::copy(X.values().begin(), X.values().end(), out.begin() + static_cast<std::ptrdiff_t>(k * T * d));
  };
  store(0);
  for (int l = 0; l < layers; ++l) {
    m2::apply_block(shape, source->layer(l), a.ablation, X, nullptr, a.form);
    store(static_cast<std::size_t>(l) + 1);
  }
  m2::apply_final_norm(shape, source->final_norm(), a.ablation, X);
  store(depth - 1);
  write_npy(a.out, {depth, T, d}, out);
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
