#include "config/nesting.hpp"

#include <algorithm>
#include <vector>

namespace rcsweep::config {

std::optional<NestingPosition> too_deep(std::string_view text, int depth) {
  std::size_t line = 1, line_start = 0;
  const auto at = [&](std::size_t i) { return NestingPosition{line, i - line_start + 1}; };
  std::vector<int> open;   // nesting inside each open array or inline table
  std::vector<char> kind;  // '[' or '{' of each
  int table = depth;       // nesting of the current [table] (its header's parts)
  bool key = true;         // reading a key (before '='), else a value
  bool line_blank = true;  // nothing but blanks since the start of the line
  int key_dots = 0;        // dots of the key being read
  int value_parts = 0;     // parts of the key whose value comes next (0 inside an array)
  const auto current = [&] { return open.empty() ? table : open.back(); };

  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') {
      ++line;
      line_start = i + 1;
      line_blank = true;
      if (open.empty()) {
        key = true;
        key_dots = 0;
        value_parts = 0;
      }
      continue;
    }
    if (c == '#') {  // a comment, to the end of the line
      while (i + 1 < text.size() && text[i + 1] != '\n') ++i;
      continue;
    }
    if (c == '"' || c == '\'') {  // a string: skipped, escapes and multi-line forms included
      const bool triple = text.substr(i, 3) == std::string_view(c == '"' ? "\"\"\"" : "'''");
      std::size_t j = i + (triple ? 3 : 1);
      while (j < text.size()) {
        if (text[j] == '\n') {
          if (!triple) break;  // an unterminated string: the line ends it here
          ++line;
          line_start = j + 1;
        } else if (c == '"' && text[j] == '\\') {
          if (++j < text.size() && text[j] == '\n') {  // a line-ending backslash
            ++line;
            line_start = j + 1;
          }
          ++j;  // past the escaped character
          continue;
        } else if (text[j] == c && (!triple || text.substr(j, 3) == text.substr(i, 3))) {
          break;
        }
        ++j;
      }
      i = j >= text.size() ? j : text[j] == '\n' ? j - 1 : triple ? j + 2 : j;
      line_blank = false;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\r') continue;
    const bool first = line_blank;
    line_blank = false;
    if (key && open.empty() && first && c == '[') {  // a [table] or [[table]] header
      int dots = 0;
      std::size_t j = i;
      for (; j < text.size() && text[j] != '\n' && text[j] != '#'; ++j) {
        if (text[j] == '"' || text[j] == '\'') {
          const char q = text[j];
          for (++j; j < text.size() && text[j] != q && text[j] != '\n'; ++j)
            if (q == '"' && text[j] == '\\') ++j;
          if (j >= text.size() || text[j] == '\n') break;
        } else if (text[j] == '.') {
          if (depth + ++dots + 1 > max_nesting) return at(j);
        } else if (text[j] == ']') {
          break;
        }
      }
      table = depth + dots + 1;
      i = j < text.size() && text[j] == ']' ? j : j - 1;
      if (i + 1 < text.size() && text[i + 1] == ']') ++i;
      continue;
    }
    if (key) {
      if (c == '.') {
        if (current() + ++key_dots + 1 > max_nesting) return at(i);
      } else if (c == '=') {
        value_parts = key_dots + 1;
        key_dots = 0;
        key = false;
      } else if (c == '}' && !open.empty() && kind.back() == '{') {  // an empty inline table
        open.pop_back();
        kind.pop_back();
        key = false;
        value_parts = 0;
      }
      continue;
    }
    if (c == '[' || c == '{') {
      // an inline table is the table its key names; an array is one level below its key
      const int nesting = current() + (c == '{' ? std::max(value_parts, 1) : value_parts + 1);
      if (nesting > max_nesting) return at(i);
      open.push_back(nesting);
      kind.push_back(c);
      value_parts = 0;
      key = c == '{';
      key_dots = 0;
    } else if ((c == ']' || c == '}') && !open.empty()) {
      open.pop_back();
      kind.pop_back();
      value_parts = 0;
    } else if (c == ',' && !open.empty()) {
      key = kind.back() == '{';
      key_dots = 0;
      value_parts = 0;
    }
  }
  return std::nullopt;
}

}  // namespace rcsweep::config
