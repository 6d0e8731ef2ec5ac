// The subcommands of the rcsweep program on its command line (CLI11): each add_*_command adds one
// subcommand with its options, help text, defaults and checks to the program's app, writing what it
// parses into the given arguments; the *_from_command_line functions run a parsed command.
#pragma once
#include <CLI/CLI.hpp>

#include <filesystem>
#include <string>

#include "cli/commands.hpp"

namespace rcsweep::cli {

// Options that run and plan share (command_line.cpp).

/// The sweep file of run and plan: an existing regular file of at most 16 MiB (config::sweep_file_problem).
CLI::Validator sweep_file_check();

/// The help of the overrides: the positional KEY=VALUE arguments after the sweep file. After the
/// end-of-options marker `--` (CLI11's) every argument is positional: no option is read there.
std::string overrides_help();

/// The footer of `cmd --help` (run, plan) that explains the overrides, with `--`, by examples.
std::string overrides_footer(const char* cmd);

/// `rcsweep run` as parsed: its arguments, the --shard text and --mpiexec (run.cpp).
struct RunCommandLine {
  RunArgs args;
  std::string shard = "0/1";
  std::string mpiexec;
};
CLI::App* add_run_command(CLI::App& app, RunCommandLine& line);
/// Run the parsed `rcsweep run`: here (under a launcher, or without -n), or with -n through mpiexec
/// started by launch_run with the program's own arguments argv[1..argc).
int run_from_command_line(RunCommandLine& line, int argc, char** argv);

/// `rcsweep plan` as parsed: its arguments and the --shard text (plan.cpp).
struct PlanCommandLine {
  PlanArgs args;
  std::string shard = "0/1";
};
CLI::App* add_plan_command(CLI::App& app, PlanCommandLine& line);
int plan_from_command_line(PlanCommandLine& line);

/// `rcsweep info` as parsed (info.cpp).
struct InfoCommandLine {
  std::filesystem::path store;
  bool json = false;
};
CLI::App* add_info_command(CLI::App& app, InfoCommandLine& line);

/// `rcsweep merge` (merge.cpp).
CLI::App* add_merge_command(CLI::App& app, MergeArgs& args);

/// `rcsweep export`: every argument after it is left for rcsweep-export (export.cpp).
CLI::App* add_export_command(CLI::App& app);

/// `rcsweep calibrate [-o FILE]` (calibrate.cpp).
CLI::App* add_calibrate_command(CLI::App& app, std::filesystem::path& output);

}  // namespace rcsweep::cli
