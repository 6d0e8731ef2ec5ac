// Small plans the task farm's unit tests share: a sweep over `points` lambda values, with or
// without adaptive replicates (one abs_se target on s1 of layer 1).
#pragma once
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "config/sweep_spec.hpp"
#include "plan/plan.hpp"

namespace rcsweep::test {

/// `points` lambda values x `replicates` replicates (T = d = 4, depth 2); ids: point * replicates + replicate.
inline plan::Plan fixed_plan(int points, int replicates) {
  std::string lambdas;
  for (int p = 0; p < points; ++p) lambdas += (p ? ", " : "") + std::to_string(p) + ".0";
  return plan::make_plan(
      config::parse_sweep("[sweep]\nname = \"f\"\nseed = 1\nreplicates = " + std::to_string(replicates) +
                              "\n[model]\nT = 4\nd = 4\ndepth = 2\n[axes]\nlambda = [" + lambdas + "]\n",
                          "test"));
}

/// The same with [sweep.replicates] min/max/step; ids: point * max + replicate.
inline plan::Plan adaptive_plan(int points, int min, int max, int step, double abs_se = 0.5) {
  std::string lambdas;
  for (int p = 0; p < points; ++p) lambdas += (p ? ", " : "") + std::to_string(p) + ".0";
  return plan::make_plan(
      config::parse_sweep("[sweep]\nname = \"a\"\nseed = 1\n[sweep.replicates]\nmin = " + std::to_string(min) +
                              "\nmax = " + std::to_string(max) + "\nstep = " + std::to_string(step) +
                              "\ntargets = [{ metric = \"s1\", layer = 1, abs_se = " + std::to_string(abs_se) +
                              " }]\n[model]\nT = 4\nd = 4\ndepth = 2\n[axes]\nlambda = [" + lambdas + "]\n",
                          "test"));
}

/// Task ids [first, last).
inline std::vector<std::uint64_t> ids(std::uint64_t first, std::uint64_t last) {
  std::vector<std::uint64_t> out(last - first);
  std::iota(out.begin(), out.end(), first);
  return out;
}

}  // namespace rcsweep::test
