#include "cli/json.hpp"

#include <cstdio>

namespace rcsweep::cli {
namespace {

/// The length of the well-formed UTF-8 sequence starting at `s[i]` (a byte >= 0x80), or 0 when
/// none starts there; `bad` is then the length of the maximal subpart to replace (at least 1).
/// The ranges are those of the Unicode Standard's table "Well-Formed UTF-8 Byte Sequences".
std::size_t utf8_sequence(std::string_view s, std::size_t i, std::size_t& bad) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  std::size_t len = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the second byte's range
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0;  // no overlong forms
    if (c == 0xED) hi = 0x9F;  // no surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) lo = 0x90;  // no overlong forms
    if (c == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  }
  bad = 1;
  if (len == 0) return 0;
  for (std::size_t k = 1; k < len; ++k) {
    if (i + k >= s.size()) return 0;
    const unsigned char b = byte(i + k);
    if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF)) return 0;
    bad = k + 1;
  }
  return len;
}

}  // namespace

std::string json_string(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  out += '"';
  for (std::size_t i = 0; i < text.size();) {
    const char ch = text[i];
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 0x80) {
      std::size_t bad = 1;
      if (const std::size_t len = utf8_sequence(text, i, bad)) {
        out.append(text.substr(i, len));
        i += len;
      } else {
        out += "\\uFFFD";
        i += bad;
      }
      continue;
    }
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (ch == '\n') {
      out += "\\n";
    } else if (ch == '\t') {
      out += "\\t";
    } else if (ch == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04X", static_cast<unsigned>(c));
      out += buf;
    } else {
      out += ch;
    }
    ++i;
  }
  return out + '"';
}

}  // namespace rcsweep::cli
