#include "checkpoint/token_file.hpp"

#include <algorithm>
#include <fstream>

#include "base/error.hpp"

namespace rcsweep::checkpoint {

namespace {

// Most issues listed by check_vocabulary before a count of the rest.
constexpr std::size_t max_listed_issues = 20;

bool is_blank(char c) noexcept { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }
bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }

// A token as shown in a message: at most 32 characters, control and non-ASCII bytes as '?'.
std::string shown(std::string_view token) {
  std::string out(token.substr(0, 32));
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
  if (token.size() > 32) out += "...";
  return "\"" + out + "\"";
}

[[noreturn]] void refuse_at(const std::string& file, std::size_t line, std::size_t column, const std::string& problem) {
  throw ConfigError({{file, "line " + std::to_string(line) + ", column " + std::to_string(column) + ": " + problem}});
}

// The id a token names, or a refusal naming its place.
std::int64_t token_id(std::string_view token, const std::string& file, std::size_t line, std::size_t column) {
  const bool negative = token.size() > 1 && token[0] == '-' && std::all_of(token.begin() + 1, token.end(), is_digit);
  if (negative)
    refuse_at(file, line, column,
              "token " + shown(token) + " is negative: a token id is a non-negative decimal integer");
  if (!std::all_of(token.begin(), token.end(), is_digit)) {
    std::string problem = "token " + shown(token) + " is not a token id (a non-negative decimal integer)";
    if (token.find('#') != std::string_view::npos) problem += "; '#' starts a comment only at the start of a line";
    refuse_at(file, line, column, problem);
  }
  std::int64_t value = 0;
  for (const char c : token) {
    value = value * 10 + (c - '0');
    if (value > max_token_id)  // checked at every digit: no overflow
      refuse_at(file, line, column,
                "token " + shown(token) + " is above 2^53 = " + std::to_string(max_token_id) +
                    ", the largest token id accepted");
  }
  return value;
}

// Reads the lines of a token file: one call per line, with its 1-based number.
class Parser {
 public:
  Parser(std::string file, const TokenFileLimits& limits) : limits_(limits) { result_.file = std::move(file); }

  void line(std::string_view text, std::size_t number) {
    if (text.size() > limits_.line_bytes) too_long(number);
    std::size_t i = 0;
    while (i < text.size() && is_blank(text[i])) ++i;
    if (i == text.size() || text[i] == '#') return;  // blank or a comment
    if (result_.excerpts.size() == limits_.excerpts)
      throw ConfigError(
          {{result_.file, "line " + std::to_string(number) + ": more than " + std::to_string(limits_.excerpts) +
                              " excerpts, the most a token file may hold"}});
    std::vector<std::int64_t> ids;
    while (i < text.size()) {
      std::size_t end = i;
      while (end < text.size() && !is_blank(text[end])) ++end;
      ids.push_back(token_id(text.substr(i, end - i), result_.file, number, i + 1));
      i = end;
      while (i < text.size() && is_blank(text[i])) ++i;
    }
    result_.excerpts.push_back(std::move(ids));
    result_.lines.push_back(number);
  }

  const std::string& file() const noexcept { return result_.file; }

  [[noreturn]] void too_long(std::size_t number) const {
    throw ConfigError(
        {{result_.file, "line " + std::to_string(number) + " is longer than " + std::to_string(limits_.line_bytes) +
                            " characters, the longest line a token file may have"}});
  }

  TokenFile finish() {
    if (result_.excerpts.empty())
      throw ConfigError({{result_.file, "holds no excerpt: it is empty or every line is blank or a comment"}});
    return std::move(result_);
  }

 private:
  TokenFileLimits limits_;
  TokenFile result_;
};

}  // namespace

