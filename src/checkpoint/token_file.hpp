// A token ids file: the inputs of an encoder (docs/ENCODERS.md "Token files"). Plain text, one
// excerpt per line, its token ids as whitespace-separated non-negative decimal integers (as a
// tokenizer gives them: scripts/write_token_ids.py writes such a file from text); blank lines and
// lines whose first non-blank character is '#' are skipped; excerpts may differ in length. Reading
// refuses, with a ConfigError naming the file, the line and the column, anything else: a token that
// is not a decimal integer, a negative one, one above 2^53, a line longer than a limit, more
// excerpts than a limit, a file with no excerpt. Nothing here knows a model: the vocabulary and
// the padding id come from the caller.
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <istream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rcsweep::checkpoint {

/// Largest token id accepted: 2^53, the largest integer every float64 holds exactly above which
/// not every integer is (no vocabulary comes near it; a larger number is a mistake).
inline constexpr std::int64_t max_token_id = std::int64_t{1} << 53;

/// What a token file may hold at most.
struct TokenFileLimits {
  std::size_t line_bytes = std::size_t{1} << 20;  ///< characters of one line, its line break excluded
  std::size_t excerpts = std::size_t{1} << 20;    ///< excerpts (lines that are not blank or comments)
};

/// The excerpt of a token file padded to a length: ids then `pad_id` up to the length, and which
/// positions hold a token of the excerpt (true) rather than padding (false).
struct PaddedTokens {
  std::vector<std::int64_t> ids;
  std::vector<bool> real;
};

/// `ids` followed by `pad_id` up to `length` tokens. Throws Error when `ids` is longer than
/// `length` or `pad_id` is negative.
PaddedTokens pad_tokens(std::span<const std::int64_t> ids, std::size_t length, std::int64_t pad_id);

/// The excerpts of a token file, in file order.
struct TokenFile {
  std::string file;                                 ///< the path as given, for messages
  std::vector<std::vector<std::int64_t>> excerpts;  ///< each at least one id
  std::vector<std::size_t> lines;                   ///< 1-based line of each excerpt

  std::size_t size() const noexcept { return excerpts.size(); }
  /// Tokens of the longest excerpt (0 when there is none).
  std::size_t longest() const noexcept;
  /// Excerpt k padded to `length` with `pad_id` (pad_tokens). Throws ConfigError naming the file
  /// and the excerpt's line when it is longer than `length`; Error when k >= size().
  PaddedTokens padded(std::size_t k, std::size_t length, std::int64_t pad_id) const;
  /// Throws ConfigError naming the file, the line and the token's place on it for every id (the
  /// first 20, then a count) that is not below `vocabulary` (a model's vocab_size).
  void check_vocabulary(std::int64_t vocabulary) const;
};

/// Reads the token file at `path`. Throws ConfigError naming the file (and the line and column of
/// the first problem) when it cannot be read, or a line is longer than limits.line_bytes, holds a
/// token that is not a non-negative decimal integer (a sign, a letter, a decimal point, a '#'
/// after ids) or one above max_token_id, when there are more than limits.excerpts excerpts, or
/// none.
TokenFile read_token_file(const std::filesystem::path& path, const TokenFileLimits& limits = {});
/// The same from a stream; `file` names it in messages.
TokenFile read_token_file(std::istream& in, std::string file, const TokenFileLimits& limits = {});
/// The same from text.
TokenFile parse_token_text(std::string_view text, std::string file, const TokenFileLimits& limits = {});

}  // namespace rcsweep::checkpoint
