#include "checkpoint/model_folder.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "base/error.hpp"
#include "base/parallel.hpp"

namespace rcsweep::checkpoint {
namespace {

// A shard name of an index must be a plain file name in the folder.
bool plain_file_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}


}  // namespace

ModelFolder ModelFolder::open(const std::filesystem::path& folder) {
  std::error_code ec;
  if (!std::filesystem::is_directory(folder, ec))
    throw ConfigError({{folder.string(), "not a model folder (no such directory)"}});
  ModelFolder model(ModelConfig::load(folder / config_file_name));
  model.path_ = folder;

  const std::filesystem::path single = folder / weights_file_name;
  const std::filesystem::path index = folder / weights_index_name;
  if (std::filesystem::exists(single, ec)) {
    model.weights_ = single.string();
    model.files_.push_back(SafetensorsFile::open(single));
    return model;
  }
  if (!std::filesystem::exists(index, ec)) {
    std::string hint;
    for (const char* bin : {"pytorch_model.bin", "pytorch_model.bin.index.json", "model.bin"})
      if (std::filesystem::exists(folder / bin, ec))
        hint = std::string("; ") + bin + " is a PyTorch file: scripts/convert_checkpoint.py converts it";
    throw ConfigError({{folder.string(),
                        "no " + std::string(weights_file_name) + " and no " + std::string(weights_index_name) + hint}});
  }

  model.weights_ = index.string();
  const nlohmann::json j = parse_json_object(read_small_file(index), model.weights_, "the index");
  const auto map_it = j.find("weight_map");
  if (map_it == j.end() || !map_it->is_object())
    throw ConfigError({{model.weights_, "no \"weight_map\" object (tensor name -> shard file)"}});
  std::vector<ConfigIssue> issues;
  std::map<std::string, std::vector<std::string>> tensors_of;  // shard -> tensors it must hold
  for (const auto& [tensor, shard] : map_it->items()) {
    if (!shard.is_string()) {
      issues.push_back({model.weights_, "tensor " + quote_name(tensor) + ": the weight_map names a JSON " +
                                            shard.type_name() + ", not a shard file name"});
    } else if (!plain_file_name(shard.get_ref<const std::string&>())) {
      issues.push_back({model.weights_, "tensor " + quote_name(tensor) + ": shard " +
                                            quote_name(shard.get<std::string>()) +
                                            " is not a file name in the model folder"});
    } else {
      tensors_of[shard.get<std::string>()].push_back(tensor);
    }
  }
  for (const auto& [shard, tensors] : tensors_of)
    if (!std::filesystem::is_regular_file(folder / shard, ec))
      issues.push_back({model.weights_, "tensor " + quote_name(tensors.front()) + ": shard " + quote_name(shard) +
                                            " named by the weight_map does not exist in " + folder.string()});
  if (tensors_of.empty() && issues.empty()) issues.push_back({model.weights_, "the weight_map names no tensor"});
  if (!issues.empty()) throw ConfigError(std::move(issues));

  for (const auto& [shard, tensors] : tensors_of) {
    model.files_.push_back(SafetensorsFile::open(folder / shard));
    const SafetensorsFile& file = model.files_.back();
    for (const std::string& tensor : tensors) {
      if (!file.contains(tensor))
        issues.push_back({model.weights_, "tensor " + quote_name(tensor) + ": the weight_map puts it in " +
                                              quote_name(shard) + ", which does not hold it"});
      model.shard_of_.emplace(tensor, model.files_.size() - 1);
    }
  }
  if (!issues.empty()) throw ConfigError(std::move(issues));
  return model;
}

const SafetensorsFile* ModelFolder::where(std::string_view name) const noexcept {
  if (shard_of_.empty()) return files_.size() == 1 && files_[0].contains(name) ? &files_[0] : nullptr;
  const auto it = shard_of_.find(name);
  return it == shard_of_.end() ? nullptr : &files_[it->second];
}

const SafetensorsFile& ModelFolder::file_of(std::string_view name) const {
  if (const SafetensorsFile* f = where(name)) return *f;
  throw ConfigError({{weights_, "tensor " + quote_name(name) + " is missing"}});
}

std::vector<std::string> ModelFolder::tensor_names() const {
  std::vector<std::string> names;
  if (shard_of_.empty()) {
    for (const SafetensorsFile& f : files_)
      for (const TensorInfo& t : f.tensors()) names.push_back(t.name);
  } else {
    for (const auto& entry : shard_of_) names.push_back(entry.first);
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::size_t ModelFolder::stored_bytes() const noexcept {
  std::size_t bytes = 0;
  for (const SafetensorsFile& f : files_) bytes += f.file_bytes();
  return bytes;
}

// Each panel's 64 stored rows are converted to float64 (SafetensorsFile::rows: one pass over the
// mapped bytes) into a panel whose rows are padded by 8 entries, then written 8 columns at a time,
// each column's 64 entries 8 cache lines of a row of the result. Rows a multiple of 4 KiB apart
// share a cache set: the padding keeps the panel's rows apart, and 8 rows of the result at a time
// fit a set's 8 ways (square tiles of such rows competed for one set; the measured effect:
// docs/BENCHMARKS.md "Plan estimates against measured: time and memory"). The panels are the parts
// of a parallel::for_each, each converting its own stored rows into its own columns of the
// transpose, whose pages are first touched by the threads that fill them.
Matrix ModelFolder::transposed(std::string_view name) const {
  const TensorInfo& info = tensor(name);
  if (info.shape.size() != 2) throw Error("ModelFolder::transposed: tensor " + quote_name(name) + " is not 2-D");
  const std::size_t out = info.shape[0], in = info.shape[1];
  constexpr std::size_t panel_rows = 64, columns = 8;
  const std::size_t stride = in + 8;
  Matrix t(in, out, Matrix::uninitialized);
  parallel::for_each((out + panel_rows - 1) / panel_rows, [&](std::size_t part) {
    thread_local std::vector<double> panel;  // a thread's panel, kept from part to part
    panel.resize(panel_rows * stride);
    const std::size_t first = part * panel_rows, rows = std::min(panel_rows, out - first);
    for (std::size_t r = 0; r < rows; ++r)
      this->rows(name, first + r, 1, std::span<double>(panel.data() + r * stride, in));
    for (std::size_t c0 = 0; c0 < in; c0 += columns)
      for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t c = c0; c < std::min(c0 + columns, in); ++c) t(c, first + r) = panel[r * stride + c];
  });
  return t;
}

}  // namespace rcsweep::checkpoint
