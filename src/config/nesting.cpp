#include "config/nesting.hpp"

#include <algorithm>
#include <vector>

namespace rcsweep::config {
namespace {

/// One scan of too_deep(): where it is in the text and how deep each open thing nests.
class NestingScan {
 public:
  NestingScan(std::string_view text, int depth) : text_(text), depth_(depth), table_(depth) {}

  /// Where the text first nests too deep, or nothing.
  std::optional<NestingPosition> run();

 private:
  NestingPosition at(std::size_t i) const { return NestingPosition{line_, i - line_start_ + 1}; }
  int current() const { return open_.empty() ? table_ : open_.back(); }

  /// The line break at `i`: outside arrays and inline tables, a key comes next.
  void new_line(std::size_t i);

  /// Past the string that opens at `i`: where the scan goes on (the loop steps past it).
  std::size_t skip_string(std::size_t i);

  /// A [table] or [[table]] header at `i`; `i` moves to its end.
  std::optional<NestingPosition> table_header(std::size_t& i);

  /// A character of a key (before '=').
  std::optional<NestingPosition> key_char(char c, std::size_t i);

  /// A character of a value.
  std::optional<NestingPosition> value_char(char c, std::size_t i);

  std::string_view text_;
  int depth_;
  std::size_t line_ = 1, line_start_ = 0;
  std::vector<int> open_;   // nesting inside each open array or inline table
  std::vector<char> kind_;  // '[' or '{' of each
  int table_;               // nesting of the current [table] (its header's parts)
  bool key_ = true;         // reading a key (before '='), else a value
  bool line_blank_ = true;  // nothing but blanks since the start of the line
  int key_dots_ = 0;        // dots of the key being read
  int value_parts_ = 0;     // parts of the key whose value comes next (0 inside an array)
};

std::optional<NestingPosition> NestingScan::run() {
  for (std::size_t i = 0; i < text_.size(); ++i) {
    const char c = text_[i];
    if (c == '\n') {
      new_line(i);
      continue;
    }
    if (c == '#') {  // a comment, to the end of the line
      while (i + 1 < text_.size() && text_[i + 1] != '\n') ++i;
      continue;
    }
    if (c == '"' || c == '\'') {  // a string: skipped, escapes and multi-line forms included
      i = skip_string(i);
      line_blank_ = false;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\r') continue;
    const bool first = line_blank_;
    line_blank_ = false;
    std::optional<NestingPosition> deep;
    if (key_ && open_.empty() && first && c == '[')  // a [table] or [[table]] header
      deep = table_header(i);
    else if (key_)
      deep = key_char(c, i);
    else
      deep = value_char(c, i);
    if (deep) return deep;
  }
  return std::nullopt;
}

void NestingScan::new_line(std::size_t i) {
  ++line_;
  line_start_ = i + 1;
  line_blank_ = true;
  if (open_.empty()) {
    key_ = true;
    key_dots_ = 0;
    value_parts_ = 0;
  }
}

std::size_t NestingScan::skip_string(std::size_t i) {
  const char c = text_[i];
  const bool triple = text_.substr(i, 3) == std::string_view(c == '"' ? "\"\"\"" : "'''");
  std::size_t j = i + (triple ? 3 : 1);
  while (j < text_.size()) {
    if (text_[j] == '\n') {
      if (!triple) break;  // an unterminated string: the line ends it here
      ++line_;
      line_start_ = j + 1;
    } else if (c == '"' && text_[j] == '\\') {
      if (++j < text_.size() && text_[j] == '\n') {  // a line-ending backslash
        ++line_;
        line_start_ = j + 1;
      }
      ++j;  // past the escaped character
      continue;
    } else if (text_[j] == c && (!triple || text_.substr(j, 3) == text_.substr(i, 3))) {
      break;
    }
    ++j;
  }
  return j >= text_.size() ? j : text_[j] == '\n' ? j - 1 : triple ? j + 2 : j;
}

std::optional<NestingPosition> NestingScan::table_header(std::size_t& i) {
  int dots = 0;
  std::size_t j = i;
  for (; j < text_.size() && text_[j] != '\n' && text_[j] != '#'; ++j) {
    if (text_[j] == '"' || text_[j] == '\'') {
      const char q = text_[j];
      for (++j; j < text_.size() && text_[j] != q && text_[j] != '\n'; ++j)
        if (q == '"' && text_[j] == '\\') ++j;
      if (j >= text_.size() || text_[j] == '\n') break;
    } else if (text_[j] == '.') {
      if (depth_ + ++dots + 1 > max_nesting) return at(j);
    } else if (text_[j] == ']') {
      break;
    }
  }
  table_ = depth_ + dots + 1;
  i = j < text_.size() && text_[j] == ']' ? j : j - 1;
  if (i + 1 < text_.size() && text_[i + 1] == ']') ++i;
  return std::nullopt;
}

std::optional<NestingPosition> NestingScan::key_char(char c, std::size_t i) {
  if (c == '.') {
    if (current() + ++key_dots_ + 1 > max_nesting) return at(i);
  } else if (c == '=') {
    value_parts_ = key_dots_ + 1;
    key_dots_ = 0;
    key_ = false;
  } else if (c == '}' && !open_.empty() && kind_.back() == '{') {  // an empty inline table
    open_.pop_back();
    kind_.pop_back();
    key_ = false;
    value_parts_ = 0;
  }
  return std::nullopt;
}

std::optional<NestingPosition> NestingScan::value_char(char c, std::size_t i) {
  if (c == '[' || c == '{') {
    // an inline table is the table its key names; an array is one level below its key
    const int nesting = current() + (c == '{' ? std::max(value_parts_, 1) : value_parts_ + 1);
    if (nesting > max_nesting) return at(i);
    open_.push_back(nesting);
    kind_.push_back(c);
    value_parts_ = 0;
    key_ = c == '{';
    key_dots_ = 0;
  } else if ((c == ']' || c == '}') && !open_.empty()) {
    open_.pop_back();
    kind_.pop_back();
    value_parts_ = 0;
  } else if (c == ',' && !open_.empty()) {
    key_ = kind_.back() == '{';
    key_dots_ = 0;
    value_parts_ = 0;
  }
  return std::nullopt;
}

}  // namespace

std::optional<NestingPosition> too_deep(std::string_view text, int depth) { return NestingScan(text, depth).run(); }

}  // namespace rcsweep::config
