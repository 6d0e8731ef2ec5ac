// A Hugging Face-style model folder: config.json plus the weights as model.safetensors, or as
// shards named by model.safetensors.index.json's "weight_map" (tensor name -> shard file). Every
// file is mapped and validated when the folder is opened; tensors convert to float64 one at a time
// (docs/CHECKPOINTS.md).
#pragma once
#include <cstddef>
#include <filesystem>
#include <initializer_list>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/matrix.hpp"
#include "checkpoint/model_config.hpp"
#include "checkpoint/safetensors.hpp"

namespace rcsweep::checkpoint {

inline constexpr std::string_view config_file_name = "config.json";
inline constexpr std::string_view weights_file_name = "model.safetensors";
inline constexpr std::string_view weights_index_name = "model.safetensors.index.json";

class ModelFolder {
 public:
  /// Opens the folder: config.json, then model.safetensors if present, otherwise the index and
  /// every shard it names. Throws ConfigError naming the file (and the tensor) when a file is
  /// missing or invalid (SafetensorsFile::open's checks), the index is not {"weight_map": {name:
  /// shard}} with plain file names in the folder, a shard it names is missing, or a tensor it maps
  /// is not in its shard.
  static ModelFolder open(const std::filesystem::path& folder);

  const std::filesystem::path& path() const noexcept { return path_; }
  const ModelConfig& config() const noexcept { return config_; }
  /// The weight files (one, or the shards in file-name order).
  const std::vector<SafetensorsFile>& files() const noexcept { return files_; }
  /// Every tensor name, sorted.
  std::vector<std::string> tensor_names() const;
  /// Bytes of all mapped weight files: what the model holds in memory before any conversion.
  std::size_t stored_bytes() const noexcept;

  bool contains(std::string_view name) const noexcept { return where(name) != nullptr; }
  /// The file holding `name`; ConfigError naming the folder's weights and the tensor when missing.
  const SafetensorsFile& file_of(std::string_view name) const;
  const TensorInfo& tensor(std::string_view name) const { return file_of(name).tensor(name); }
  /// ConfigError naming file and tensor unless `name` exists with exactly this shape.
  void expect(std::string_view name, std::span<const std::size_t> shape) const { file_of(name).expect(name, shape); }
  void expect(std::string_view name, std::initializer_list<std::size_t> shape) const {
    file_of(name).expect(name, shape);
  }
  std::vector<double> values(std::string_view name) const { return file_of(name).values(name); }
  void values(std::string_view name, std::span<double> out) const { file_of(name).values(name, out); }
  Matrix matrix(std::string_view name) const { return file_of(name).matrix(name); }
  /// Rows [first, first + count) of a 2-D tensor (SafetensorsFile::rows).
  void rows(std::string_view name, std::size_t first, std::size_t count, std::span<double> out) const {
    file_of(name).rows(name, first, count, out);
  }
  /// The 2-D tensor `name`, stored [out, in] (an nn.Linear weight), as its float64 transpose
  /// (in x out, to multiply on the right), converted in panels of 64 stored rows on the rank's
  /// threads (an elementwise copy: the same bits on any thread count). Throws Error when the tensor
  /// is not 2-D.
  Matrix transposed(std::string_view name) const;
  /// The weights file messages name for a tensor the folder lacks: model.safetensors, or the index.
  const std::string& weights_file() const noexcept { return weights_; }

 private:
  explicit ModelFolder(ModelConfig config) : config_(std::move(config)) {}
  const SafetensorsFile* where(std::string_view name) const noexcept;

  std::filesystem::path path_;
  std::string weights_;  // the single file or the index, for messages
  ModelConfig config_;
  std::vector<SafetensorsFile> files_;
  std::map<std::string, std::size_t, std::less<>> shard_of_;  // sharded: tensor -> index in files_
};

}  // namespace rcsweep::checkpoint
