// The random tensors of one bundle of tasks (same sweep seed, replicate, T, d), generated lazily
// and cached for the current layer, so tasks that differ only in lambda, norm, gap_fix, mixer
// or skip_scale use the very same weights without drawing them twice (MODELS.md "Randomness").
// Thread-safe: tasks running concurrently on a rank's threads share one source; the first thread
// asking for a tensor builds it while the others asking for the same one wait for it.
#pragma once
#include <any>
#include <cstdint>
#include <functional>
#include <string>
#include <deque>
#include <future>
#include <mutex>

#include "base/matrix.hpp"
#include "rng/philox.hpp"

namespace rcsweep::models {

class RandomSource {
 public:
  RandomSource(std::uint64_t seed, int replicate, int T, int d);

  /// rows x cols i.i.d. N(0,1) of stream (layer, tensor, head); row-major, element (i,j) is
  /// stream element i*cols + j. Cached until the layer changes.
  const Matrix& normal(int layer, rng::Tensor tensor, int head, std::size_t rows, std::size_t cols);

  /// Anything derived from the layer's random tensors (a Haar factor, an input-independent mixer
  /// matrix and its metrics, ...), built once per (layer, name, head) by `make` and cached like
  /// normal(). The name must determine the value (include every parameter it depends on).
  template <class T>
  const T& derived(int layer, const std::string& name, int head, const std::function<T()>& make) {
    return std::any_cast<const T&>(get(layer, name, head, 0, 0, [&] { return std::any(make()); }));
  }

  /// As derived, but built once for the whole bundle and kept across layers and release() until the
  /// source is destroyed: what several layers use (ALBERT's one layer group, applied at every layer).
  template <class T>
  const T& kept(const std::string& name, const std::function<T()>& make) {
    return std::any_cast<const T&>(get(bundle_wide, name, 0, 0, 0, [&] { return std::any(make()); }));
  }

  /// Drop everything cached for the current layer (the caller is done with it, and no other thread
  /// uses the source): the next layer then allocates its tensors without the previous layer's
  /// held. What kept() built stays.
  void release() {
    const std::lock_guard lock(mutex_);
    cache_.clear();
    cached_layer_ = -1;
  }

  rng::StreamKey key(int layer, rng::Tensor tensor, int head) const;
  int T() const { return T_; }
  int d() const { return d_; }

 private:
  struct Entry {
    std::string name;
    int head;
    std::size_t rows, cols;
    std::promise<void> built;  ///< set (or failed) once value is there
    std::shared_future<void> ready;
    std::any value;
  };
  /// The cached value, built by `make` (outside the lock) by the first thread asking.
  const std::any& get(int layer, const std::string& name, int head, std::size_t rows, std::size_t cols,
                      const std::function<std::any()>& make);

  std::mutex mutex_;  // guards cache_ and cached_layer_ (not the values: each is written once)
  std::uint64_t seed_;
  int replicate_, T_, d_;
  int cached_layer_ = -1;
  std::deque<Entry> cache_;               // deque: references stay valid on insert
  std::deque<Entry> kept_;                // kept(): the bundle's, never dropped
  static constexpr int bundle_wide = -2;  // the layer argument of get() for kept_
};

}  // namespace rcsweep::models
