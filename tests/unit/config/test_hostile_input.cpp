// Hostile input to the sweep file and its overrides (docs/CONFIG.md "Limits"): every one is a
// ConfigError naming the path or key and the problem, never a crash, a hang or a long computation.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "config/nesting.hpp"
#include "config/overrides.hpp"
#include "config/sweep_spec.hpp"
#include "config_issues.hpp"

namespace rcsweep::config {
namespace {

const std::string good = R"(
[sweep]
name = "ok"
[model]
T = 4
d = 8
depth = 2
)";

/// The single problem read_sweep_file() reports for `path`.
std::string read_problem(const std::filesystem::path& path) {
  try {
    read_sweep_file(path);
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.issues().size(), 1u) << e.what();
    EXPECT_EQ(e.issues()[0].key, "");
    return e.issues()[0].problem;
  }
  ADD_FAILURE() << "no ConfigError for " << path;
  return "";
}

class SweepFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("rcsweep_hostile_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name, std::ios::binary) << text;
    return dir_ / name;
  }
  std::filesystem::path dir_;
};

TEST_F(SweepFile, RegularFileAndSymlinkToItAreRead) {
  const auto path = write("ok.toml", good);
  EXPECT_EQ(read_sweep_file(path), good);
  std::filesystem::create_symlink(path, dir_ / "link.toml");
  EXPECT_EQ(load_sweep(dir_ / "link.toml").name, "ok");
  EXPECT_EQ(sweep_file_problem(dir_ / "link.toml"), "");
}

TEST_F(SweepFile, FifoIsRefusedWithoutBlocking) {
  ASSERT_EQ(::mkfifo((dir_ / "pipe.toml").c_str(), 0600), 0);
  const std::string p = read_problem(dir_ / "pipe.toml");
  EXPECT_NE(p.find("'" + (dir_ / "pipe.toml").string() + "'"), std::string::npos) << p;
  EXPECT_NE(p.find("it is a FIFO (named pipe), not a regular file"), std::string::npos) << p;
  std::filesystem::create_symlink(dir_ / "pipe.toml", dir_ / "to_pipe.toml");
  EXPECT_NE(read_problem(dir_ / "to_pipe.toml").find("FIFO"), std::string::npos);
}

TEST_F(SweepFile, DevicesDirectoriesLoopsAndLongNamesAreRefused) {
  EXPECT_NE(read_problem("/dev/zero").find("'/dev/zero': it is a character device, not a regular file"),
            std::string::npos);
  EXPECT_NE(read_problem(dir_).find("it is a directory"), std::string::npos);
  std::filesystem::create_symlink(dir_ / "b", dir_ / "a");
  std::filesystem::create_symlink(dir_ / "a", dir_ / "b");
  EXPECT_NE(read_problem(dir_ / "a").find("too many levels of symbolic links"), std::string::npos);
  EXPECT_NE(read_problem(dir_ / std::string(300, 'x')).find("the name is too long"), std::string::npos);
  EXPECT_NE(read_problem(dir_ / "missing.toml").find("missing.toml': no such file"), std::string::npos);
}

TEST_F(SweepFile, LargerThanTheLimitIsRefusedBeforeReading) {
  const auto path = dir_ / "huge.toml";
  {
    std::ofstream out(path, std::ios::binary);
    out << good;
  }
  std::filesystem::resize_file(path, max_sweep_file_bytes + 1);  // sparse: nothing written
  const std::string p = read_problem(path);
  EXPECT_NE(p.find("it has 16777217 bytes, more than the 16 MiB (16777216 bytes) a sweep file may have"),
            std::string::npos)
      << p;
  EXPECT_EQ(sweep_file_problem(path), p.substr(p.find("': ") + 3));
  std::filesystem::resize_file(path, max_sweep_file_bytes);  // at the limit: read (and then not TOML)
  EXPECT_EQ(read_sweep_file(path).size(), max_sweep_file_bytes);
}

std::string repeat(const std::string& part, std::size_t n, const std::string& sep = "") {
  std::string out;
  for (std::size_t i = 0; i < n; ++i) out += (i ? sep : "") + part;
  return out;
}

