// docs/CONFIG.md documents every parameter of the registry (the reference users read).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "config/params.hpp"

namespace rcsweep::config {
namespace {

TEST(Docs, ConfigReferenceNamesEveryParameterAndChoice) {
  std::ifstream in(std::string(RCSWEEP_SOURCE_DIR) + "/docs/CONFIG.md");
  ASSERT_TRUE(in) << "docs/CONFIG.md not found";
  std::stringstream text;
  text << in.rdbuf();
  const std::string doc = text.str();
  for (const auto& p : model_params()) {
    EXPECT_NE(doc.find("| `" + std::string(p.name) + "` |"), std::string::npos) << p.name << " has no table row";
    for (auto choice : p.choices)
      EXPECT_NE(doc.find("`" + std::string(choice) + "`"), std::string::npos) << p.name << " choice " << choice;
  }
}

}  // namespace
}  // namespace rcsweep::config
