// The one owning dense matrix type: row-major, float64. X (T×d) keeps tokens as rows, so a
// row-major X matches the papers' notation directly (X_ij = token i, feature j).
#pragma once
#include <cassert>
#include <cstddef>
#include <memory>
#include <span>
#include <vector>

namespace rcsweep {

/// std::allocator, except that value-initialisation without arguments (what vector::resize and
/// the size constructor do) leaves a double uninitialised: a matrix about to be overwritten (a
/// GEMM result with beta = 0) is then not cleared first (clearing was a measurable share of a
/// sweep: docs/BENCHMARKS.md "Figures behind choices in the source").
template <class T>
struct DefaultInitAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = DefaultInitAllocator<U>;
  };
  DefaultInitAllocator() = default;
  template <class U>
  DefaultInitAllocator(const DefaultInitAllocator<U>&) noexcept {}  // NOLINT
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

class Matrix {
 public:
  /// Tag of the constructor that leaves the entries uninitialised (for results about to be written).
  struct Uninitialized {};
  static constexpr Uninitialized uninitialized{};

  Matrix() = default;
  Matrix(std::size_t rows, std::size_t cols, double fill = 0.0) : rows_(rows), cols_(cols), data_(rows * cols, fill) {}
  Matrix(std::size_t rows, std::size_t cols, Uninitialized) : rows_(rows), cols_(cols), data_(rows * cols) {}

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

  /// Reshape without keeping contents (reuses the allocation when it is large enough; new entries
  /// are uninitialised).
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
  std::vector<double, DefaultInitAllocator<double>> data_;
};

/// A read-only view of `rows` consecutive rows of a row-major matrix whose rows are `stride`
/// doubles apart (a block of a larger Matrix, or the whole of one). It does
/// not own its data: the matrix it views must outlive it. Converts implicitly from a Matrix.
struct ConstMatrixView {
  const double* data = nullptr;
  std::size_t rows = 0, cols = 0, stride = 0;

  ConstMatrixView() = default;
  ConstMatrixView(const double* d, std::size_t r, std::size_t c, std::size_t s)
      : data(d), rows(r), cols(c), stride(s) {}
  ConstMatrixView(const Matrix& m) : data(m.data()), rows(m.rows()), cols(m.cols()), stride(m.cols()) {}  // NOLINT
  /// Rows [first, first + count) of a Matrix.
  static ConstMatrixView rows_of(const Matrix& m, std::size_t first, std::size_t count) {
    assert(first + count <= m.rows());
    return {m.data() + first * m.cols(), count, m.cols(), m.cols()};
  }
  std::span<const double> row(std::size_t i) const noexcept { return {data + i * stride, cols}; }
};

}  // namespace rcsweep