/// The single issue of parse_sweep(text, "bad.toml", overrides).
ConfigIssue only_issue(const std::string& text, const std::vector<std::string>& overrides = {}) {
  try {
    parse_sweep(text, "bad.toml", overrides);
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.issues().size(), 1u) << e.what();
    return e.issues().at(0);
  }
  ADD_FAILURE() << "no ConfigError";
  return {};
}

TEST(Nesting, DeepTableHeaderIsRefusedBeforeToml) {
  // 50 000 dotted parts overflowed toml++'s stack (SIGSEGV).
  const auto issue = only_issue("[" + repeat("a", 50000, ".") + "]\nx = 1\n");
  EXPECT_EQ(issue.key, "");
  EXPECT_EQ(issue.problem,
            "TOML nesting too deep in bad.toml at line 1, column 129: more than 64 levels of tables, dotted key "
            "parts, arrays and inline tables (a sweep file needs about 5)");
  EXPECT_NE(only_issue("[[" + repeat("a", 50000, ".") + "]]\n").problem.find("at line 1, column 130"),
            std::string::npos);
}

TEST(Nesting, DeepDottedKeysArraysAndInlineTablesAreRefused) {
  const std::string head = "[sweep]\nname = \"x\"\n[model]\nT = 1\nd = 1\ndepth = 1\n";
  EXPECT_NE(only_issue(head + repeat("a", 50000, ".") + " = 1\n").problem.find("at line 7, column 126"),
            std::string::npos);
  EXPECT_NE(only_issue(head + "x = " + repeat("[", 30000) + repeat("]", 30000) + "\n").problem.find("line 7"),
            std::string::npos);
  EXPECT_NE(only_issue(head + "x = " + repeat("{a = ", 30000) + "1" + repeat("}", 30000) + "\n")
                .problem.find("TOML nesting too deep"),
            std::string::npos);
  // strings and comments do not count; the position counts their lines
  const std::string quoted = "s = \"" + repeat("[", 100) + "\"\n# " + repeat("{", 100) + "\nm = \"\"\"\n" +
                             repeat("a.", 100) + "\n\"\"\"\nl = '" + repeat("[", 100) + "'\n";
  EXPECT_FALSE(too_deep(quoted).has_value());
  const auto pos = too_deep(quoted + "y = " + repeat("[", 65) + repeat("]", 65) + "\n");
  ASSERT_TRUE(pos.has_value());
  EXPECT_EQ(pos->line, 7u);
  EXPECT_EQ(pos->column, 4u + 64u);  // y, then the 64th array
}

TEST(HugeKeys, AreCutInMessagesAndNotCompared) {
  // a 15 MB key took minutes and gigabytes in the "did you mean" edit distance, and was printed twice
  const auto issue = only_issue(good + std::string(15'000'000, 'k') + " = 1\n");
  EXPECT_EQ(issue.key, "model." + std::string(194, 'k') + "... (15000006 bytes)");
  EXPECT_LE(issue.problem.size(), 2100u);
  EXPECT_EQ(issue.problem.rfind("unknown parameter 'kkk", 0), 0u) << issue.problem.substr(0, 100);
  EXPECT_EQ(nearest(std::string(1000, 'T'), {"T", "d"}), "");
  EXPECT_EQ(nearest("lamdba", {"lambda", "d"}), "lambda");
}

TEST(HugeKeys, AtMostAHundredProblemsAreListed) {
  std::string text = good;
  for (int i = 0; i < 1000; ++i) text += "k" + std::to_string(i) + " = 1\n";
  const auto issues = test::issues_of(text);
  ASSERT_EQ(issues.size(), 101u);
  EXPECT_EQ(issues[0].key, "model.k0");
  EXPECT_EQ(issues[99].key, "model.k99");
  EXPECT_EQ(issues[100].key, "");
  EXPECT_EQ(issues[100].problem, "and 900 more problems: only the first 100 are listed");
}

