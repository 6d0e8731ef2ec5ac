// The options that run and plan share (cli/command_line.hpp): after the end-of-options marker `--`
// every argument is positional, an override, never an option; the help shows it for each command.
// And the table entry of a command (make_command): its subcommand parses into arguments of its own,
// which the command runs with.
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

/// Two commands of the one shape: XArgs, add_x_command, x_command(const XArgs&).
struct GreetArgs {
  std::string name;
  bool loud = false;
};
CLI::App* add_greet_command(CLI::App& app, GreetArgs& args) {
  auto* cmd = app.add_subcommand("greet", "");
  cmd->add_option("name", args.name, "")->required();
  cmd->add_flag("--loud", args.loud, "");
  return cmd;
}
int greet_command(const GreetArgs& args) { return static_cast<int>(args.name.size()) + (args.loud ? 100 : 0); }

struct CountArgs {
  std::vector<std::string> words;
};
CLI::App* add_count_command(CLI::App& app, CountArgs& args) {
  auto* cmd = app.add_subcommand("count", "");
  cmd->prefix_command();  // every argument left to the command, as `export` does
  cmd->callback([cmd, &args] { args.words = cmd->remaining(); });
  return cmd;
}
int count_command(const CountArgs& args) { return static_cast<int>(args.words.size()); }

/// The command the table finds parsed in `words` (as main does), run: its exit code; -1 for none.
int dispatch(std::vector<const char*> words, bool* every_rank = nullptr) {
  CLI::App app{"test"};
  app.require_subcommand(1);
  const Command commands[] = {make_command(app, add_greet_command, greet_command, true),
                              make_command(app, add_count_command, count_command)};
  words.insert(words.begin(), "rcsweep");
  app.parse(static_cast<int>(words.size()), words.data());
  for (const auto& c : commands)
    if (c.app->parsed()) {
      if (every_rank) *every_rank = c.every_rank;
      return c.run();
    }
  return -1;
}

TEST(CommandTable, TheParsedCommandRunsWithItsOwnArguments) {
  bool every_rank = false;
  EXPECT_EQ(dispatch({"greet", "abc", "--loud"}, &every_rank), 103);
  EXPECT_TRUE(every_rank);
  EXPECT_EQ(dispatch({"greet", "abcd"}, &every_rank), 4);
  EXPECT_EQ(dispatch({"count", "a", "--b", "-c", "--"}, &every_rank), 4);  // options too, left as they are
  EXPECT_FALSE(every_rank);
  EXPECT_EQ(dispatch({"count"}), 0);
}

TEST(CommandTable, SubcommandsKeepTheOrderOfTheTable) {
  CLI::App app{"test"};
  const Command commands[] = {make_command(app, add_greet_command, greet_command),
                              make_command(app, add_count_command, count_command)};
  const auto subs = app.get_subcommands([](const CLI::App*) { return true; });
  ASSERT_EQ(subs.size(), 2u);
  EXPECT_EQ(subs[0], commands[0].app);
  EXPECT_EQ(subs[0]->get_name(), "greet");
  EXPECT_EQ(subs[1]->get_name(), "count");
  EXPECT_FALSE(commands[0].app->parsed());
}

TEST(CommandTable, ParseErrorsRunNothing) {
  EXPECT_THROW(dispatch({"greet"}), CLI::ParseError);  // its required name is missing
  EXPECT_THROW(dispatch({}), CLI::ParseError);         // no command
}

}  // namespace
}  // namespace rcsweep::cli
