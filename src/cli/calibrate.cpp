// `rcsweep calibrate`: measure this machine's rates for the cost model (plan/calibration.hpp),
// print them and store them for `rcsweep plan` and `rcsweep run` on the same machine.
#include <cstdio>
#include <string>
#include <utility>

#include "cli/commands.hpp"
#include "linalg/blis.hpp"
#include "plan/calibration.hpp"

namespace rcsweep::cli {

int calibrate_command(const CalibrateArgs& args) {
  const auto path = args.output.empty() ? plan::calibration_path() : args.output;
  std::fprintf(stderr, "calibrating %s (about 5 s) ...\n", plan::machine_id().c_str());
  const plan::Calibration c = plan::measure_calibration();
  for (const auto& [n, r] : c.gemm_rate) std::printf("dgemm %4.0f^3          %6.1f GFLOP/s\n", n, r / 1e9);
  for (std::size_t i = 0; i < c.signal_s.size(); ++i)
    std::printf("metrics k = %4.0f      signal %9.3f ms, mixer %9.3f ms, dgesdd %9.3f ms\n", c.signal_s[i].first,
                c.signal_s[i].second * 1e3, c.mixer_s[i].second * 1e3, c.svd_s[i].second * 1e3);
  std::printf("normals              %6.1f M/s\nsoftmax entries      %6.1f M/s\nrms-norm entries     %6.1f M/s\n"
              "s4d multiply-adds    %6.1f M/s\n",
              c.normal_rate / 1e6, c.exp_rate / 1e6, c.pass_rate / 1e6, c.conv_rate / 1e6);
  if (!linalg::blis::available()) std::printf("BLIS                 not available\n");
  for (std::size_t i = 0; i < c.blis_plain_ratio.size() && i < c.blis_transposed_ratio.size(); ++i)
    std::printf("BLIS / OpenBLAS time %4.0f^3: A B %5.2f, A B^T %5.2f\n", c.blis_plain_ratio[i].first,
                c.blis_plain_ratio[i].second, c.blis_transposed_ratio[i].second);
  for (const auto& [kind, range] : {std::pair{"A B  ", c.blis_plain}, std::pair{"A B^T", c.blis_transposed}}) {
    if (!linalg::blis::available()) break;
    if (range.second > range.first)
      std::printf("BLIS %s           at m n k in (%.0f, %s] (rcsweep run --gemm-library auto)\n", kind, range.first,
                  range.second >= 1e300 ? "inf" : std::to_string(static_cast<long long>(range.second)).c_str());
    else
      std::printf("BLIS %s           nowhere faster than OpenBLAS\n", kind);
  }
  if (!plan::save_calibration(c, path)) {
    std::fprintf(stderr, "error: cannot write the calibration to %s\n", path.c_str());
    return 1;
  }
  std::printf("stored in %s (rcsweep plan uses it on this machine)\n", path.c_str());
  return 0;
}

CLI::App* add_calibrate_command(CLI::App& app, CalibrateArgs& args) {
  auto* cmd = app.add_subcommand("calibrate",
                                 "Measure this machine's rates (about 5 s) for the time estimates of `rcsweep plan`.");
  cmd->add_option("-o,--output", args.output,
                  "where to store them (default: $RCSWEEP_CALIBRATION, else ~/.cache/rcsweep/calibration.toml)");
  cmd->footer("Measures where BLIS multiplies faster than OpenBLAS (where BLIS is installed), dgemm at\n"
              "n = 16..1024, the per-layer metrics, dgesdd, random normals and entrywise passes\n"
              "on one core with one BLAS thread; `rcsweep plan` prices a sweep's work with them. Run it on an\n"
              "otherwise idle machine; it is reused until the CPU or BLAS changes.");
  return cmd;
}

}  // namespace rcsweep::cli