TEST(Nesting, BoundIsSixtyFourLevels) {
  // under [a.b.c] (3 levels), x = [[1]] reaches 6: the key, then one per array
  EXPECT_FALSE(too_deep("[a.b.c]\nx = [[1]]\n", max_nesting - 6).has_value());
  EXPECT_TRUE(too_deep("[a.b.c]\nx = [[1]]\n", max_nesting - 5).has_value());
  EXPECT_FALSE(too_deep("[" + repeat("a", 64, ".") + "]\n").has_value());
  EXPECT_TRUE(too_deep("[" + repeat("a", 65, ".") + "]\n").has_value());
  EXPECT_FALSE(too_deep("x = " + repeat("[", 63) + repeat("]", 63)).has_value());  // x, then 63 arrays
  EXPECT_TRUE(too_deep("x = " + repeat("[", 64) + repeat("]", 64)).has_value());
  EXPECT_TRUE(too_deep("[" + repeat("a", 32, ".") + "]\n" + repeat("b", 33, ".") + " = 1\n").has_value());
  EXPECT_FALSE(too_deep("[" + repeat("a", 32, ".") + "]\n" + repeat("b", 32, ".") + " = 1\n").has_value());
}

TEST(Nesting, EveryShippedSweepFileIsWellWithinTheBound) {
  const std::filesystem::path root = RCSWEEP_SOURCE_DIR;
  int files = 0;
  for (const char* dir :
       {"jobs/examples", "bench/sweeps", "tests/e2e/data", "tests/fuzz/store_plans", "tests/fuzz/corpus/config"})
    for (const auto& entry : std::filesystem::directory_iterator(root / dir)) {
      if (entry.path().extension() != ".toml") continue;
      ++files;
      EXPECT_FALSE(too_deep(read_sweep_file(entry.path()), max_nesting - 58).has_value()) << entry.path();
    }
  EXPECT_GT(files, 10);
}

TEST(Nesting, DeepOverrideValueIsRefusedNamingTheKey) {
  // 30 000 nested lists overflowed the stack of the bare-word list reader.
  for (const std::string inner : {"", "x", "0"}) {
    const std::string text = "axes.lambda=" + repeat("[", 30000) + inner + repeat("]", 30000);
    try {
      parse_override(text);
      FAIL() << "accepted";
    } catch (const ConfigError& e) {
      ASSERT_EQ(e.issues().size(), 1u);
      EXPECT_EQ(e.issues()[0].key, "axes.lambda");
      const std::string& p = e.issues()[0].problem;
      EXPECT_NE(p.find("... (" + std::to_string(text.size()) +
                       " characters)': the value nests deeper than 64 levels (with the key's parts) at character 63"),
                std::string::npos)
          << p.substr(0, 400);
      EXPECT_LT(p.size(), 400u);
    }
  }
  const auto issue = only_issue(good, {"model.x={" + repeat("a", 3000, ".") + " = 1}"});
  EXPECT_EQ(issue.key, "model.x");
  EXPECT_NE(issue.problem.find("nests deeper than 64 levels"), std::string::npos) << issue.problem;
  EXPECT_NO_THROW(parse_override("axes.lambda=" + repeat("[", 62) + "1" + repeat("]", 62)));
}

TEST(Nesting, OverrideKeyOfTooManyPartsIsRefused) {
  const auto issue = only_issue(good, {repeat("a", 30000, ".") + "=1"});
  EXPECT_EQ(issue.key, "");
  EXPECT_NE(issue.problem.find("... (60001 characters)': the key has more than 64 parts (tables and indices)"),
            std::string::npos)
      << issue.problem.substr(0, 400);
  EXPECT_NE(only_issue(good, {"zip" + repeat("[0]", 100) + "=1"}).problem.find("more than 64 parts"),
            std::string::npos);
}

/// `good` with `from` replaced by `to`.
std::string with(const std::string& from, const std::string& to, std::string text = good) {
  text.replace(text.find(from), from.size(), to);
  return text;
}

