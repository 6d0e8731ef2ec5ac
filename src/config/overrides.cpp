#include "config/overrides.hpp"

#include <algorithm>
#include <cctype>
#include <optional>
#include <utility>

#include "config/nesting.hpp"
#include "config/params.hpp"
#include "config/overrides_toml.hpp"

namespace rcsweep::config {
namespace {

constexpr std::size_t max_index_digits = 6;  // longer array indices are refused as malformed

std::string_view trim(std::string_view s) {
  const auto space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

bool bare_key_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-'; }

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (const char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

/// An override's text for a message: control characters escaped, a long one cut to its start.
std::string shown(std::string_view text) {
  constexpr std::size_t max_shown = 160;
  if (text.size() <= max_shown) return printable(text);
  return printable(text.substr(0, max_shown)) + "... (" + std::to_string(text.size()) + " characters)";
}

/// The ConfigError of a malformed override.
ConfigError malformed(const std::string& key, std::string_view text, const std::string& problem) {
  return ConfigError({{key, "command-line override '" + shown(text) + "': " + problem}});
}

std::size_t parse_index(std::string_view digits, std::string_view text) {
  if (digits.size() > max_index_digits) throw malformed("", text, "index " + std::string(digits) + " is too large");
  return std::stoul(std::string(digits));
}

/// KEY of KEY=VALUE: parts separated by '.', each a bare TOML key (letters, digits, '_', '-')
/// followed by any number of [i], or a number alone (an index: zip.0.T is zip[0].T).
std::vector<PathStep> parse_path(std::string_view key, std::string_view text) {
  if (key.empty()) throw malformed("", text, "empty key before '=' (write KEY=VALUE, e.g. model.T=256)");
  if (key.front() == '+' || key.front() == '~')
    throw malformed("", text,
                    "the '+', '++' and '~' prefixes are not supported: any key is set as KEY=VALUE, and a "
                    "parameter goes back to its default when set to it");
  const auto not_a_key = [&](std::string_view part) {
    return malformed("", text,
                     "'" + std::string(part) + "' in the key '" + std::string(key) +
                         "' is not a key (letters, digits, '_' and '-', then any [index])");
  };
  std::vector<PathStep> path;
  std::size_t at = 0;
  while (true) {
    const std::size_t dot = std::min(key.find('.', at), key.size());
    const std::string_view part = key.substr(at, dot - at);
    if (part.empty()) throw malformed("", text, "empty part in the key '" + std::string(key) + "'");
    if (all_digits(part)) {
      if (path.empty()) throw malformed("", text, "the key '" + std::string(key) + "' starts with an index");
      path.emplace_back(parse_index(part, text));
    } else {
      std::size_t i = 0;
      while (i < part.size() && bare_key_char(part[i])) ++i;
      if (i == 0) throw not_a_key(part);
      path.emplace_back(std::string(part.substr(0, i)));
      while (i < part.size()) {  // [i][j]...
        const std::size_t close = part.find(']', i);
        if (part[i] != '[' || close == std::string_view::npos || !all_digits(part.substr(i + 1, close - i - 1)))
          throw not_a_key(part);
        path.emplace_back(parse_index(part.substr(i + 1, close - i - 1), text));
        i = close + 1;
      }
    }
    if (path.size() > static_cast<std::size_t>(max_nesting))
      throw malformed("", text, "the key has more than " + std::to_string(max_nesting) + " parts (tables and indices)");
    if (dot == key.size()) break;
    at = dot + 1;
  }
  return path;
}

/// Whether `text` is one TOML value (the right-hand side of `v = text`); else the parser's reason.
bool is_toml_value(std::string_view text, std::string* reason = nullptr) {
  try {
    const toml::table doc = toml::parse("v = " + std::string(text));
    if (doc.size() == 1 && doc.contains("v")) return true;
    if (reason) *reason = "more than one value";
  } catch (const toml::parse_error& err) {
    if (reason) *reason = std::string(err.description());
  }
  return false;
}

/// A string written without quotes, as Hydra takes it: no quotes, brackets, braces, commas, '=',
/// '#', backslashes or control characters (so it needs no escaping inside "...").
bool is_bare_word(std::string_view text) {
  if (text.empty()) return false;
  for (const char c : text)
    if (std::string_view("[]{}\"',=#\\").find(c) != std::string_view::npos ||
        std::iscntrl(static_cast<unsigned char>(c)))
      return false;
  return true;
}

/// A list whose elements may be bare words, as TOML text: "[none, perp]" -> "[\"none\", \"perp\"]".
/// Nested lists are read the same way; quoted strings are kept as written. nullopt when it is not
/// such a list.
class ListReader {
 public:
  explicit ListReader(std::string_view s) : s_(s) {}

  std::optional<std::string> read() {
    auto list = read_list(1);
    skip_space();
    if (!list || at_ != s_.size()) return std::nullopt;
    return list;
  }

 private:
  void skip_space() {
    while (at_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[at_]))) ++at_;
  }

  /// The list at at_, `depth` levels deep (more than max_nesting: not read).
  std::optional<std::string> read_list(int depth) {
    if (at_ >= s_.size() || s_[at_] != '[' || depth > max_nesting) return std::nullopt;
    ++at_;
    std::string out = "[";
    skip_space();
    if (at_ < s_.size() && s_[at_] == ']') {
      ++at_;
      return out + "]";
    }
    while (true) {
      auto item = read_item(depth);
      if (!item) return std::nullopt;
      out += (out.size() > 1 ? ", " : "") + *item;
      skip_space();
      if (at_ >= s_.size()) return std::nullopt;
      if (s_[at_] == ']') {
        ++at_;
        return out + "]";
      }
      if (s_[at_] != ',') return std::nullopt;
      ++at_;
      skip_space();
      if (at_ < s_.size() && s_[at_] == ']') {  // a trailing comma, as TOML allows
        ++at_;
        return out + "]";
      }
    }
  }

  std::optional<std::string> read_item(int depth) {
    skip_space();
    if (at_ >= s_.size()) return std::nullopt;
    if (s_[at_] == '[') return read_list(depth + 1);
    if (s_[at_] == '"' || s_[at_] == '\'') {  // a quoted string, as written
      const char quote = s_[at_];
      std::size_t end = at_ + 1;
      while (end < s_.size() && s_[end] != quote) end += (quote == '"' && s_[end] == '\\') ? 2 : 1;
      if (end >= s_.size()) return std::nullopt;
      const std::string_view literal = s_.substr(at_, end + 1 - at_);
      at_ = end + 1;
      return std::string(literal);
    }
    std::size_t end = at_;
    while (end < s_.size() && s_[end] != ',' && s_[end] != ']') ++end;
    const std::string_view token = trim(s_.substr(at_, end - at_));
    at_ = end;
    if (token.empty() || token.front() == '{') return std::nullopt;
    if (is_toml_value(token)) return std::string(token);
    if (is_bare_word(token)) return "\"" + std::string(token) + "\"";
    return std::nullopt;
  }

  std::string_view s_;
  std::size_t at_ = 0;
};

/// VALUE of KEY=VALUE as TOML text: TOML as given, else a bare word (or a list with bare words)
/// quoted; an empty value is the empty string, as in Hydra.
std::string value_toml(std::string_view value, const std::string& key, std::string_view text, std::size_t depth) {
  value = trim(value);
  if (value.empty()) return "\"\"";
  // Before any parsing (toml++ and ListReader recurse once per level): the key's parts and the
  // value's arrays, inline tables and their dotted keys together.
  if (const auto pos = too_deep("v = " + std::string(value), static_cast<int>(depth) - 1))
    throw malformed(key, text,
                    "the value nests deeper than " + std::to_string(max_nesting) +
                        " levels (with the key's parts) at character " + std::to_string(pos->column - 4) +
                        ": arrays, inline tables and dotted keys");
  std::string reason;
  if (is_toml_value(value, &reason)) return std::string(value);
  if (value.front() == '[')
    if (auto list = ListReader(value).read(); list && is_toml_value(*list)) return *list;
  if (is_bare_word(value)) return "\"" + std::string(value) + "\"";
  throw malformed(key, text,
                  "the value is not TOML (" + reason +
                      ") nor a bare word (a string without quotes, brackets, braces, commas, '=', '#' or '\\')");
}

/// The value node of an override (its value text is valid TOML: parse_override checked it).
toml::table value_document(const Override& o) { return toml::parse("v = " + o.value); }

std::string node_kind(const toml::node& node) {
  if (node.is_table()) return "a table";
  if (node.is_array()) return "a list";
  if (node.is_string()) return "a string";
  if (node.is_integer()) return "an integer";
  if (node.is_floating_point()) return "a float";
  if (node.is_boolean()) return "a boolean";
  return "a date/time";
}

/// Where a key the file does not have goes: after every key of the file (whose lines are far
/// smaller), in the order of the overrides.
toml::source_region appended(std::size_t n) {
  toml::source_region region;
  region.begin.line = static_cast<toml::source_index>((1u << 30) + n);
  region.begin.column = 1;
  region.end = region.begin;
  return region;
}

/// Why `path`[index] does not exist: `path` is a list of `size` elements (0: not in the file).
std::string no_element(const std::vector<PathStep>& path, std::size_t size, std::size_t index) {
  const std::string key = key_text(path);
  if (key == "zip")
    return "the sweep file has " +
           (size == 0
                ? std::string("no [[zip]] table")
                : std::to_string(size) + " [[zip]] table(s), zip[0].." + "zip[" + std::to_string(size - 1) + "]") +
           ": an override changes a [[zip]] table, it does not add one";
  return "'" + key + "' " +
         (size == 0 ? std::string("is not in the sweep file")
                    : "has " + std::to_string(size) + " element(s), [0].." + "[" + std::to_string(size - 1) + "]") +
         ", so it has no [" + std::to_string(index) + "]";
}

/// Set one override in `root`; throws ConfigError (malformed) when its path cannot be set.
void apply_one(toml::table& root, const Override& o, std::size_t n) {
  toml::table doc = value_document(o);
  toml::node* at = &root;      // the node the next step goes into
  std::vector<PathStep> done;  // the steps to `at`
  for (std::size_t s = 0; s < o.path.size(); ++s) {
    const PathStep& step = o.path[s];
    const bool last = s + 1 == o.path.size();
    const std::string where = "'" + key_text(done) + "'";  // `at`, for messages (never the root)
    if (const auto* name = std::get_if<std::string>(&step)) {
      auto* table = at->as_table();
      if (!table) {
        const bool tables = at->is_array() && at->as_array()->is_array_of_tables();
        throw malformed(o.key, o.text,
                        where + " is " + node_kind(*at) +
                            (tables ? ", not a table: give the index of one, e.g. " + key_text(done) + "[0]." + *name
                                    : ", not a table, so it has no key '" + *name + "'"));
      }
      done.push_back(step);
      if (last) {
        table->insert_or_assign(toml::key(*name, appended(n)), doc["v"]);
      } else if (!table->contains(*name)) {
        if (const auto* next = std::get_if<std::size_t>(&o.path[s + 1]))  // nothing to index into
          throw malformed(o.key, o.text, no_element(done, 0, *next));
        table->insert_or_assign(toml::key(*name, appended(n)), toml::table{});
      }
      if (!last) at = table->get(*name);
    } else {
      const std::size_t index = std::get<std::size_t>(step);
      auto* array = at->as_array();
      if (!array)
        throw malformed(o.key, o.text,
                        where + " is " + node_kind(*at) + ", not a list: it has no [" + std::to_string(index) + "]");
      if (index >= array->size()) throw malformed(o.key, o.text, no_element(done, array->size(), index));
      done.push_back(step);
      if (last)
        array->replace(array->cbegin() + static_cast<std::ptrdiff_t>(index), doc["v"]);
      else
        at = array->get(index);
    }
  }
  // model.P and axes.P replace P wherever the file gives it under [model] or [axes].
  if (o.path.size() == 2 && std::holds_alternative<std::string>(o.path[0])) {
    const std::string& table = std::get<std::string>(o.path[0]);
    if (table == "model" || table == "axes")
      if (auto* other = root[table == "model" ? "axes" : "model"].as_table())
        other->erase(std::get<std::string>(o.path[1]));
  }
}

}  // namespace

std::string key_text(const std::vector<PathStep>& path) {
  std::string out;
  for (const auto& step : path) {
    if (const auto* name = std::get_if<std::string>(&step))
      out += (out.empty() ? "" : ".") + *name;
    else
      out += "[" + std::to_string(std::get<std::size_t>(step)) + "]";
  }
  return out;
}

Override parse_override(std::string_view text) {
  const std::size_t eq = text.find('=');
  if (eq == std::string_view::npos)
    throw malformed("", text, "no '=': an override is KEY=VALUE, e.g. model.T=256 or axes.lambda=[0,0.5,1]");
  if (text.find_first_of("\n\r") != std::string_view::npos)
    throw malformed("", text, "it holds a line break: write it on one line");
  Override o;
  o.text = std::string(text);
  o.path = parse_path(trim(text.substr(0, eq)), text);
  o.key = key_text(o.path);
  o.value = value_toml(text.substr(eq + 1), o.key, text, o.path.size());
  return o;
}

std::vector<Override> parse_overrides(const std::vector<std::string>& texts) {
  std::vector<Override> out;
  std::vector<ConfigIssue> issues;
  for (const auto& text : texts) {
    try {
      out.push_back(parse_override(text));
    } catch (const ConfigError& e) {
      issues.insert(issues.end(), e.issues().begin(), e.issues().end());
    }
  }
  if (!issues.empty()) throw ConfigError(std::move(issues));
  return out;
}

void apply_overrides(toml::table& root, const std::vector<Override>& overrides) {
  std::vector<ConfigIssue> issues;
  for (std::size_t n = 0; n < overrides.size(); ++n) {
    try {
      apply_one(root, overrides[n], n);
    } catch (const ConfigError& e) {
      issues.insert(issues.end(), e.issues().begin(), e.issues().end());
    }
  }
  if (!issues.empty()) throw ConfigError(std::move(issues));
}

namespace {
/// Whether `key` is `place.param` for a place a parameter can be given: model, axes or zip[k].
bool is_param_key(const std::string& key, const std::string& param) {
  if (key.size() <= param.size() + 1 || !key.ends_with("." + param)) return false;
  const std::string place = key.substr(0, key.size() - param.size() - 1);
  return place == "model" || place == "axes" ||
         (place.starts_with("zip[") && place.ends_with("]") && all_digits(place.substr(4, place.size() - 5)));
}
}  // namespace

void mark_overridden(std::vector<ConfigIssue>& issues, const std::vector<Override>& overrides) {
  for (auto& issue : issues) {
    // the key an override set, or an element or key below it
    const auto set = std::find_if(overrides.rbegin(), overrides.rend(), [&](const Override& o) {
      const std::string& k = o.key;
      return issue.key == k || (issue.key.size() > k.size() && issue.key.starts_with(k) &&
                                (issue.key[k.size()] == '.' || issue.key[k.size()] == '['));
    });
    if (set != overrides.rend()) {
      issue.problem += " (set on the command line by '" + shown(set->text) + "')";
      continue;
    }
    // the same parameter in another place (given in both [model] and a [[zip]] table)
    const auto same = std::find_if(overrides.rbegin(), overrides.rend(), [&](const Override& o) {
      const auto* param = o.path.size() == 2 ? std::get_if<std::string>(&o.path[1]) : nullptr;
      return param && is_param_key(o.key, *param) && is_param_key(issue.key, *param);
    });
    if (same != overrides.rend())
      issue.problem += " ('" + same->key + "' is set on the command line by '" + shown(same->text) + "')";
  }
}

std::string overrides_line(const std::vector<std::string>& texts) {
  std::string out;
  for (const auto& t : texts) {
    if (!out.empty()) out += ' ';
    if (t.find_first_of(" \t\n'\"") == std::string::npos) {
      out += t;
      continue;
    }
    out += '\'';
    for (const char c : t) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    out += '\'';
  }
  return out;
}

}  // namespace rcsweep::config
