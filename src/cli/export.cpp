// `rcsweep export`: the Python toolkit's rcsweep-export, run in place of this program (exec_toolkit,
// which `rcsweep ls` uses too).
#include "cli/commands.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <system_error>
#include <vector>


namespace rcsweep::cli {

int exec_toolkit(const std::string& installed, const std::string& script, const std::vector<std::string>& words) {
  std::error_code ec;
  const auto dir = std::filesystem::read_symlink("/proc/self/exe", ec).parent_path();
  std::filesystem::path found;
  for (const auto& candidate : {dir / installed, dir / ".." / "scripts" / script})
    if (std::filesystem::exists(candidate, ec)) {
      found = candidate;
      break;
    }
  if (found.empty()) {
    std::fprintf(stderr, "error: rcsweep needs the Python toolkit here: no %s next to %s\n", installed.c_str(),
                 dir.c_str());
    return 2;
  }
  std::vector<std::string> all = {"/usr/bin/python3", found.string()};
  all.insert(all.end(), words.begin(), words.end());
  std::vector<char*> argv;
  for (auto& w : all) argv.push_back(w.data());
  argv.push_back(nullptr);
  std::fflush(nullptr);
  ::execv(argv[0], argv.data());
  std::fprintf(stderr, "error: cannot run %s: %s\n", argv[0], std::strerror(errno));
  return 1;
}

int export_command(const ExportArgs& args) { return exec_toolkit("rcsweep-export", "rcsweep_export.py", args.words); }

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
