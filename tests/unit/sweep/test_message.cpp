// The worker -> writer byte encoding of finished tasks: every field survives bitwise, including
// the fixed-size theory row (NaN payloads too), and a cut message is refused.
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
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
    metrics::LayerRow row{};
    for (std::size_t k = 0; k < row.size(); ++k)
      row[k] = static_cast<double>(t) + 0.1 * l + 1e-3 * static_cast<double>(k);
    r.layers.push_back(row);
    r.spectra.push_back(l == 2 ? std::vector<double>{0.9, 0.4, 1e-300} : std::vector<double>{});
    // mixer spectra at layers 1 and 2 (never layer 0); task 1 diverged: layer 1 only
    const bool mixer = l >= 1 && (t != 1 || l == 1);
    r.mixer_sv.push_back(mixer ? std::vector<double>{1.0 + static_cast<double>(t), 0.25 * l, 0.0}
                               : std::vector<double>{});
    r.mixer_eig_re.push_back(mixer ? std::vector<double>{1.0, -0.125, -0.125} : std::vector<double>{});
    r.mixer_eig_im.push_back(mixer
                                 ? std::vector<double>{0.0, 0.5 + static_cast<double>(t), -0.5 - static_cast<double>(t)}
                                 : std::vector<double>{});
  }
  if (t == 0) r.mixer_sv[2][2] = std::bit_cast<double>(std::uint64_t{0x7ff8000000000456});  // NaN payload
  for (std::size_t k = 0; k < r.theory.size(); ++k)
    r.theory[k] = static_cast<double>(t) * 10.0 + static_cast<double>(k) + 1.0 / 3.0;
  r.theory[4] = std::bit_cast<double>(std::uint64_t{0x7ff8000000000123});  // NaN with a payload
  r.theory[6] = -0.0;
  if (t != 1)  // gradient norms (task 1 diverged: none)
    for (int i = 0; i < 6; ++i) {
      r.grad_log10.push_back(static_cast<double>(t) + 1.0 / (i + 3.0));
      r.grad_stderr.push_back(i == 2 ? std::numeric_limits<double>::quiet_NaN() : 1e-3 * i);
    }
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
  const auto same_spectra = [](const std::vector<std::vector<double>>& x, const std::vector<std::vector<double>>& y) {
    if (x.size() != y.size()) return false;
    for (std::size_t l = 0; l < x.size(); ++l) {
      if (x[l].size() != y[l].size()) return false;
      for (std::size_t i = 0; i < x[l].size(); ++i)
        if (!same_bits(x[l][i], y[l][i])) return false;
    }
    return true;
  };
  EXPECT_TRUE(same_spectra(a.mixer_sv, b.mixer_sv)) << "task " << a.task;
  EXPECT_TRUE(same_spectra(a.mixer_eig_re, b.mixer_eig_re)) << "task " << a.task;
  EXPECT_TRUE(same_spectra(a.mixer_eig_im, b.mixer_eig_im)) << "task " << a.task;
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

TEST(Message, TheoryIsAFixedNumberOfDoubles) {
  store::TaskResult r;
  std::vector<char> empty_theory, with_theory;
  sweep::pack(r, empty_theory);
  r.theory.fill(1.0);
  sweep::pack(r, with_theory);
  EXPECT_EQ(empty_theory.size(), with_theory.size());
  static_assert(sizeof(store::TaskResult::theory) == models::n_theory * sizeof(double));
  static_assert(models::n_theory == 8);  // C_M, S, lambda_min, a_star, b, bound_applies, bound_holds, bound_reason
}

TEST(Message, TruncatedTheoryIsRefused) {
  std::vector<char> buf;
  sweep::pack(sample(3), buf);
  buf.resize(buf.size() - sizeof(double));
  EXPECT_THROW(sweep::unpack(buf), Error);
}

TEST(Message, MixerSpectraRoundTripAndDamagedCountsAreRefused) {
  const auto r = sample(0);
  ASSERT_FALSE(r.mixer_sv[2].empty());
  std::vector<char> buf;
  sweep::pack(r, buf);
  const auto out = sweep::unpack(buf);
  ASSERT_EQ(out.size(), 1u);
  expect_same(r, out[0]);
  EXPECT_TRUE(std::isnan(out[0].mixer_sv[2][2]));
  // Every cut of the message is refused, never read past its end.
  for (std::size_t n = 1; n < buf.size(); ++n) {
    std::vector<char> cut(buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(n));
    EXPECT_THROW(sweep::unpack(cut), Error) << n;
  }
  // A huge per-layer count (damaged message) is refused instead of allocating.
  store::TaskResult plain;
  plain.mixer_sv = {{1.0}};
  std::vector<char> one;
  sweep::pack(plain, one);
  const std::uint64_t huge = std::uint64_t{1} << 60;
  // layout of `plain`: task(8) status(1) wall(8) rank(4) msg len(8) layers count(8) spectra count(8)
  // mixer_sv count(8) ...
  const std::size_t at = 8 + 1 + 8 + 4 + 8 + 8 + 8;
  std::uint64_t count = 0;
  std::memcpy(&count, one.data() + at, sizeof count);
  ASSERT_EQ(count, 1u);
  std::memcpy(one.data() + at, &huge, sizeof huge);
  EXPECT_THROW(sweep::unpack(one), Error);
}
