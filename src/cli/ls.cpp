// `rcsweep ls`: the Python toolkit's rcsweep-ls (rcsweep_tools.catalog), run in place of this program.
#include <string>
#include <vector>

#include "cli/commands.hpp"

namespace rcsweep::cli {

int ls_command(const LsArgs& args) { return exec_toolkit("rcsweep-ls", "rcsweep_ls.py", args.words); }

CLI::App* add_ls_command(CLI::App& app, LsArgs& args) {
  auto* cmd = app.add_subcommand(
      "ls", "List the stores under folders: sweep, axes, fixed parameters, progress, version, host, size (Python).");
  cmd->prefix_command();  // every argument goes to rcsweep-ls
  cmd->callback([cmd, &args] { args.words = cmd->remaining(); });
  cmd->footer("rcsweep ls [DIR|STORE ...] [--where KEY=VALUE ...] [--json]\n"
              "Runs the toolkit's rcsweep-ls (next to this program when installed, scripts/ in a checkout)\n"
              "with Debian's /usr/bin/python3; `rcsweep ls . --help` shows its options.");
  return cmd;
}

}  // namespace rcsweep::cli
