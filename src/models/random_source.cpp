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

const std::any& RandomSource::get(int layer, const std::string& name, int head, std::size_t rows, std::size_t cols,
                                  const std::function<std::any()>& make) {
  std::unique_lock lock(mutex_);
  if (layer != bundle_wide && layer != cached_layer_) {
    cache_.clear();
    cached_layer_ = layer;
  }
  std::deque<Entry>& entries = layer == bundle_wide ? kept_ : cache_;
  for (auto& e : entries)
    if (e.name == name && e.head == head && e.rows == rows && e.cols == cols) {
      lock.unlock();
      e.ready.get();  // wait until built; rethrows what building it threw
      return e.value;
    }
  Entry& entry = entries.emplace_back();  // a deque: references to the others stay valid
  entry.name = name;
  entry.head = head;
  entry.rows = rows;
  entry.cols = cols;
  entry.ready = entry.built.get_future().share();
  lock.unlock();  // built outside the lock: make may ask for other tensors
  try {
    entry.value = make();
  } catch (...) {
    entry.built.set_exception(std::current_exception());
    throw;
  }
  entry.built.set_value();
  return entry.value;
}

const Matrix& RandomSource::normal(int layer, rng::Tensor tensor, int head, std::size_t rows, std::size_t cols) {
  const std::string name = "normal" + std::to_string(static_cast<int>(tensor));
  return std::any_cast<const Matrix&>(get(layer, name, head, rows, cols, [&] {
    Matrix value(rows, cols, Matrix::uninitialized);
    rng::fill_normal(key(layer, tensor, head), value.values());
    return std::any(std::move(value));
  }));
}

}  // namespace rcsweep::models
