// Helpers of the config tests: the issues a malformed sweep file produces.
#pragma once
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "config/sweep_spec.hpp"

namespace rcsweep::config::test {

/// The issues parse_sweep() throws for `text` (a test failure when it does not throw).
inline std::vector<ConfigIssue> issues_of(const std::string& text) {
  try {
    parse_sweep(text, "bad.toml");
  } catch (const ConfigError& e) {
    return e.issues();
  }
  ADD_FAILURE() << "no ConfigError for:\n" << text;
  return {};
}

inline std::string dump(const std::vector<ConfigIssue>& issues) {
  std::string out;
  for (const auto& i : issues) out += "  [" + i.key + "] " + i.problem + "\n";
  return out;
}

/// Exactly one issue, on `key`, whose message contains every fragment.
inline void expect_only(const std::string& text, const std::string& key, std::initializer_list<std::string> fragments) {
  const auto issues = issues_of(text);
  ASSERT_EQ(issues.size(), 1u) << dump(issues);
  EXPECT_EQ(issues[0].key, key) << dump(issues);
  for (const auto& f : fragments) EXPECT_NE(issues[0].problem.find(f), std::string::npos) << f << "\n" << dump(issues);
}

}  // namespace rcsweep::config::test
