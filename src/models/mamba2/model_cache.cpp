#include "models/mamba2/model_cache.hpp"

#include <map>
#include <mutex>
#include <system_error>
#include <utility>

#include "checkpoint/model_config.hpp"
#include "models/mamba2/checkpoint_weights.hpp"

namespace rcsweep::models::mamba2 {
namespace {

// The memo's key: the canonical path when the folder exists (two spellings of one folder share
// an entry), else the absolute one (opening it then fails with the checkpoint module's message).
std::filesystem::path key_of(const std::filesystem::path& folder) {
  std::error_code ec;
  std::filesystem::path key = std::filesystem::weakly_canonical(folder, ec);
  if (ec) key = std::filesystem::absolute(folder, ec);
  return ec ? folder : key;
}

std::shared_ptr<const LoadedModel> load(const std::filesystem::path& folder, bool weights) {
  auto model = std::make_shared<LoadedModel>();
  if (weights) {
    model->folder = std::make_shared<const checkpoint::ModelFolder>(checkpoint::ModelFolder::open(folder));
    auto checkpoint = std::make_unique<const CheckpointWeights>(model->folder);
    model->shape = checkpoint->shape();
    model->weights = std::move(checkpoint);
  } else {
    model->shape = mamba2_shape(checkpoint::ModelConfig::load(folder / checkpoint::config_file_name));
  }
  return model;
}

}  // namespace

std::shared_ptr<const LoadedModel> open_model(const std::filesystem::path& folder, bool weights) {
  // Loading holds the lock: a second caller for the same folder waits for the first's load rather
  // than mapping and checking the checkpoint again (a sweep opens one folder).
  static std::mutex mutex;
  static std::map<std::filesystem::path, std::shared_ptr<const LoadedModel>> memo;
  const std::lock_guard lock(mutex);
  auto& entry = memo[key_of(folder)];
  if (entry && (entry->weights || !weights)) return entry;
  try {
    entry = load(folder, weights);
  } catch (...) {
    if (!entry) memo.erase(key_of(folder));
    throw;
  }
  return entry;
}

}  // namespace rcsweep::models::mamba2
