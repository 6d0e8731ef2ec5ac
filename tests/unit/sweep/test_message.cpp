// The worker -> writer byte encoding of finished tasks: every field survives bitwise, including
// the fixed-size theory row (NaN payloads too), and a cut message is refused.
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "base/error.hpp"
#include "models/theory.hpp"
#include "store/store.hpp"
#include "sweep/message.hpp"

using namespace rcsweep;

namespace {
bool same_bits(double a, double b) { return std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b); }

store::TaskResult sample(std::uint64_t t) {
  store::TaskResult r;
  r.task = t;
  r.status = t == 1 ? store::TaskStatus::diverged : store::TaskStatus::done;
  r.wall_s = 0.5 + static_cast<double>(t);
  r.rank = static_cast<int>(t) + 2;
  r.message = t == 1 ? "diverged at layer 1: non-finite X" : "";
  for (int l = 0; l < 3; ++l) {
    std::array<double, 13> row{};
    for (std::size_t k = 0; k < row.size(); ++k) row[k] = static_cast<double>(t) + 0.1 * l + 1e-3 * static_cast<double>(k);
    r.layers.push_back(row);
    r.spectra.push_back(l == 2 ? std::vector<double>{0.9, 0.4, 1e-300} : std::vector<double>{});
  }
  for (std::size_t k = 0; k < r.theory.size(); ++k) r.theory[k] = static_cast<double>(t) * 10.0 + static_cast<double>(k) + 1.0 / 3.0;
  r.theory[4] = std::bit_cast<double>(std::uint64_t{0x7ff8000000000123});  // NaN with a payload
  r.theory[6] = -0.0;
  return r;
}

void expect_same(const store::TaskResult& a, const store::TaskResult& b) {
  EXPECT_EQ(a.task, b.task);
  EXPECT_EQ(a.status, b.status);
  EXPECT_TRUE(same_bits(a.wall_s, b.wall_s));
  EXPECT_EQ(a.rank, b.rank);
  EXPECT_EQ(a.message, b.message);
  ASSERT_EQ(a.layers.size(), b.layers.size());
  for (std::size_t l = 0; l < a.layers.size(); ++l)
    for (std::size_t k = 0; k < a.layers[l].size(); ++k) EXPECT_TRUE(same_bits(a.layers[l][k], b.layers[l][k]));
  EXPECT_EQ(a.spectra, b.spectra);
  for (std::size_t k = 0; k < models::n_theory; ++k)
    EXPECT_TRUE(same_bits(a.theory[k], b.theory[k])) << "task " << a.task << " theory " << models::theory_names[k];
}
}  // namespace

TEST(Message, RoundTripKeepsTheoryBitwise) {
  std::vector<store::TaskResult> in = {sample(0), sample(1)};
  store::TaskResult failed;  // no layers, theory all NaN by default
  failed.task = 7;
  failed.status = store::TaskStatus::failed;
  failed.message = "failed: boom";
  in.push_back(failed);
  std::vector<char> buf;
  for (const auto& r : in) sweep::pack(r, buf);
  const auto out = sweep::unpack(buf);
  ASSERT_EQ(out.size(), in.size());
  for (std::size_t i = 0; i < in.size(); ++i) expect_same(in[i], out[i]);
  for (double x : out[2].theory) EXPECT_TRUE(std::isnan(x));
}

TEST(Message, TheoryIsAFixedSevenDoubles) {
  store::TaskResult r;
  std::vector<char> empty_theory, with_theory;
  sweep::pack(r, empty_theory);
  r.theory.fill(1.0);
  sweep::pack(r, with_theory);
  EXPECT_EQ(empty_theory.size(), with_theory.size());
  static_assert(sizeof(store::TaskResult::theory) == 7 * sizeof(double));
}

TEST(Message, TruncatedTheoryIsRefused) {
  std::vector<char> buf;
  sweep::pack(sample(3), buf);
  buf.resize(buf.size() - sizeof(double));
  EXPECT_THROW(sweep::unpack(buf), Error);
}
