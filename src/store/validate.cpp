// The description check of every reader (validate.hpp). The reasons are the Python loader's
// (scripts/rcsweep_tools/load.py, check_store) word for word: change both together.
#include "store/validate.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <map>

#include "store/store_impl.hpp"

namespace rcsweep::store {
namespace {

/// Largest number of grid points and of replicates per point a sweep file may give
/// (config::parsing::max_grid).
constexpr std::int64_t max_grid = 1'000'000;

/// The object type at `path` below `file`, or H5O_TYPE_UNKNOWN when nothing is there.
H5O_type_t object_type(hid_t file, const std::string& path) {
  if (!h5::link_exists(file, path)) return H5O_TYPE_UNKNOWN;
  H5O_info_t info;
  h5::check(H5Oget_info_by_name2(file, path.c_str(), &info, H5O_INFO_BASIC, H5P_DEFAULT), "H5Oget_info " + path);
  return info.type;
}

std::string fnv1a(const std::string& text) {
  std::uint64_t h = 14695981039346656037ULL;  // as config::SweepSpec::plan_hash
  for (const char c : text) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ULL;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::int64_t as_int(const config::ParamValue& v) {
  if (const auto* d = std::get_if<double>(&v)) return static_cast<std::int64_t>(*d);
  return std::get<std::int64_t>(v);
}

double as_double(const config::ParamValue& v) {
  if (const auto* i = std::get_if<std::int64_t>(&v)) return static_cast<double>(*i);
  return std::get<double>(v);
}

std::int64_t int_in(hid_t file, const char* name, std::int64_t lo, std::int64_t hi) {
  const std::int64_t v = h5::get_attr_i64(file, name);
  if (v < lo || v > hi)
    throw StoreError("attribute '" + std::string(name) + "' = " + std::to_string(v) + " is out of range (" +
                     std::to_string(lo) + " to " + std::to_string(hi) + ")");
  return v;
}

/// 1. Root attributes: present where required, scalar, of their class and size.
struct RootAttrs {
  std::map<std::string, std::string> text;
  std::optional<std::uint64_t> seed;
  std::int64_t replicates = 0, max_depth = 0, n_points = 0, n_tasks = 0;
};

RootAttrs check_root_attrs(hid_t f) {
  struct Text {
    const char* name;
    bool required;
    std::size_t max_bytes;
  };
  static const Text texts[] = {{"plan_hash", true, max_short_text_bytes},
                               {"config", true, max_long_text_bytes},
                               {"overrides", false, max_long_text_bytes},
                               {"created", false, max_short_text_bytes},
                               {"finished", false, max_short_text_bytes},
                               {"reused", false, max_long_text_bytes},
                               {"rcsweep_version", false, max_short_text_bytes},
                               {"git_commit", false, max_short_text_bytes},
                               {"host", false, max_short_text_bytes},
                               {"blas", false, max_short_text_bytes},
                               {"hdf5_version", false, max_short_text_bytes},
                               {"sweep_name", false, max_short_text_bytes}};
  RootAttrs out;
  for (const Text& t : texts)
    if (t.required || h5::has_attr(f, t.name)) out.text[t.name] = h5::get_attr_text(f, t.name, t.max_bytes);
  constexpr std::int64_t int_max = std::numeric_limits<std::int32_t>::max();
  if (h5::has_attr(f, "seed")) out.seed = h5::get_attr_u64(f, "seed");
  out.replicates = int_in(f, "replicates", 1, max_grid);
  out.max_depth = int_in(f, "max_depth", 0, config::max_depth_layers);
  out.n_points = int_in(f, "n_points", 1, max_grid);
  out.n_tasks = int_in(f, "n_tasks", 1, max_grid * max_grid);
  int_in(f, "mpi_ranks", 1, int_max);
  int_in(f, "threads", 1, int_max);
  if (h5::has_attr(f, "blas_threads")) int_in(f, "blas_threads", 1, int_max);
  return out;
}

/// 2. The stored sweep: its hash, its parse, and the counts it gives.
config::SweepSpec check_stored_sweep(const RootAttrs& a) {
  const std::string& hash = a.text.at("plan_hash");
  const std::string& config = a.text.at("config");
  if (hash.size() != 16 || hash.find_first_not_of("0123456789abcdef") != std::string::npos)
    throw StoreError("attribute 'plan_hash' is not 16 hexadecimal digits");
  if (fnv1a(config) != hash)
    throw StoreError("attribute 'config' (the stored sweep) does not hash to plan_hash " + hash + " (it hashes to " +
                     fnv1a(config) + ")");
  const std::string invalid = "attribute 'config' (the stored sweep) is not a valid sweep file: ";
  config::SweepSpec spec;
  try {
    spec = config::parse_sweep(config, "the stored sweep");
  } catch (const ConfigError& e) {
    const ConfigIssue& first = e.issues().front();
    throw StoreError(invalid + (first.key.empty() ? "" : first.key + ": ") + first.problem);
  } catch (const Error& e) {
    throw StoreError(invalid + e.what());
  }
  const auto differs = [](const char* name, std::int64_t have, const std::string& want) {
    return StoreError("attribute '" + std::string(name) + "' = " + std::to_string(have) + ", but the stored sweep " +
                      want);
  };
  if (a.replicates != spec.replicates)
    throw differs("replicates", a.replicates, "has " + std::to_string(spec.replicates) + " replicates per point");
  const auto points = static_cast<std::int64_t>(spec.n_points());
  if (a.n_points != points) throw differs("n_points", a.n_points, "has " + std::to_string(points) + " points");
  if (a.n_tasks != points * spec.replicates)
    throw differs("n_tasks", a.n_tasks,
                  "has " + std::to_string(points * spec.replicates) + " tasks (" + std::to_string(points) +
                      " points x " + std::to_string(spec.replicates) + " replicates)");
  if (a.max_depth != spec.max_depth())
    throw differs("max_depth", a.max_depth, "has depth " + std::to_string(spec.max_depth()));
  if (a.seed && *a.seed != spec.seed)
    throw StoreError("attribute 'seed' = " + std::to_string(*a.seed) + ", but the stored sweep has seed " +
                     std::to_string(spec.seed));
  if (const auto name = a.text.find("sweep_name"); name != a.text.end() && name->second != spec.name)
    throw StoreError("attribute 'sweep_name' is not the stored sweep's name");
  return spec;
}

enum class AxisType { int64, float64, text };

/// One dataset of /axes: its values as the writer stores them (Store::Impl::write_axes).
struct Axis {
  std::string name, dim;
  AxisType type = AxisType::text;
  std::vector<config::ParamValue> values;
};

std::vector<Axis> axes_of(const config::SweepSpec& spec) {
  const auto& reg = config::model_params();
  std::vector<Axis> out;
  for (const config::Dim& dim : spec.dims)
    for (std::size_t k = 0; k < dim.params.size(); ++k) {
      Axis a{dim.params[k], dim.name, AxisType::text, dim.columns.at(k)};
      const auto idx = config::param_index(a.name);
      const bool numeric = std::none_of(a.values.begin(), a.values.end(),
                                        [](const auto& v) { return std::holds_alternative<std::string>(v); });
      const config::ParamKind kind = idx ? reg[*idx].kind : config::ParamKind::choice;
      if (kind == config::ParamKind::integer && numeric) a.type = AxisType::int64;
      if ((kind == config::ParamKind::real || kind == config::ParamKind::scale) && numeric) a.type = AxisType::float64;
      out.push_back(std::move(a));
    }
  if (!spec.depth_axis.empty())
    out.push_back({"depth", "layer", AxisType::int64, {spec.depth_axis.begin(), spec.depth_axis.end()}});
  return out;
}

void check_axis(hid_t f, const Axis& axis) {
  const std::string path = "/axes/" + axis.name;
  const H5O_type_t type = object_type(f, path);
  if (type == H5O_TYPE_UNKNOWN) throw StoreError(path + " is missing");
  if (type != H5O_TYPE_DATASET) throw StoreError(path + " is not a dataset");
  h5::Handle d = h5::open_dataset(f, path);
  const std::size_t n = axis.values.size();
  const auto dims = h5::dataset_dims(d.id());
  if (dims.size() != 1 || dims[0] != n)
    throw StoreError(path + " is " + dims_text(dims) + ", but the stored sweep has " + std::to_string(n) + " values");
  h5::Handle t(H5Dget_type(d.id()), "H5Dget_type " + path);
  bool ok = false;
  const char* what = "";
  switch (axis.type) {
    case AxisType::int64: ok = H5Tequal(t.id(), H5T_STD_I64LE) > 0, what = "an int64"; break;
    case AxisType::float64: ok = H5Tequal(t.id(), H5T_IEEE_F64LE) > 0, what = "a float64"; break;
    case AxisType::text:
      ok = H5Tget_class(t.id()) == H5T_STRING && H5Tis_variable_str(t.id()) > 0;
      what = "a variable-length string";
      break;
  }
  h5::error_text();  // clear the stack of a failed comparison
  if (!ok) throw StoreError(path + " is not " + what + " dataset");
  if (h5::get_attr_text(d.id(), "dim", max_short_text_bytes, path + " ") != axis.dim)
    throw StoreError(path + " attribute 'dim' is not '" + axis.dim + "'");
  const auto differs = [&](std::size_t i) {
    return StoreError(path + " differs from the stored sweep at value " + std::to_string(i));
  };
  if (axis.type == AxisType::int64) {
    std::vector<std::int64_t> v(n);
    if (n > 0) h5::read_all(d.id(), H5T_NATIVE_INT64, v.data());
    for (std::size_t i = 0; i < n; ++i)
      if (v[i] != as_int(axis.values[i])) throw differs(i);
  } else if (axis.type == AxisType::float64) {
    std::vector<double> v(n);
    if (n > 0) h5::read_all(d.id(), H5T_NATIVE_DOUBLE, v.data());
    for (std::size_t i = 0; i < n; ++i)
      if (!(v[i] == as_double(axis.values[i]))) throw differs(i);
  } else {
    const std::vector<std::string> v = h5::read_strings(d.id(), n);
    for (std::size_t i = 0; i < n; ++i) {
      if (!h5::is_utf8(v[i])) throw StoreError(path + " value " + std::to_string(i) + " is not valid UTF-8");
      if (v[i] != config::to_text(axis.values[i])) throw differs(i);
    }
  }
}

/// 3. /axes.
void check_axes(hid_t f, const config::SweepSpec& spec, int max_depth) {
  const H5O_type_t type = object_type(f, "/axes");
  if (type == H5O_TYPE_UNKNOWN) throw StoreError("/axes is missing");
  if (type != H5O_TYPE_GROUP) throw StoreError("/axes is not a group");
  const std::vector<Axis> axes = axes_of(spec);
  std::string order;
  for (const Axis& a : axes) order += (order.empty() ? "" : ",") + a.name;
  {
    h5::Handle g = h5::open_group(f, "/axes");
    if (h5::get_attr_text(g.id(), "order", max_short_text_bytes, "/axes ") != order)
      throw StoreError("/axes attribute 'order' does not list the stored sweep's axes (" + order + ")");
  }
  for (const Axis& a : axes) check_axis(f, a);
  Axis layer{"layer", "layer", AxisType::int64, {}};
  for (std::int64_t l = 0; l <= max_depth; ++l) layer.values.emplace_back(l);
  check_axis(f, layer);
}

/// 4. /points: its fields, shape, and every row.
void check_points(hid_t f, const config::SweepSpec& spec, std::uint64_t n_points) {
  const H5O_type_t type = object_type(f, "/points");
  if (type == H5O_TYPE_UNKNOWN) throw StoreError("/points is missing");
  if (type != H5O_TYPE_DATASET) throw StoreError("/points is not a dataset");
  h5::Handle d = h5::open_dataset(f, "/points");
  h5::Handle t(H5Dget_type(d.id()), "H5Dget_type /points");
  if (H5Tget_class(t.id()) != H5T_COMPOUND) throw StoreError("/points is not a point table (a compound dataset)");
  const auto& reg = config::model_params();
  const std::size_t n_dims = spec.dims.size();
  // The fields to compare, in a memory row of 8-byte slots (a choice: choice_bytes).
  struct Field {
    std::string name;
    std::optional<std::size_t> param;  // registry index, or the grid dimension below
    std::size_t dim = 0;
    std::size_t offset = 0;
  };
  std::vector<Field> fields;
  std::vector<bool> has_idx(n_dims, false);
  std::size_t row_bytes = 0;
  h5::Handle choice = h5::fixed_string_type(choice_bytes);
  const int members = H5Tget_nmembers(t.id());
  if (members < 0) h5::fail("H5Tget_nmembers /points");
  for (int m = 0; m < members; ++m) {
    char* raw = H5Tget_member_name(t.id(), static_cast<unsigned>(m));
    if (!raw) h5::fail("H5Tget_member_name /points");
    const std::string name(raw);
    H5free_memory(raw);
    h5::Handle mt(H5Tget_member_type(t.id(), static_cast<unsigned>(m)), "H5Tget_member_type /points");
    Field field{name, config::param_index(name), 0, row_bytes};
    bool ok = false;
    const char* what = "int64";
    if (field.param) {
      switch (reg[*field.param].kind) {
        case config::ParamKind::integer: ok = H5Tequal(mt.id(), H5T_STD_I64LE) > 0; break;
        case config::ParamKind::real:
        case config::ParamKind::scale: ok = H5Tequal(mt.id(), H5T_IEEE_F64LE) > 0, what = "float64"; break;
        case config::ParamKind::choice:
          ok = H5Tget_class(mt.id()) == H5T_STRING && H5Tis_variable_str(mt.id()) == 0 &&
               H5Tget_size(mt.id()) == choice_bytes;
          what = "a fixed 16-byte string";
          break;
      }
    } else {
      std::size_t k = 0;
      while (k < n_dims && name != "idx_" + spec.dims[k].name) ++k;
      if (k == n_dims)
        throw StoreError("/points has a field that is neither a model parameter nor idx_<dim> of a grid dimension");
      field.dim = k;
      has_idx[k] = true;
      ok = H5Tequal(mt.id(), H5T_STD_I64LE) > 0;
    }
    h5::error_text();
    if (!ok) throw StoreError("/points field '" + name + "' is not " + what);
    row_bytes += field.param && reg[*field.param].kind == config::ParamKind::choice ? choice_bytes : 8;
    fields.push_back(std::move(field));
  }
  for (std::size_t k = 0; k < n_dims; ++k)
    if (!has_idx[k]) throw StoreError("/points has no 'idx_" + spec.dims[k].name + "' field");
  const auto dims = h5::dataset_dims(d.id());
  if (dims.size() != 1 || dims[0] != n_points)
    throw StoreError("/points is " + dims_text(dims) + ", but the stored sweep has " + std::to_string(n_points) +
                     " points");

  h5::Handle mem(H5Tcreate(H5T_COMPOUND, std::max<std::size_t>(row_bytes, 1)), "H5Tcreate(points)");
  for (const Field& field : fields) {
    hid_t mt = H5T_NATIVE_INT64;
    if (field.param && reg[*field.param].kind == config::ParamKind::choice) mt = choice.id();
    if (field.param &&
        (reg[*field.param].kind == config::ParamKind::real || reg[*field.param].kind == config::ParamKind::scale))
      mt = H5T_NATIVE_DOUBLE;
    h5::check(H5Tinsert(mem.id(), field.name.c_str(), field.offset, mt), "H5Tinsert " + field.name);
  }
  // Where each parameter's value comes from (as config::SweepSpec::point): the column of the grid
  // dimension that sweeps it, else the base value; depth is max_depth.
  struct Source {
    const std::vector<config::ParamValue>* column = nullptr;
    std::size_t dim = 0;
    const config::ParamValue* value = nullptr;
  };
  const config::ParamValue depth_value{std::int64_t{spec.max_depth()}};
  std::vector<Source> source(reg.size());
  for (std::size_t i = 0; i < reg.size() && i < spec.base.size(); ++i) source[i].value = &spec.base[i];
  for (std::size_t k = 0; k < n_dims; ++k)
    for (std::size_t c = 0; c < spec.dims[k].params.size(); ++c)
      if (const auto idx = config::param_index(spec.dims[k].params[c])) source[*idx] = {&spec.dims[k].columns[c], k};
  source[*config::param_index("depth")] = {nullptr, 0, &depth_value};
  std::vector<std::size_t> index(n_dims, 0);  // row-major position of the row being checked
  const auto value_at = [&](std::size_t param) -> const config::ParamValue* {
    const Source& src = source[param];
    return src.column ? &(*src.column)[index[src.dim]] : src.value;
  };
  const std::size_t d_index = *config::param_index("d");

  h5::Handle fspace(H5Dget_space(d.id()), "H5Dget_space /points");
  std::vector<char> block(std::min<std::uint64_t>(n_points, points_block_rows) * row_bytes);
  for (std::uint64_t start = 0; start < n_points; start += points_block_rows) {
    const hsize_t count = std::min<std::uint64_t>(points_block_rows, n_points - start);
    const hsize_t at[1] = {start}, size[1] = {count};
    h5::check(H5Sselect_hyperslab(fspace.id(), H5S_SELECT_SET, at, nullptr, size, nullptr), "H5Sselect_hyperslab");
    h5::Handle mspace = h5::simple_space({count});
    h5::check(H5Dread(d.id(), mem.id(), mspace.id(), fspace.id(), H5P_DEFAULT, block.data()), "H5Dread /points");
    for (hsize_t r = 0; r < count; ++r) {
      const std::uint64_t p = start + r;
      const char* row = block.data() + r * row_bytes;
      const config::ParamValue* d_value = value_at(d_index);
      const auto* d_int = d_value ? std::get_if<std::int64_t>(d_value) : nullptr;
      for (const Field& field : fields) {
        const char* slot = row + field.offset;
        if (!field.param) {
          std::int64_t v = 0;
          std::memcpy(&v, slot, sizeof v);
          if (v < 0 || static_cast<std::uint64_t>(v) != index[field.dim])
            throw StoreError("/points row " + std::to_string(p) + " is not grid point " + std::to_string(p) + " (" +
                             field.name + ")");
          continue;
        }
        const config::ParamValue* want = value_at(*field.param);
        if (!want) continue;
        bool same = true;
        switch (reg[*field.param].kind) {
          case config::ParamKind::integer: {
            std::int64_t v = 0;
            std::memcpy(&v, slot, sizeof v);
            same = std::holds_alternative<std::string>(*want) || v == as_int(*want);
            break;
          }
          case config::ParamKind::real:
          case config::ParamKind::scale: {
            double v = 0;
            std::memcpy(&v, slot, sizeof v);
            if (const auto* s = std::get_if<std::string>(want)) {
              // "inv_sqrt_d" is stored resolved; another keyword (lambda_mlp = "lambda") is not compared.
              if (*s == "inv_sqrt_d" && d_int) same = v == 1.0 / std::sqrt(static_cast<double>(*d_int));
            } else {
              same = v == as_double(*want);
            }
            break;
          }
          case config::ParamKind::choice: {
            const std::size_t n = strnlen(slot, choice_bytes);
            const std::string* s = std::get_if<std::string>(want);
            same = s ? std::string_view(slot, n) == *s : std::string_view(slot, n) == config::to_text(*want);
            break;
          }
        }
        if (!same)
          throw StoreError("/points row " + std::to_string(p) + ": " + field.name +
                           " differs from the stored sweep's point");
      }
      for (std::size_t k = n_dims; k-- > 0;) {  // the next grid point: the last dimension fastest
        if (++index[k] < spec.dims[k].size()) break;
        index[k] = 0;
      }
    }
  }
}

}  // namespace

void check_objects(hid_t f) {
  // Links first: nothing below is opened through a link that leaves the file or points elsewhere.
  if (const auto link = h5::first_non_hard_link(f))
    throw StoreError(link->path + " is " + (link->kind == "external" ? "an " : "a ") + link->kind + " link" +
                     (link->target.empty() ? std::string() : " to " + link->target) +
                     ": every object of a store is its own, reached by hard links only");
  const haddr_t end = h5::end_of_allocation(f);
  for (const std::string& name : h5::dataset_paths(f)) {
    h5::Handle d = h5::open_dataset(f, name);
    if (const std::string where = h5::storage_outside_file(d.id()); !where.empty())
      throw StoreError(name + " keeps its values outside the store (" + where + ")");
    if (const std::string why = h5::storage_mismatch(d.id(), end); !why.empty())
      throw StoreError(name + " does not fit the file: " + why);
  }
}

StoreLayout check_description(hid_t f) {
  const RootAttrs attrs = check_root_attrs(f);
  StoreLayout out;
  out.spec = check_stored_sweep(attrs);
  out.n_tasks = static_cast<std::uint64_t>(attrs.n_tasks);
  out.n_points = static_cast<std::uint64_t>(attrs.n_points);
  out.max_depth = static_cast<int>(attrs.max_depth);
  out.replicates = static_cast<int>(attrs.replicates);
  // Attributes of the root are read through no link; every object below it only once its links
  // and storage are checked.
  check_objects(f);
  check_axes(f, out.spec, out.max_depth);
  check_points(f, out.spec, out.n_points);
  return out;
}

void check_task_ids(hid_t tasks, std::uint64_t n_tasks, int replicates) {
  struct Ids {
    std::uint64_t id, point;
    std::int32_t replicate;
  };
  h5::Handle mem(H5Tcreate(H5T_COMPOUND, sizeof(Ids)), "H5Tcreate(ids)");
  h5::check(H5Tinsert(mem.id(), "id", offsetof(Ids, id), H5T_NATIVE_UINT64), "H5Tinsert id");
  h5::check(H5Tinsert(mem.id(), "point", offsetof(Ids, point), H5T_NATIVE_UINT64), "H5Tinsert point");
  h5::check(H5Tinsert(mem.id(), "replicate", offsetof(Ids, replicate), H5T_NATIVE_INT32), "H5Tinsert replicate");
  std::vector<Ids> rows(n_tasks);
  if (n_tasks > 0) h5::read_all(tasks, mem.id(), rows.data());
  const auto r = static_cast<std::uint64_t>(replicates);
  for (std::uint64_t i = 0; i < n_tasks; ++i)
    if (rows[i].id != i || rows[i].point != i / r || rows[i].replicate < 0 ||
        static_cast<std::uint64_t>(rows[i].replicate) != i % r)
      throw StoreError("/tasks row " + std::to_string(i) + ": id, point or replicate is not task " + std::to_string(i) +
                       "'s (id = point x replicates + replicate)");
}

}  // namespace rcsweep::store
