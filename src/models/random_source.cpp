#include "models/random_source.hpp"

namespace rcsweep::models {

RandomSource::RandomSource(std::uint64_t seed, int replicate, int T, int d)
    : seed_(seed), replicate_(replicate), T_(T), d_(d) {}

rng::StreamKey RandomSource::key(int layer, rng::Tensor tensor, int head) const {
  rng::StreamKey k;
  k.seed = seed_;
  k.replicate = static_cast<std::uint32_t>(replicate_);
  k.T = static_cast<std::uint32_t>(T_);
  k.d = static_cast<std::uint32_t>(d_);
  k.layer = static_cast<std::uint32_t>(layer);
  k.tensor = tensor;
  k.head = static_cast<std::uint32_t>(head);
  return k;
}

const std::any* RandomSource::find(int layer, const std::string& name, int head, std::size_t rows, std::size_t cols) {
  if (layer != cached_layer_) {
    cache_.clear();
    cached_layer_ = layer;
  }
  for (const auto& e : cache_)
    if (e.name == name && e.head == head && e.rows == rows && e.cols == cols) return &e.value;
  return nullptr;
}

const std::any& RandomSource::insert(int layer, std::string name, int head, std::size_t rows, std::size_t cols,
                                     std::any value) {
  cached_layer_ = layer;
  cache_.push_back({std::move(name), head, rows, cols, std::move(value)});
  return cache_.back().value;
}

const Matrix& RandomSource::normal(int layer, rng::Tensor tensor, int head, std::size_t rows, std::size_t cols) {
  const std::string name = "normal" + std::to_string(static_cast<int>(tensor));
  if (const std::any* m = find(layer, name, head, rows, cols)) return std::any_cast<const Matrix&>(*m);
  Matrix value(rows, cols);
  rng::fill_normal(key(layer, tensor, head), value.values());
  return std::any_cast<const Matrix&>(insert(layer, name, head, rows, cols, std::any(std::move(value))));
}

}  // namespace rcsweep::models
