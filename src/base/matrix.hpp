// The one owning dense matrix type: row-major, float64. X (T×d) keeps tokens as rows, so a
// row-major X matches the papers' notation directly (X_ij = token i, feature j).
#pragma once
#include <cassert>
#include <cstddef>
#include <span>
#include <vector>

namespace rcsweep {

class Matrix {
 public:
  Matrix() = default;
  Matrix(std::size_t rows, std::size_t cols, double fill = 0.0) : rows_(rows), cols_(cols), data_(rows * cols, fill) {}

  std::size_t rows() const noexcept { return rows_; }
  std::size_t cols() const noexcept { return cols_; }
  std::size_t size() const noexcept { return data_.size(); }
  bool empty() const noexcept { return data_.empty(); }

  double& operator()(std::size_t i, std::size_t j) noexcept {
    assert(i < rows_ && j < cols_);
    return data_[i * cols_ + j];
  }
  double operator()(std::size_t i, std::size_t j) const noexcept {
    assert(i < rows_ && j < cols_);
    return data_[i * cols_ + j];
  }
  double* data() noexcept { return data_.data(); }
  const double* data() const noexcept { return data_.data(); }
  std::span<double> row(std::size_t i) noexcept { return {data_.data() + i * cols_, cols_}; }
  std::span<const double> row(std::size_t i) const noexcept { return {data_.data() + i * cols_, cols_}; }
  std::span<double> values() noexcept { return data_; }
  std::span<const double> values() const noexcept { return data_; }

  /// Reshape without keeping contents (reuses the allocation when it is large enough).
  void resize(std::size_t rows, std::size_t cols) {
    rows_ = rows;
    cols_ = cols;
    data_.resize(rows * cols);
  }
  void fill(double v) { data_.assign(data_.size(), v); }

  static Matrix identity(std::size_t n) {
    Matrix m(n, n);
    for (std::size_t i = 0; i < n; ++i) m(i, i) = 1.0;
    return m;
  }

  friend bool operator==(const Matrix&, const Matrix&) = default;

 private:
  std::size_t rows_ = 0;
  std::size_t cols_ = 0;
  std::vector<double> data_;
};

}  // namespace rcsweep
