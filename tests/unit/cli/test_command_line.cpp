// The options that run and plan share (cli/command_line.hpp): after the end-of-options marker `--`
// every argument is positional, an override, never an option; the help shows it for each command.
#include "cli/command_line.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace rcsweep::cli {
namespace {

/// A subcommand with the arguments run and plan declare (the sweep file, the overrides, options
/// that name the store, replace it or start a program), parsed from `words`.
struct Parsed {
  std::filesystem::path sweep;
  std::vector<std::string> overrides;
  std::string output, mpiexec;
  bool overwrite = false;
  int ranks = 0;
};

Parsed parse(std::vector<std::string> words) {
  // A file of this test's own: ctest may run the tests of this program at the same time.
  const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
  const auto file = std::filesystem::temp_directory_path() / (std::string("rcsweep-test-command-line-") + test->name() +
                                                              "-" + std::to_string(getpid()) + ".toml");
  std::ofstream(file) << "[sweep]\nname = \"x\"\n";
  Parsed p;
  CLI::App app{"test"};
  auto* cmd = app.add_subcommand("run", "");
  cmd->add_option("sweep", p.sweep, "sweep file")->required()->check(sweep_file_check());
  cmd->add_option("overrides", p.overrides, overrides_help());
  cmd->add_option("-n,--ranks", p.ranks, "");
  cmd->add_option("--mpiexec", p.mpiexec, "");
  cmd->add_option("-o,--output", p.output, "");
  cmd->add_flag("--overwrite", p.overwrite, "");
  for (auto& w : words)
    if (w == "SWEEP") w = file.string();
  words.insert(words.begin(), "run");
  std::vector<const char*> argv{"rcsweep"};
  for (const auto& w : words) argv.push_back(w.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (...) {
    std::filesystem::remove(file);
    throw;
  }
  std::filesystem::remove(file);
  return p;
}

TEST(EndOfOptions, EveryArgumentAfterItIsAnOverride) {
  const Parsed p = parse(
      {"SWEEP", "-o", "a.h5", "--", "--overwrite=true", "--ranks=2", "--mpiexec=touch x", "-o", "b.h5", "model.T=2"});
  const std::vector<std::string> all{"--overwrite=true", "--ranks=2", "--mpiexec=touch x", "-o", "b.h5", "model.T=2"};
  EXPECT_EQ(p.overrides, all);
  EXPECT_FALSE(p.overwrite);
  EXPECT_EQ(p.ranks, 0);
  EXPECT_TRUE(p.mpiexec.empty());
  EXPECT_EQ(p.output, "a.h5");
}

TEST(EndOfOptions, TheSweepFileMayFollowIt) {
  const Parsed p = parse({"--", "SWEEP", "model.T=2"});
  EXPECT_EQ(p.sweep.extension(), ".toml");
  EXPECT_TRUE(p.sweep.filename().string().starts_with("rcsweep-test-command-line-"));
  EXPECT_EQ(p.overrides, std::vector<std::string>{"model.T=2"});
}

TEST(EndOfOptions, BeforeItOptionsAreOptions) {
  const Parsed p = parse({"SWEEP", "model.T=2", "--overwrite", "-o", "a.h5"});
  EXPECT_TRUE(p.overwrite);
  EXPECT_EQ(p.overrides, std::vector<std::string>{"model.T=2"});
}

TEST(OverridesFooter, ShowsTheMarkerWithTheCommandsName) {
  for (const char* name : {"run", "plan"}) {
    const std::string text = overrides_footer(name);
    EXPECT_EQ(text.find("%s"), std::string::npos) << text;
    EXPECT_NE(text.find(std::string("rcsweep ") + name + " sweep.toml model.T=256"), std::string::npos) << text;
    EXPECT_NE(text.find(std::string("rcsweep ") + name + " sweep.toml -o out.h5 -- model.T=256"), std::string::npos)
        << text;
  }
  EXPECT_NE(overrides_help().find("`--`"), std::string::npos);
}

}  // namespace
}  // namespace rcsweep::cli
