// The command line of the rcsweep program (CLI11) apart from the commands themselves (commands.hpp):
// the options that run and plan share, and the table entry by which main registers and dispatches
// every subcommand.
#pragma once
#include <CLI/CLI.hpp>

#include <functional>
#include <memory>
#include <string>

namespace rcsweep::cli {

// Options that run and plan share (command_line.cpp).

/// The sweep file of run and plan: an existing regular file of at most 16 MiB (config::sweep_file_problem).
CLI::Validator sweep_file_check();

/// The help of the overrides: the positional KEY=VALUE arguments after the sweep file. After the
/// end-of-options marker `--` (CLI11's) every argument is positional: no option is read there.
std::string overrides_help();

/// The footer of `cmd --help` (run, plan) that explains the overrides, with `--`, by examples.
std::string overrides_footer(const char* cmd);

/// A subcommand as main dispatches it: its CLI11 subcommand, the call that runs it with the
/// arguments parsed into its XArgs (commands.hpp), and where: on every rank of a launcher (a
/// command that uses MPI: run), else on the launcher's rank 0 alone (sweep::launcher_rank: one
/// output, one merged store, one calibration that no other rank disturbs).
struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
  bool every_rank = false;
};

/// The subcommand that `add` (add_x_command) adds to `app`, with XArgs of its own that `command`
/// (x_command) runs.
template <class Args>
Command make_command(CLI::App& app, CLI::App* (*add)(CLI::App&, Args&), int (*command)(const Args&),
                     bool every_rank = false) {
  auto args = std::make_shared<Args>();
  CLI::App* sub = add(app, *args);
  return {sub, [args, command] { return command(*args); }, every_rank};
}

}  // namespace rcsweep::cli
