// Mixer spectra end to end: the task runner's singular values and eigenvalues of head 0's M
// (Mind the Gap Fig. 1(b): a Markov M has the eigenvalue 1 and a bulk of radius O(sigma_A / sqrt T);
// gap_fix perp removes the 1), and run_sweep's store holds them bitwise (through to_result and,
// at 2 ranks, the worker messages). Runs under mpiexec.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <mpi.h>
#include <unistd.h>

#include <cmath>
#include <complex>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <string>
#include <vector>

#include "config/sweep_spec.hpp"
#include "metrics/metrics.hpp"
#include "models/task_runner.hpp"
#include "plan/bundle_job.hpp"
#include "plan/plan.hpp"
#include "sweep/driver.hpp"
#include "sweep/mpi.hpp"
#include "../common/mpi_run.hpp"

namespace rcsweep {
namespace {

plan::Plan markov_plan(const std::string& gap_fix, const std::string& mixer_spectra, int T = 200, int depth = 2) {
  const std::string text = "[sweep]\nname = \"mixer-spectra\"\nseed = 11\n[model]\nmixer = \"markov\"\nT = " +
                           std::to_string(T) + "\nd = 16\ninput = \"gaussian\"\ndepth = " + std::to_string(depth) +
                           "\nsigma_A = 1.0\nnorm = \"rms\"\ngap_fix = \"" + gap_fix +
                           "\"\n[output]\nmixer_spectra = \"" + mixer_spectra + "\"\n";
  return plan::make_plan(config::parse_sweep(text, "test"));
}

std::vector<std::complex<double>> eig_of(const models::TaskOutput& out, std::size_t l) {
  std::vector<std::complex<double>> z;
  for (std::size_t i = 0; i < out.mixer_eig_re[l].size(); ++i)
    z.emplace_back(out.mixer_eig_re[l][i], out.mixer_eig_im[l][i]);
  return z;
}

TEST(MixerSpectra, MarkovHasEigenvalueOneAndABulkOfRadiusSigmaOverSqrtT) {
  const auto plan = markov_plan("none", "all");
  const auto out = models::run_task(plan::bundle_job(plan, {0}));
  ASSERT_EQ(out.outcome, models::Outcome::done) << out.message;
  const double T = 200.0, sigma_A = 1.0, radius = 1.3 * 2.0 * sigma_A / std::sqrt(T);
  ASSERT_EQ(out.mixer_sv.size(), 3u);
  EXPECT_TRUE(out.mixer_sv[0].empty() && out.mixer_eig_re[0].empty() && out.mixer_eig_im[0].empty());  // no mixer
  for (std::size_t l = 1; l <= 2; ++l) {
    ASSERT_EQ(out.mixer_sv[l].size(), 200u);
    const auto z = eig_of(out, l);
    ASSERT_EQ(z.size(), 200u);
    // row-stochastic: 1 is an eigenvalue, and the largest (first in the order)
    EXPECT_LT(std::abs(z[0] - 1.0), 1e-12) << z[0];
    double bulk = 0.0;
    for (std::size_t i = 1; i < z.size(); ++i) bulk = std::max(bulk, std::abs(z[i]));
    EXPECT_LT(bulk, radius) << "layer " << l;
    EXPECT_GT(bulk, 0.5 * sigma_A / std::sqrt(T)) << "layer " << l;  // a bulk, not a collapse
    // sum of eigenvalues = trace, conjugate pairs
    std::complex<double> sum = 0.0;
    for (const auto& w : z) sum += w;
    EXPECT_NEAR(sum.imag(), 0.0, 1e-12);
    // singular values: descending, sum of squares = ||M||_F^2 of the layer metrics
    const auto& sv = out.mixer_sv[l];
    EXPECT_TRUE(std::is_sorted(sv.rbegin(), sv.rend()));
    const double fro2 = std::inner_product(sv.begin(), sv.end(), sv.begin(), 0.0);
    const double m_fro = out.layers[l][metrics::metric_index("m_fro")];
    EXPECT_NEAR(fro2 / (m_fro * m_fro), 1.0, 1e-12);
    EXPECT_NEAR(sv[0] / out.layers[l][metrics::metric_index("m_s1")], 1.0, 1e-12);
    EXPECT_NEAR(sv[1] / out.layers[l][metrics::metric_index("m_s2")], 1.0, 1e-10);
  }
  // The option changes only what is stored: the layer metrics are bitwise those of a run without it.
  const auto plain = models::run_task(plan::bundle_job(markov_plan("none", "none"), {0}));
  for (std::size_t l = 0; l < out.layers.size(); ++l)
    for (std::size_t k = 0; k < metrics::n_layer_metrics; ++k)
      EXPECT_EQ(std::memcmp(&out.layers[l][k], &plain.layers[l][k], sizeof(double)), 0) << l << " " << k;
  for (const auto& s : plain.mixer_sv) EXPECT_TRUE(s.empty());
}

TEST(MixerSpectra, PerpRemovesTheEigenvalueOne) {
  const auto out = models::run_task(plan::bundle_job(markov_plan("perp", "last"), {0}));
  ASSERT_EQ(out.outcome, models::Outcome::done) << out.message;
  const double radius = 1.3 * 2.0 / std::sqrt(200.0);
  EXPECT_TRUE(out.mixer_sv[1].empty());  // "last": layer 2 only
  const auto z = eig_of(out, 2);
  ASSERT_EQ(z.size(), 200u);
  for (const auto& w : z) EXPECT_LT(std::abs(w), radius) << w;
  const auto& sv = out.mixer_sv[2];
  const double fro2 = std::inner_product(sv.begin(), sv.end(), sv.begin(), 0.0);
  const double m_fro = out.layers[2][metrics::metric_index("m_fro")];
  EXPECT_NEAR(fro2 / (m_fro * m_fro), 1.0, 1e-12);
}

std::vector<double> read_doubles(hid_t file, const char* path) {
  const hid_t ds = H5Dopen2(file, path, H5P_DEFAULT);
  const hid_t space = H5Dget_space(ds);
  std::vector<double> out(static_cast<std::size_t>(H5Sget_simple_extent_npoints(space)));
  H5Dread(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data());
  H5Sclose(space);
  H5Dclose(ds);
  return out;
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

TEST(MixerSpectra, SweepStoresThemBitwise) {
  const int rank = mpi::comm_rank(MPI_COMM_WORLD);
  const std::string text = R"(
[sweep]
name = "mixer-spectra-store"
seed = 5
replicates = 2
[model]
T = 12
d = 8
depth = 3
input = "gaussian"
norm = "rms"
[axes]
mixer = ["softmax", "markov", "uniform"]
gap_fix = ["none", "perp"]
[output]
spectra = "last"
mixer_spectra = "all"
)";
  const plan::Plan plan = plan::make_plan(config::parse_sweep(text, "test"));
  const auto [path, summary] = test::run_into_temp_store(plan, "rcsweep_mixer");
  if (rank != 0) return;
  // uniform + perp is M = 0: X vanishes at layer 1 (an outcome: exit 0), its mixer spectra stay NaN
  EXPECT_EQ(summary.done, plan.tasks.size() - 2);
  EXPECT_EQ(summary.vanished, 2u);
  EXPECT_EQ(summary.diverged, 0u);
  EXPECT_EQ(summary.exit_code(), 0);
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  const auto sv = read_doubles(file, "/spectra/m_sv");
  const auto re = read_doubles(file, "/spectra/m_eig_re");
  const auto im = read_doubles(file, "/spectra/m_eig_im");
  ASSERT_EQ(sv.size(), static_cast<std::size_t>(plan.mixer_spectrum_total()));
  std::size_t mismatches = 0, compared = 0, diverged_layers = 0;
  for (const auto& t : plan.tasks) {
    const auto ref = models::run_task(plan::bundle_job(plan, {t.id}));
    for (int l = 1; l <= plan.max_depth; ++l) {
      const auto off = static_cast<std::size_t>(plan.mixer_spectrum_offset(t.id, l));
      const auto L = static_cast<std::size_t>(l);
      if (ref.outcome == models::Outcome::vanished) {
        EXPECT_TRUE(ref.mixer_sv[L].empty());
        for (std::size_t i = 0; i < 12; ++i)
          mismatches += !(std::isnan(sv[off + i]) && std::isnan(re[off + i]) && std::isnan(im[off + i]));
        ++diverged_layers;
        continue;
      }
      ASSERT_EQ(ref.mixer_sv[L].size(), 12u);
      for (std::size_t i = 0; i < 12; ++i) {
        mismatches += !same_bits(sv[off + i], ref.mixer_sv[L][i]);
        mismatches += !same_bits(re[off + i], ref.mixer_eig_re[L][i]);
        mismatches += !same_bits(im[off + i], ref.mixer_eig_im[L][i]);
        compared += 3;
      }
    }
  }
  EXPECT_EQ(mismatches, 0u);
  EXPECT_EQ(diverged_layers, 2u * 3u);
  EXPECT_EQ(compared + 3 * 12 * diverged_layers, 3 * sv.size());
  H5Fclose(file);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace rcsweep
