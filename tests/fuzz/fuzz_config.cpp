// libFuzzer harness: the sweep-file parser, config::parse_sweep (docs/FUZZING.md).
// A ConfigError (or any rcsweep::Error) is the normal answer to a bad file. Everything else is a
// bug: a crash, a sanitizer report, a hang, another exception (it escapes and aborts), or an
// accepted file whose canonical text is not a fixed point of the parser (sweep_spec.hpp promises
// parse_sweep(canonical_toml()) gives back an equal spec; the plan hash depends on it).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/error.hpp"
#include "config/sweep_spec.hpp"
#include "fuzz_check.hpp"

namespace {

using rcsweep::fuzz::fail;

// A refusal must say what is wrong: at least one issue, none without a problem text.
void check_refusal(const rcsweep::ConfigError& e) {
  if (e.issues().empty()) fail("ConfigError without any issue");
  for (const rcsweep::ConfigIssue& issue : e.issues())
    if (issue.problem.empty()) fail("ConfigError issue on key '" + issue.key + "' has no problem text");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  rcsweep::config::SweepSpec spec;
  try {
    spec = rcsweep::config::parse_sweep(text, "fuzz.toml");
  } catch (const rcsweep::ConfigError& e) {
    check_refusal(e);
    return 0;
  } catch (const rcsweep::Error&) {
    return 0;
  }

  const std::string canonical = spec.canonical_toml();
  rcsweep::config::SweepSpec again;
  try {
    again = rcsweep::config::parse_sweep(canonical, "canonical.toml");
  } catch (const rcsweep::Error& e) {
    fail("the canonical text of an accepted sweep file is refused: " + std::string(e.what()) +
         "\n--- canonical text ---\n" + canonical);
  }
  const std::string canonical_again = again.canonical_toml();
  if (canonical_again != canonical)
    fail("canonical text is not a fixed point\n--- first ---\n" + canonical + "--- second ---\n" + canonical_again);
  if (again.plan_hash() != spec.plan_hash()) fail("plan hash changes on re-parsing the canonical text");
  if (again.n_points() != spec.n_points() || again.max_depth() != spec.max_depth())
    fail("re-parsing the canonical text changes the grid");
  return 0;
}
