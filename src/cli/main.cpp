// rcsweep: parallel sweeps of rank collapse in randomly initialised attention / SSM stacks.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "base/allocator.hpp"
#include "base/error.hpp"
#include "base/platform.hpp"
#include "cli/command_line.hpp"
#include "cli/commands.hpp"
#include "config/params.hpp"
#include "linalg/linalg.hpp"
#include "rcsweep/version.hpp"
#include "sweep/stop.hpp"

namespace {
/// The program's version flag and its error messages, which its subcommands inherit.
void describe_program(CLI::App& app) {
  using namespace rcsweep;
  // The BLAS kernel too: results are bitwise reproducible on one kernel (docs/GUARANTEES.md).
  app.set_version_flag("--version", std::string(version) + " (" + git_commit + ")\nBLAS kernel " +
                                        linalg::blas_kernel() + " on " + cpu_model());
  app.require_subcommand(1);
  // Every error starts with "error:" (docs/ERRORS.md); subcommands inherit this.
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return "error: " + std::string(e.what()) + "\nRun with --help for more information.\n";
  });
}

/// A mistyped command: name the closest one instead of "A subcommand is required". Exit code 2.
int refuse_unknown_command(const CLI::App& app, const char* word) {
  std::vector<std::string> names;
  for (const auto* sub : app.get_subcommands([](const CLI::App*) { return true; })) names.push_back(sub->get_name());
  const std::string guess(rcsweep::config::nearest(word, {names.begin(), names.end()}));
  std::fprintf(stderr, "error: unknown command '%s'%s; the commands are", word,
               guess.empty() ? "" : ("; did you mean '" + guess + "'?").c_str());
  for (const auto& n : names) std::fprintf(stderr, " %s", n.c_str());
  std::fprintf(stderr, " (rcsweep --help)\n");
  return 2;
}

int run_main(int argc, char** argv) {
  using namespace rcsweep;
  keep_freed_memory();
  CLI::App app{"rcsweep: sweeps of rank collapse in randomly initialised attention and state-space stacks.\n"
               "A sweep file (TOML, see docs/CONFIG.md) names the model and the swept axes; every grid point x\n"
               "replicate is a task that runs the random stack to the largest depth and records spectral metrics\n"
               "of every layer in one HDF5 store (see docs/SCHEMA.md).",
               "rcsweep"};
  describe_program(app);
  // Every subcommand, in the order of --help.
  const cli::Command commands[] = {
      cli::make_command(app, cli::add_run_command, cli::run_command, /*every_rank=*/true),
      cli::make_command(app, cli::add_plan_command, cli::plan_command),
      cli::make_command(app, cli::add_info_command, cli::info_command),
      cli::make_command(app, cli::add_merge_command, cli::merge_command),
      cli::make_command(app, cli::add_export_command, cli::export_command),
      cli::make_command(app, cli::add_ls_command, cli::ls_command),
      cli::make_command(app, cli::add_calibrate_command, cli::calibrate_command),
  };

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (argc > 1 && argv[1][0] != '-' && app.get_subcommands().empty()) return refuse_unknown_command(app, argv[1]);
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  // app.parse requires exactly one subcommand.
  const auto& command = *std::find_if(std::begin(commands), std::end(commands),
                                      [](const cli::Command& c) { return c.app->parsed(); });
  try {
    if (!command.every_rank && sweep::launcher_rank() != 0) return 0;
    return command.run();
  } catch (const ConfigError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n",
                 is_out_of_memory(e) ? out_of_memory_message("running the command", e, 0.0).c_str() : e.what());
    return 1;
  }
}
}  // namespace

int main(int argc, char** argv) {
  const int code = run_main(argc, argv);
  // Under an address-space limit (ulimit -v) a BLAS thread OpenBLAS started at load may be retrying,
  // for ever, a buffer the limit refuses; OpenBLAS's destructor would wait for it at exit. Every
  // file is closed by now: end without destructors.
  if (rcsweep::address_space_limit()) {
    std::fflush(nullptr);
    std::_Exit(code);
  }
  return code;
}
