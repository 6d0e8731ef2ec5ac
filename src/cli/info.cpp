// `rcsweep info`: what a store holds, as text or one JSON object (--json).
#include "cli/commands.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "cli/cli_internal.hpp"
#include "cli/json.hpp"
#include "config/overrides.hpp"
#include "store/store.hpp"

namespace rcsweep::cli {
namespace {
int print_info(const std::filesystem::path& path) {
  const auto info = store::read_info(path);
  std::printf("store         %s\n", path.c_str());
  std::printf("sweep config  plan %s, schema %d, rcsweep %s (%s)\n", info.plan_hash.c_str(), info.schema_version,
              info.rcsweep_version.c_str(), info.git_commit.c_str());
  if (!info.overrides.empty()) std::printf("overrides     %s\n", config::overrides_line(info.overrides).c_str());
  std::printf("created       %s on %s; last run %d MPI ranks x %d threads%s\n", info.created.c_str(), info.host.c_str(),
              info.mpi_ranks, info.threads,
              info.blas_threads > 1 ? (" x " + std::to_string(info.blas_threads) + " BLAS threads").c_str() : "");
  std::printf("finished      %s\n", info.finished.empty() ? "(not yet)" : info.finished.c_str());
  std::printf("libraries     %s; HDF5 %s\n", info.blas.c_str(), info.hdf5_version.c_str());
  std::printf("tasks         %llu (%llu points), layers 0..%d\n", static_cast<unsigned long long>(info.n_tasks),
              static_cast<unsigned long long>(info.n_points), info.max_depth);
  const double pct = info.n_tasks ? 100.0 *
                                        static_cast<double>(info.n_done + info.n_failed + info.n_diverged +
                                                            info.n_vanished + info.n_not_needed) /
                                        static_cast<double>(info.n_tasks)
                                  : 100.0;
  const std::string not_needed = info.n_not_needed
                                     ? ", " + std::to_string(info.n_not_needed) + " not needed (adaptive replicates)"
                                     : "";
  std::printf("progress      %.1f%% finished: %llu done, %llu diverged, %llu vanished, %llu failed%s, %llu pending\n",
              pct, static_cast<unsigned long long>(info.n_done), static_cast<unsigned long long>(info.n_diverged),
              static_cast<unsigned long long>(info.n_vanished), static_cast<unsigned long long>(info.n_failed),
              not_needed.c_str(), static_cast<unsigned long long>(info.n_pending));
  // Which BLAS kernel (CPU, host) computed the finished tasks: bitwise reproducible on one kernel only.
  std::vector<std::string> kernels;
  for (const auto& [p, n] : info.platforms)
    if (!p.empty() && std::find(kernels.begin(), kernels.end(), p.blas_kernel) == kernels.end())
      kernels.push_back(p.blas_kernel);
  if (kernels.size() > 1)
    std::printf("BLAS kernels  this store mixes %zu kernels: their tasks agree to rounding, not bitwise "
                "(docs/GUARANTEES.md)\n",
                kernels.size());
  for (const auto& [p, n] : info.platforms)  // "on HOST" when the host was recorded
    std::printf("computed by   %s on %s%s%s: %llu tasks\n", p.empty() ? "(not recorded)" : p.blas_kernel.c_str(),
                p.empty() ? "(not recorded)" : p.cpu.c_str(), p.host.empty() ? "" : " on ", p.host.c_str(),
                static_cast<unsigned long long>(n));
  for (const auto& line : info.reused) std::printf("reused        %s\n", line.c_str());  // --reuse, growth
  std::string axes;
  for (const auto& a : info.axes) axes += (axes.empty() ? "" : ", ") + a;
  std::printf("axes          %s\n", axes.empty() ? "(none)" : axes.c_str());
  std::printf("datasets      %zu:", info.datasets.size());
  for (const auto& d : info.datasets) std::printf(" %s", d.c_str());
  std::printf("\nconfig:\n%s\n", info.config.c_str());
  return 0;
}

std::string json_strings(const std::vector<std::string>& items) {
  std::string out = "[";
  for (std::size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + json_string(items[i]);
  return out + "]";
}

/// `info --json`: the same facts as print_info, as one JSON object (for scripts).
int print_info_json(const std::filesystem::path& path) {
  const auto info = store::read_info(path);
  const auto u = [](std::uint64_t n) { return std::to_string(n); };
  std::string platforms = "[";
  for (std::size_t i = 0; i < info.platforms.size(); ++i) {
    const auto& [p, n] = info.platforms[i];
    platforms += std::string(i ? ", " : "") + "{\"blas_kernel\": " + json_string(p.blas_kernel) +
                 ", \"cpu\": " + json_string(p.cpu) + ", \"host\": " + json_string(p.host) + ", \"tasks\": " + u(n) +
                 "}";
  }
  platforms += "]";
  std::printf(
      "{\"store\": %s, \"format\": %s, \"schema_version\": %d, \"plan_hash\": %s, \"rcsweep_version\": %s, "
      "\"git_commit\": %s, \"created\": %s, \"finished\": %s, \"host\": %s, \"mpi_ranks\": %d, \"threads\": %d, \"blas_threads\": %d, "
      "\"blas\": %s, \"hdf5_version\": %s, \"n_tasks\": %s, \"n_points\": %s, \"max_depth\": %d, "
      "\"tasks\": {\"pending\": %s, \"done\": %s, \"failed\": %s, \"diverged\": %s, \"vanished\": %s, \"not_needed\": %s}, \"platforms\": %s, "
      "\"overrides\": %s, \"reused\": %s, \"axes\": %s, \"datasets\": %s, \"config\": %s}\n",
      json_string(path.string()).c_str(), json_string(info.format).c_str(), info.schema_version,
      json_string(info.plan_hash).c_str(), json_string(info.rcsweep_version).c_str(),
      json_string(info.git_commit).c_str(), json_string(info.created).c_str(), json_string(info.finished).c_str(),
      json_string(info.host).c_str(), info.mpi_ranks, info.threads, info.blas_threads, json_string(info.blas).c_str(),
      json_string(info.hdf5_version).c_str(), u(info.n_tasks).c_str(), u(info.n_points).c_str(), info.max_depth,
      u(info.n_pending).c_str(), u(info.n_done).c_str(), u(info.n_failed).c_str(), u(info.n_diverged).c_str(),
      u(info.n_vanished).c_str(), u(info.n_not_needed).c_str(), platforms.c_str(), json_strings(info.overrides).c_str(),
      json_strings(info.reused).c_str(), json_strings(info.axes).c_str(), json_strings(info.datasets).c_str(),
      json_string(info.config).c_str());
  return 0;
}

/// print_info with a refused store (not a store, damaged, another schema) as exit code 2.
int print_info_or_refuse(const std::filesystem::path& path, bool json) {
  try {
    return json ? print_info_json(path) : print_info(path);
  } catch (const StoreError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
}  // namespace

int info_command(const InfoArgs& args) {
  std::string crash;
  if (const auto rc = in_child([&] { return print_info_or_refuse(args.store, args.json); }, crash)) return *rc;
  std::fprintf(stderr, "error: %s\n", crashed_message(args.store, crash).c_str());
  return 2;
}

CLI::App* add_info_command(CLI::App& app, InfoArgs& args) {
  auto* cmd = app.add_subcommand("info", "Show what a store holds: provenance, progress, datasets.");
  cmd->add_option("store", args.store, "rcsweep HDF5 store")->required();
  cmd->add_flag("--json", args.json,
                "print one JSON object (provenance, task counts, platforms, overrides, datasets, config)");
  return cmd;
}

}  // namespace rcsweep::cli
