// A parameter's values in a sweep document: one scalar against the parameter's kind, and a list of
// them (sweep_tables.hpp).
#include "config/sweep_tables.hpp"

#include <cmath>
#include <cstdint>
#include <utility>

#include "config/toml_nodes.hpp"

namespace rcsweep::config::parsing {

std::optional<ParamValue> parse_value(const toml::node& node, const ParamInfo& info, const std::string& key,
                                      Issues& issues) {
  auto fail = [&](std::string problem) -> std::optional<ParamValue> {
    issues.push_back({key, std::move(problem)});
    return std::nullopt;
  };
  switch (info.kind) {
    case ParamKind::integer: {
      if (const auto* f = node.as_floating_point()) {
        const double v = f->get();
        if (std::isfinite(v) && v == std::trunc(v) && std::fabs(v) < 1e15)
          return fail("must be an integer (write " + std::to_string(static_cast<std::int64_t>(v)) + ", not " +
                      to_toml(v) + ")");
        return fail("must be an integer, got " + to_toml(v));
      }
      const auto* i = node.as_integer();
      if (!i) return fail("must be an integer, got " + describe(node));
      const std::int64_t v = i->get();
      if (v < info.min_int) return fail("must be >= " + std::to_string(info.min_int) + ", got " + std::to_string(v));
      if (v > info.max_int)
        return fail("must be <= " + std::to_string(info.max_int) + ", got " + std::to_string(v) +
                    " (docs/CONFIG.md \"Limits\")");
      return ParamValue{v};
    }
    case ParamKind::real:
    case ParamKind::scale: {
      const bool scale = info.kind == ParamKind::scale;
      double v = 0.0;
      if (const auto* i = node.as_integer()) {
        v = static_cast<double>(i->get());
      } else if (const auto* f = node.as_floating_point()) {
        v = f->get();
      } else if (const auto* s = node.as_string(); s && scale) {
        if (s->get() == "inv_sqrt_d") return ParamValue{std::string("inv_sqrt_d")};
        return fail("must be a positive number or \"inv_sqrt_d\", got " + toml_string(s->get()));
      } else if (s && !info.choices.empty()) {  // a real that also takes keywords (lambda_mlp = "lambda")
        for (const auto c : info.choices)
          if (c == s->get()) return ParamValue{s->get()};
        return fail("must be a number or one of " + quote_list(info.choices) + ", got " + toml_string(s->get()));
      } else {
        return fail(std::string(scale ? "must be a positive number or \"inv_sqrt_d\"" : "must be a number") + ", got " +
                    describe(node));
      }
      if (!std::isfinite(v)) return fail("must be a finite number, got " + to_toml(v));
      if (info.positive && v <= 0.0) return fail("must be > 0, got " + to_toml(v));
      return ParamValue{v};
    }
    case ParamKind::choice: {
      // A switch (choices "true", "false": gated_norm) takes a TOML boolean, kept as its text.
      if (const auto* b = node.as_boolean();
          b && info.choices.size() == 2 && info.choices[0] == "true" && info.choices[1] == "false")
        return ParamValue{std::string(b->get() ? "true" : "false")};
      const auto* s = node.as_string();
      if (s) {
        for (const auto c : info.choices)
          if (c == s->get()) return ParamValue{s->get()};
        return fail("must be one of " + quote_list(info.choices) + ", got " + toml_string(s->get()));
      }
      return fail("must be one of " + quote_list(info.choices) + ", got " + describe(node));
    }
  }
  return fail("unsupported parameter kind");
}

std::optional<std::vector<ParamValue>> parse_list(ParseState& st, const toml::node& node, const ParamInfo& info,
                                                  const std::string& path, const char* where) {
  const auto* arr = node.as_array();
  if (!arr) {
    st.issue(path, std::string("must be a list (array) of values, got ") + describe(node) + where);
    return std::nullopt;
  }
  if (arr->empty()) {
    st.issue(path, "empty list: give at least one value");
    return std::nullopt;
  }
  std::vector<ParamValue> values;
  bool ok = true;
  for (std::size_t i = 0; i < arr->size(); ++i) {
    auto v = parse_value(*arr->get(i), info, path + "[" + std::to_string(i) + "]", st.issues);
    if (v)
      values.push_back(std::move(*v));
    else
      ok = false;
  }
  if (!ok) return std::nullopt;
  return values;
}

}  // namespace rcsweep::config::parsing