TEST(Bounds, EveryCountHasAStatedMaximum) {
  test::expect_only(with("depth = 2", "depth = 2147483647"), "model.depth",
                    {"must be <= 100000, got 2147483647 (docs/CONFIG.md \"Limits\")"});
  test::expect_only(with("T = 4", "T = 32769"), "model.T", {"must be <= 32768, got 32769"});
  test::expect_only(with("d = 8", "d = 32769"), "model.d", {"must be <= 32768, got 32769"});
  test::expect_only(with("depth = 2", "depth = 2\nheads = 257"), "model.heads", {"must be <= 256, got 257"});
  test::expect_only(with("depth = 2", "depth = 2\nmlp_ratio = 65"), "model.mlp_ratio", {"must be <= 64, got 65"});
  test::expect_only(with("depth = 2", "depth = 2\nstate_dim = 32769"), "model.state_dim", {"must be <= 32768"});
  test::expect_only(with("depth = 2", "depth = 2\nd_qk = 32769"), "model.d_qk", {"must be <= 32768"});
  // at the bounds: accepted
  const SweepSpec edge = parse_sweep(
      with("T = 4\nd = 8\ndepth = 2", "T = 32768\nd = 32768\ndepth = 100000\nheads = 256"));
  EXPECT_EQ(edge.max_depth(), 100000);
}

TEST(Bounds, StoredRowsSpectraAndGradientsAreBounded) {
  const std::string deep = with("depth = 2", "depth = 100000");
  // 2684 tasks x 100001 layers fit the 2^28 rows of a per-layer metric; 2685 do not
  EXPECT_NO_THROW(parse_sweep(with("name = \"ok\"", "name = \"ok\"\nreplicates = 2684", deep)));
  test::expect_only(with("name = \"ok\"", "name = \"ok\"\nreplicates = 2685", deep), "model.depth",
                    {"2685 tasks x 100001 layers (0..100000) is 268502685 rows of per-layer metrics, more than the "
                     "268435456 a store holds"});
  test::expect_only(with("name = \"ok\"", "name = \"ok\"\nreplicates = 672", deep) + "[output]\nspectra = \"all\"\n",
                    "output.spectra", {"672 tasks x 100001 layers is 67200672 spectra, more than the 67108864"});
  test::expect_only(
      with("name = \"ok\"", "name = \"ok\"\nreplicates = 672", deep) + "[output]\nmixer_spectra = \"all\"\n",
      "output.mixer_spectra", {"672 tasks x 100000 layers is 67200000 spectra"});
  EXPECT_NO_THROW(parse_sweep(with("name = \"ok\"", "name = \"ok\"\nreplicates = 671", deep) +
                              "[output]\nspectra = \"all\"\nmixer_spectra = \"all\"\n"));
}

TEST(Bounds, SpectrumValuesAndGradientNormsAreBounded) {
  const std::string wide = with("T = 4\nd = 8\ndepth = 2", "T = 32768\nd = 32768\ndepth = 40000") +
                           "[axes]\nlambda = [0, 1, 2, 3]\n";
  test::expect_only(wide + "[output]\nspectra = \"all\"\n", "output.spectra",
                    {"4 tasks x 40001 layers x min(T, d) is 5243011072 values, more than the 4294967296 a store "
                     "holds in one dataset"});
  EXPECT_NO_THROW(parse_sweep(with("T = 4\nd = 8\ndepth = 2", "T = 32768\nd = 32768\ndepth = 40000") +
                              "[output]\nspectra = \"all\"\n"));  // 1 task: 1310752768 values
  // 65536 x 65536 norms are 2^32: the most a dataset may hold
  EXPECT_NO_THROW(parse_sweep(with("depth = 2", "depth = 65536") + "[output]\ngradients = \"all\"\n"));
  test::expect_only(with("depth = 2", "depth = 65537") + "[output]\ngradients = \"all\"\n", "output.gradients",
                    {"gradient norms: 1 tasks x 65537 layers x 65537 output depths is 4295098369 values, more than "
                     "the 4294967296 a store holds in one dataset"});
}

}  // namespace
}  // namespace rcsweep::config
