// The checks of a whole sweep (config/sweep_checks.cpp): check_model() at every grid point, each
// distinct problem once on the key to blame; the grid's points and tasks; what a store would hold
// (rows of per-layer metrics, spectra, gradient norms) against docs/CONFIG.md "Limits".
#include <gtest/gtest.h>

#include <string>

#include "base/error.hpp"
#include "config/sweep_spec.hpp"
#include "config_issues.hpp"

namespace rcsweep::config {
namespace {

using test::dump;
using test::expect_only;
using test::issues_of;
using test::with;

const std::string head = "[sweep]\nname = \"bad\"\n";
const std::string model = "[model]\nT = 4\nd = 8\ndepth = 2\n";

TEST(SweepErrors, OrthonormalWithTAboveDInAnAxis) {
  const auto issues = issues_of(head +
                                "[model]\ninput = \"orthonormal\"\nd = 8\ndepth = 2\n[axes]\nT = [4, 8, 16, 32]\n");
  ASSERT_EQ(issues.size(), 1u) << dump(issues);
  EXPECT_EQ(issues[0].key, "axes.T");
  EXPECT_NE(issues[0].problem.find("T <= d"), std::string::npos) << dump(issues);
  EXPECT_NE(issues[0].problem.find("2 of 4 grid points"), std::string::npos) << dump(issues);
  EXPECT_NE(issues[0].problem.find("point 2 (T = 16)"), std::string::npos) << dump(issues);
}

TEST(SweepErrors, GridCheckVisitsEveryPointOfTwoAxes) {
  // Only (T, d) = (16, 8) of the 2 x 2 grid is bad: the third point in row-major order.
  expect_only(head + "[model]\ndepth = 2\n[axes]\nT = [4, 16]\nd = [8, 32]\n", "axes.T",
              {"at 1 of 4 grid points, e.g. point 2 (T = 16, d = 8)"});
}

TEST(SweepErrors, OrthonormalWithTAboveDInModelBlamesInput) {
  expect_only(head + "[model]\nT = 16\nd = 8\ndepth = 2\n", "model.input", {"T = 16 > d = 8"});
}

TEST(SweepErrors, OrthonormalProblemInZipBlamesTheZip) {
  expect_only(head + "[model]\ndepth = 2\n[[zip]]\nT = [4, 16]\nd = [8, 8]\n", "zip[0].T", {"T <= d"});
}

TEST(SweepErrors, TooLargeGrid) {
  // 100 x 100 x 100 x 11 = 11 million points.
  std::string axes = "[axes]\n";
  for (const char* name : {"sigma_qk", "sigma_A", "sigma_v"}) {
    axes += std::string(name) + " = [";
    for (int i = 1; i <= 100; ++i) axes += (i > 1 ? ", " : "") + std::to_string(i);
    axes += "]\n";
  }
  axes += "heads = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]\n";
  expect_only(head + model + axes, "axes", {"more than 1000000 points"});
}

TEST(SweepErrors, TooManyTasks) {
  std::string axes = "[axes]\nsigma_A = [";
  for (int i = 1; i <= 1000; ++i) axes += (i > 1 ? ", " : "") + std::to_string(i);
  axes += "]\n";
  expect_only("[sweep]\nname = \"x\"\nreplicates = 1001\n" + model + axes, "sweep.replicates",
              {"1000 points x 1001 replicates is more than 1000000 tasks"});
}

TEST(SweepErrors, ExactGradientsNeedLinearStacksAtEveryPoint) {
  // the softmax point of the zip is not a linear stack; the Markov points are
  const std::string text = head + model +
                           "[[zip]]\nmixer = [\"markov\", \"softmax\"]\n[output]\ngradients = \"last\"\n"
                           "grad_method = \"exact\"\n";
  expect_only(text, "output.grad_method", {"needs a linear stack", "1 of 2 grid points", "mixer = softmax"});
  const auto spec = parse_sweep(head + model +
                                    "[[zip]]\nmixer = [\"markov\", \"lti\"]\n[output]\n"
                                    "gradients = \"all\"\ngrad_method = \"exact\"\ngrad_probes = 3\n",
                                "ok.toml");
  EXPECT_EQ(spec.output.gradients, Spectra::all);
  EXPECT_EQ(spec.output.grad_method, GradMethod::exact);
  EXPECT_EQ(spec.output.grad_probes, 3);
  // the gradient options are part of the plan; without them the canonical text is unchanged
  EXPECT_NE(spec.canonical_toml().find("grad_probes = 3"), std::string::npos);
  EXPECT_EQ(parse_sweep(head + model, "a.toml").canonical_toml().find("grad"), std::string::npos);
}

TEST(Bounds, StoredRowsSpectraAndGradientsAreBounded) {
  const std::string deep = with("depth = 2", "depth = 100000");
  // 2684 tasks x 100001 layers fit the 2^28 rows of a per-layer metric; 2685 do not
  EXPECT_NO_THROW(parse_sweep(with("name = \"ok\"", "name = \"ok\"\nreplicates = 2684", deep)));
  expect_only(with("name = \"ok\"", "name = \"ok\"\nreplicates = 2685", deep), "model.depth",
              {"2685 tasks x 100001 layers (0..100000) is 268502685 rows of per-layer metrics, more than the "
               "268435456 a store holds"});
  expect_only(with("name = \"ok\"", "name = \"ok\"\nreplicates = 672", deep) + "[output]\nspectra = \"all\"\n",
              "output.spectra", {"672 tasks x 100001 layers is 67200672 spectra, more than the 67108864"});
  expect_only(with("name = \"ok\"", "name = \"ok\"\nreplicates = 672", deep) + "[output]\nmixer_spectra = \"all\"\n",
              "output.mixer_spectra", {"672 tasks x 100000 layers is 67200000 spectra"});
  EXPECT_NO_THROW(parse_sweep(with("name = \"ok\"", "name = \"ok\"\nreplicates = 671", deep) +
                              "[output]\nspectra = \"all\"\nmixer_spectra = \"all\"\n"));
}

TEST(Bounds, SpectrumValuesAndGradientNormsAreBounded) {
  const std::string wide = with("T = 4\nd = 8\ndepth = 2", "T = 32768\nd = 32768\ndepth = 40000") +
                           "[axes]\nlambda = [0, 1, 2, 3]\n";
  expect_only(wide + "[output]\nspectra = \"all\"\n", "output.spectra",
              {"4 tasks x 40001 layers x min(T, d) is 5243011072 values, more than the 4294967296 a store "
               "holds in one dataset"});
  EXPECT_NO_THROW(parse_sweep(with("T = 4\nd = 8\ndepth = 2", "T = 32768\nd = 32768\ndepth = 40000") +
                              "[output]\nspectra = \"all\"\n"));  // 1 task: 1310752768 values
  // 65536 x 65536 norms are 2^32: the most a dataset may hold
  EXPECT_NO_THROW(parse_sweep(with("depth = 2", "depth = 65536") + "[output]\ngradients = \"all\"\n"));
  expect_only(with("depth = 2", "depth = 65537") + "[output]\ngradients = \"all\"\n", "output.gradients",
              {"gradient norms: 1 tasks x 65537 layers x 65537 output depths is 4295098369 values, more than "
               "the 4294967296 a store holds in one dataset"});
}

}  // namespace
}  // namespace rcsweep::config
