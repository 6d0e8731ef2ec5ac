// Writes a small rcsweep store with deterministic fake results, for the Python schema tests:
//   make_test_store OUT.h5
// Grid: lambda (2) x norm (2) x zip0 (T, d: 2) with a depth axis {1, 3}, 2 replicates, spectra of
// the last layer. Most tasks done, one diverged (layers 0..1 only), one failed, two left pending.
#include <cmath>
#include <cstdio>
#include <exception>
#include <vector>

#include "config/params.hpp"
#include "plan/plan.hpp"
#include "store/store.hpp"

using namespace rcsweep;

namespace {
config::SweepSpec make_spec() {
  config::SweepSpec spec;
  spec.name = "python-schema-test";
  spec.seed = 20260101;
  spec.replicates = 2;
  for (const auto& info : config::model_params()) spec.base.push_back(info.default_value);
  spec.base.at(*config::param_index("T")) = std::int64_t{4};
  spec.base.at(*config::param_index("d")) = std::int64_t{6};
  spec.base.at(*config::param_index("depth")) = std::int64_t{3};
  spec.dims.push_back({"lambda", {"lambda"}, {{0.0, 1.0}}});
  spec.dims.push_back({"norm", {"norm"}, {{std::string("none"), std::string("rms")}}});
  spec.dims.push_back({"zip0", {"T", "d"}, {{std::int64_t{4}, std::int64_t{8}}, {std::int64_t{6}, std::int64_t{8}}}});
  spec.depth_axis = {1, 3};
  spec.output.spectra = config::Spectra::last;
  spec.output.mixer_spectra = config::Spectra::all;
  return spec;
}

store::TaskResult fake(const plan::Plan& plan, std::uint64_t t, store::TaskStatus status) {
  store::TaskResult r;
  r.task = t;
  r.status = status;
  r.wall_s = 0.01 * static_cast<double>(t + 1);
  r.rank = static_cast<int>(t % 2);
  if (status == store::TaskStatus::failed) return r.message = "failed: fake LAPACK error", r;
  // Theory quantities of a done task (b NaN for odd tasks: the condition fails there).
  if (status == store::TaskStatus::done) {
    for (std::size_t k = 0; k < r.theory.size(); ++k)
      r.theory[k] = 0.5 + static_cast<double>(t) + 0.01 * static_cast<double>(k);
    if (t % 2 == 1) r.theory[4] = std::nan("");
    r.theory[5] = static_cast<double>(t % 2 == 0);
    r.theory[6] = 1.0;
  }
  const int layers = status == store::TaskStatus::diverged ? 2 : plan.max_depth + 1;
  if (status == store::TaskStatus::diverged) r.message = "diverged at layer 2: non-finite X";
  for (int l = 0; l < layers; ++l) {
    metrics::LayerRow row{};
    for (std::size_t k = 0; k < row.size(); ++k)
      row[k] = 1.0 + static_cast<double>(t) + 0.1 * l + 0.001 * static_cast<double>(k);
    r.layers.push_back(row);
    std::vector<double> sv;
    if (plan.spectrum_at(l)) {
      // Descending, unit Frobenius norm, as the engine stores them.
      double ss = 0.0;
      for (std::size_t i = 0; i < plan.spectrum_length(t); ++i) {
        sv.push_back(1.0 / static_cast<double>(i + 1));
        ss += sv.back() * sv.back();
      }
      for (double& s : sv) s /= std::sqrt(ss);
    }
    r.spectra.push_back(std::move(sv));
    // Mixer spectra (layers >= 1): descending singular values with ||M||_F = m_fro of the row;
    // eigenvalues by descending modulus: 1, then a conjugate pair, then reals.
    std::vector<double> msv, re, im;
    if (plan.mixer_spectrum_at(l)) {
      const std::size_t T = plan.mixer_spectrum_length(t);
      double ss = 0.0;
      for (std::size_t i = 0; i < T; ++i) {
        msv.push_back(1.0 / static_cast<double>(i + 1) + 0.01 * l);
        ss += msv.back() * msv.back();
        re.push_back(i == 0 ? 1.0 : i < 3 ? 0.25 : 0.1 / static_cast<double>(i));
        im.push_back(i == 1 ? 0.125 : i == 2 ? -0.125 : 0.0);
      }
      r.layers.back()[12] = std::sqrt(ss);  // m_fro
    }
    r.mixer_sv.push_back(std::move(msv));
    r.mixer_eig_re.push_back(std::move(re));
    r.mixer_eig_im.push_back(std::move(im));
  }
  return r;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_test_store OUT.h5\n");
    return 2;
  }
  try {
    const plan::Plan plan = plan::make_plan(make_spec());
    store::Provenance prov;
    prov.rcsweep_version = "test";
    prov.git_commit = "none";
    prov.created = "2026-01-01T00:00:00Z";
    prov.host = "localhost";
    prov.blas = "none";
    store::Store s = store::Store::create(argv[1], plan, prov, /*overwrite=*/true);
    std::vector<store::TaskResult> batch;
    const std::uint64_t n = plan.tasks.size();
    for (std::uint64_t t = 0; t + 2 < n; ++t) {  // the last two stay pending
      auto status = t == 3 ? store::TaskStatus::diverged : t == 5 ? store::TaskStatus::failed : store::TaskStatus::done;
      batch.push_back(fake(plan, t, status));
    }
    s.write(batch);
    s.mark_finished("2026-01-01T00:01:00Z");
    s.sync();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
