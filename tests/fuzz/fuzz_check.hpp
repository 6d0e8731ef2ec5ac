// Shared by the fuzz harnesses and their replay driver (docs/FUZZING.md).
#pragma once
#include <cstdio>
#include <cstdlib>
#include <string>

namespace rcsweep::fuzz {

/// Name of the input being replayed (set by replay_main.cpp; empty under libFuzzer, which names
/// the crashing input itself).
inline std::string& current_input() {
  static std::string name;
  return name;
}

/// A broken invariant: say which and abort, so libFuzzer saves the input as a crash and the
/// replay test fails.
[[noreturn]] inline void fail(const std::string& what) {
  std::fprintf(stderr, "fuzz invariant violated%s%s: %s\n", current_input().empty() ? "" : " on input ",
               current_input().c_str(), what.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace rcsweep::fuzz
