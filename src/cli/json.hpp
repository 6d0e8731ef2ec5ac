// JSON string literals for what rcsweep prints as JSON (`run --progress json`, `info --json`):
// valid JSON, and valid UTF-8, for any bytes (docs/EVENTS.md "Strings").
#pragma once
#include <string>
#include <string_view>

namespace rcsweep::cli {

/// `text` as a JSON string literal, quotes included. Well-formed UTF-8 is kept as it is; `"` and
/// `\` are escaped, control characters (U+0000..U+001F, U+007F) written as \n, \t, \r or \u00XX;
/// each maximal subpart of an ill-formed UTF-8 sequence (a stray byte such as 0xFF, a cut or
/// overlong sequence, an encoded surrogate) becomes one \uFFFD, as Unicode's "U+FFFD substitution
/// of maximal subparts" and Python's `bytes.decode("utf-8", "replace")` have it. The result is
/// ASCII but for the kept UTF-8. Throws nothing but std::bad_alloc.
std::string json_string(std::string_view text);

}  // namespace rcsweep::cli
