// `rcsweep export`: the Python toolkit's rcsweep-export, run in place of this program.
#include "cli/commands.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <system_error>
#include <vector>


namespace rcsweep::cli {

int export_command(const ExportArgs& args) {
  std::error_code ec;
  const auto dir = std::filesystem::read_symlink("/proc/self/exe", ec).parent_path();
  std::filesystem::path script;
  for (const auto& candidate : {dir / "rcsweep-export", dir / ".." / "scripts" / "rcsweep_export.py"})
    if (std::filesystem::exists(candidate, ec)) {
      script = candidate;
      break;
    }
  if (script.empty()) {
    std::fprintf(stderr, "error: rcsweep export needs the Python toolkit: no rcsweep-export next to %s\n", dir.c_str());
    return 2;
  }
  std::vector<std::string> words = {"/usr/bin/python3", script.string()};
  words.insert(words.end(), args.words.begin(), args.words.end());
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  std::fflush(nullptr);
  ::execv(argv[0], argv.data());
  std::fprintf(stderr, "error: cannot run %s: %s\n", argv[0], std::strerror(errno));
  return 1;
}

CLI::App* add_export_command(CLI::App& app, ExportArgs& args) {
  auto* cmd = app.add_subcommand(
      "export", "Write a store as csv (one row per task and layer), netcdf or parquet (the Python toolkit).");
  cmd->prefix_command();  // every argument goes to rcsweep-export
  cmd->callback([cmd, &args] { args.words = cmd->remaining(); });
  cmd->footer("rcsweep export STORE [-o FILE] [--format csv|parquet|netcdf]\n"
              "Runs the toolkit's rcsweep-export (next to this program when installed, scripts/ in a checkout)\n"
              "with Debian's /usr/bin/python3; `rcsweep export STORE --help` shows its options.");
  return cmd;
}

}  // namespace rcsweep::cli
