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

/// A minimal valid sweep file.
inline const std::string good = R"(
[sweep]
name = "ok"
[model]
T = 4
d = 8
depth = 2
)";

/// `text` (by default `good`) with `from` replaced by `to`.
inline std::string with(const std::string& from, const std::string& to, std::string text = good) {
  text.replace(text.find(from), from.size(), to);
  return text;
}

/// The single issue of parse_sweep(text, "bad.toml", overrides).
inline ConfigIssue only_issue(const std::string& text, const std::vector<std::string>& overrides = {}) {
  try {
    parse_sweep(text, "bad.toml", overrides);
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.issues().size(), 1u) << e.what();
    return e.issues().at(0);
  }
  ADD_FAILURE() << "no ConfigError";
  return {};
}

/// Exactly one issue, on `key`, whose message contains every fragment.
inline void expect_only(const std::string& text, const std::string& key, std::initializer_list<std::string> fragments) {
  const auto issues = issues_of(text);
  ASSERT_EQ(issues.size(), 1u) << dump(issues);
  EXPECT_EQ(issues[0].key, key) << dump(issues);
  for (const auto& f : fragments) EXPECT_NE(issues[0].problem.find(f), std::string::npos) << f << "\n" << dump(issues);
}

}  // namespace rcsweep::config::test
