// The random tensors of one bundle of tasks (same sweep seed, replicate, T, d), generated lazily
// and cached for the current layer, so tasks that differ only in lambda, norm, gap_fix, mixer
// or skip_scale use the very same weights without drawing them twice (MODELS.md "Randomness").
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <deque>

#include "base/matrix.hpp"
#include "rng/philox.hpp"

namespace rcsweep::models {

class RandomSource {
 public:
  RandomSource(std::uint64_t seed, int replicate, int T, int d);

  /// rows x cols i.i.d. N(0,1) of stream (layer, tensor, head); row-major, element (i,j) is
  /// stream element i*cols + j. Cached until the layer changes.
  const Matrix& normal(int layer, rng::Tensor tensor, int head, std::size_t rows, std::size_t cols);

  /// A derived matrix (e.g. a Haar orthogonal factor) built once per (layer, name, head) by
  /// `make`, cached like normal().
  const Matrix& derived(int layer, const std::string& name, int head, const std::function<Matrix()>& make);

  rng::StreamKey key(int layer, rng::Tensor tensor, int head) const;
  int T() const { return T_; }
  int d() const { return d_; }

 private:
  struct Entry {
    std::string name;
    int head;
    std::size_t rows, cols;
    Matrix value;
  };
  const Matrix* find(int layer, const std::string& name, int head, std::size_t rows, std::size_t cols);
  Matrix& insert(int layer, std::string name, int head, Matrix value);

  std::uint64_t seed_;
  int replicate_, T_, d_;
  int cached_layer_ = -1;
  std::deque<Entry> cache_;  // deque: references stay valid on insert
};

}  // namespace rcsweep::models