PaddedTokens pad_tokens(std::span<const std::int64_t> ids, std::size_t length, std::int64_t pad_id) {
  if (ids.size() > length)
    throw Error("pad_tokens: " + std::to_string(ids.size()) + " ids do not fit in length " + std::to_string(length));
  if (pad_id < 0) throw Error("pad_tokens: the padding id " + std::to_string(pad_id) + " is negative");
  PaddedTokens out;
  out.ids.assign(ids.begin(), ids.end());
  out.ids.resize(length, pad_id);
  out.real.assign(length, false);
  std::fill_n(out.real.begin(), ids.size(), true);
  return out;
}

std::size_t TokenFile::longest() const noexcept {
  std::size_t n = 0;
  for (const auto& e : excerpts) n = std::max(n, e.size());
  return n;
}

PaddedTokens TokenFile::padded(std::size_t k, std::size_t length, std::int64_t pad_id) const {
  if (k >= excerpts.size())
    throw Error("TokenFile::padded: excerpt " + std::to_string(k) + " of " + std::to_string(excerpts.size()));
  if (excerpts[k].size() > length)
    throw ConfigError({{file, "line " + std::to_string(lines[k]) + ": excerpt " + std::to_string(k) + " has " +
                                  std::to_string(excerpts[k].size()) + " tokens, more than the length " +
                                  std::to_string(length) + " asked for"}});
  return pad_tokens(excerpts[k], length, pad_id);
}

void TokenFile::check_vocabulary(std::int64_t vocabulary) const {
  std::vector<ConfigIssue> issues;
  std::size_t more = 0;
  for (std::size_t k = 0; k < excerpts.size(); ++k)
    for (std::size_t i = 0; i < excerpts[k].size(); ++i) {
      if (excerpts[k][i] < vocabulary) continue;
      if (issues.size() == max_listed_issues) {
        ++more;
        continue;
      }
      issues.push_back({file, "line " + std::to_string(lines[k]) + ", token " + std::to_string(i + 1) + ": id " +
                                  std::to_string(excerpts[k][i]) + " is not below the vocabulary size " +
                                  std::to_string(vocabulary)});
    }
  if (more > 0) issues.push_back({file, "and " + std::to_string(more) + " more ids outside the vocabulary"});
  if (!issues.empty()) throw ConfigError(std::move(issues));
}

TokenFile read_token_file(std::istream& in, std::string file, const TokenFileLimits& limits) {
  Parser parser(std::move(file), limits);
  // getline into a buffer one longer than the limit: a longer line stops the read (failbit)
  // instead of growing a string without bound.
  std::string buffer(limits.line_bytes + 1, '\0');
  for (std::size_t number = 1;; ++number) {
    in.getline(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    const auto count = static_cast<std::size_t>(in.gcount());
    if (in.bad()) throw ConfigError({{parser.file(), "cannot be read (line " + std::to_string(number) + ")"}});
    if (in.fail()) {
      if (in.eof()) break;      // nothing left (a last line without a line break sets only eof)
      parser.too_long(number);  // the buffer is full and the line goes on
    }
    // gcount counts the line break when one was extracted (not at the end of the file); the
    // buffer holds the line without it, NUL characters included.
    parser.line(std::string_view(buffer.data(), in.eof() ? count : count - 1), number);
    if (in.eof()) break;
  }
  return parser.finish();
}

TokenFile read_token_file(const std::filesystem::path& path, const TokenFileLimits& limits) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw ConfigError({{path.string(), "no such file"}});
  if (!std::filesystem::is_regular_file(path, ec)) throw ConfigError({{path.string(), "is not a regular file"}});
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError({{path.string(), "cannot be opened"}});
  return read_token_file(in, path.string(), limits);
}

TokenFile parse_token_text(std::string_view text, std::string file, const TokenFileLimits& limits) {
  Parser parser(std::move(file), limits);
  std::size_t number = 1;
  while (!text.empty()) {
    const std::size_t end = text.find('\n');
    parser.line(text.substr(0, end), number++);
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return parser.finish();
}

}  // namespace rcsweep::checkpoint
