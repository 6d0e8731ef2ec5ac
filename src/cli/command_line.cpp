// What the options of run and plan share: the check of the sweep file and the help of the overrides.
#include "cli/command_line.hpp"

#include "config/sweep_spec.hpp"

namespace rcsweep::cli {

CLI::Validator sweep_file_check() {
  return CLI::Validator(
      [](std::string& path) {
        const std::string problem = config::sweep_file_problem(path);
        return problem.empty() ? problem : "cannot read sweep file '" + config::printable(path) + "': " + problem;
      },
      "FILE");
}

std::string overrides_help() {
  return "settings of the sweep file as KEY=VALUE, also after `--` (docs/CONFIG.md \"Overrides on the command line\")";
}

std::string overrides_footer(const char* cmd) {
  std::string text =
      "Overrides: KEY=VALUE arguments after the sweep file change it before it is checked, e.g.\n"
      "  rcsweep %s sweep.toml model.T=256 axes.lambda=[0,0.5,1] sweep.replicates=20 zip[0].d=[64,128]\n"
      "KEY is a dotted key path (sweep.seed, model.mixer, axes.d, output.spectra, zip[0].T or zip.0.T for\n"
      "the first [[zip]] table); VALUE is a TOML value, and a bare word is a string (model.mixer=markov,\n"
      "axes.gap_fix=[none,perp]). model.P and axes.P replace P wherever the file gives it under [model]\n"
      "or [axes], so axes.lambda=[0,1] sweeps a lambda the file fixes. Later overrides win. A bad one\n"
      "exits with code 2 before any work. The store records them (rcsweep info); resuming it needs the\n"
      "same sweep after overrides (the plan hash is checked). After `--` no argument is read as an option,\n"
      "only as an override (or as the sweep file if it was not given before): a program that passes\n"
      "overrides it did not write itself puts them there, e.g.\n"
      "  rcsweep %s sweep.toml -o out.h5 -- model.T=256 'axes.lambda=[0,1]'";
  const std::string name(cmd);
  for (auto at = text.find("%s"); at != std::string::npos; at = text.find("%s", at + name.size()))
    text.replace(at, 2, name);
  return text;
}

}  // namespace rcsweep::cli
