#include "store/platforms.hpp"

#include <algorithm>
#include <limits>
#include <string>

#include "base/error.hpp"

namespace rcsweep::store::detail {
namespace {

constexpr const char* group_name = "provenance";

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> out;
  if (text.empty()) return out;
  for (std::size_t pos = 0;;) {
    const std::size_t nl = text.find('\n', pos);
    out.push_back(text.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos));
    if (nl == std::string::npos) return out;
    pos = nl + 1;
  }
}

std::string join_lines(const std::vector<Platform>& table, std::string Platform::*field) {
  std::string out;
  for (std::size_t i = 0; i < table.size(); ++i) out += (i ? "\n" : "") + table[i].*field;
  return out;
}

// One line each: a newline inside a name would shift every later entry.
std::string one_line(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s;
}

}  // namespace

PlatformColumn PlatformColumn::create(hid_t file, std::uint64_t n_tasks) {
  PlatformColumn c;
  c.n_tasks_ = n_tasks;
  c.group_ = h5::create_group(file, group_name);
  h5::set_attr(c.group_.id(), "description",
               "which platform computed each task: platform[t] indexes the lines of the attributes blas_kernels, "
               "cpus and hosts (-1: not recorded). Results are bitwise reproducible on one BLAS kernel; across kernels "
               "they agree to rounding (docs/GUARANTEES.md)");
  c.save_table();
  const std::int16_t none = -1;
  h5::DatasetOptions opt;
  opt.chunk = {std::max<hsize_t>(1, std::min<hsize_t>(n_tasks, 65536))};
  opt.fill = &none;
  opt.fill_type = H5T_NATIVE_INT16;
  c.column_ = h5::create_dataset(c.group_.id(), "platform", H5T_STD_I16LE, {n_tasks}, opt);
  h5::set_attr(c.column_.id(), "description",
               "per task: the line of blas_kernels, cpus and hosts (attributes of /provenance) that computed it; -1 "
               "while pending or when not recorded");
  return c;
}

PlatformColumn PlatformColumn::open(hid_t file, std::uint64_t n_tasks) {
  PlatformColumn c;
  c.n_tasks_ = n_tasks;
  if (!h5::link_exists(file, group_name) || !h5::link_exists(file, std::string(group_name) + "/platform")) return c;
  c.group_ = h5::open_group(file, group_name);
  c.column_ = h5::open_dataset(c.group_.id(), "platform");
  if (h5::dataset_dims(c.column_.id()) != std::vector<hsize_t>{n_tasks})
    throw StoreError("/provenance/platform does not have one entry per task");
  auto kernels = split_lines(h5::get_attr_string(c.group_.id(), "blas_kernels"));
  auto cpus = split_lines(h5::get_attr_string(c.group_.id(), "cpus"));
  // hosts: absent in stores written before hosts were recorded
  auto hosts = h5::has_attr(c.group_.id(), "hosts") ? split_lines(h5::get_attr_string(c.group_.id(), "hosts"))
                                                    : std::vector<std::string>{};
  // A table of one platform with a field empty writes that attribute as "": one empty line, not none.
  if (std::max({kernels.size(), cpus.size(), hosts.size()}) == 1)
    for (auto* lines : {&kernels, &cpus, &hosts}) lines->resize(1);
  if (kernels.size() != cpus.size())
    throw StoreError("/provenance: blas_kernels and cpus list different numbers of platforms");
  if (hosts.empty()) hosts.resize(kernels.size());
  if (hosts.size() != kernels.size())
    throw StoreError("/provenance: blas_kernels and hosts list different numbers of platforms");
  for (std::size_t i = 0; i < kernels.size(); ++i) c.table_.push_back({kernels[i], cpus[i], hosts[i]});
  return c;
}

void PlatformColumn::save_table() const {
  h5::set_attr(group_.id(), "blas_kernels", join_lines(table_, &Platform::blas_kernel));
  h5::set_attr(group_.id(), "cpus", join_lines(table_, &Platform::cpu));
  h5::set_attr(group_.id(), "hosts", join_lines(table_, &Platform::host));
}

void PlatformColumn::write(const std::vector<h5::RowRun>& runs, const std::vector<const Platform*>& platforms) {
  if (!column_) return;
  std::vector<std::int16_t> index;
  index.reserve(platforms.size());
  bool grown = false;
  for (const Platform* p : platforms) {
    if (p->empty()) {
      index.push_back(-1);
      continue;
    }
    const Platform clean{one_line(p->blas_kernel), one_line(p->cpu), one_line(p->host)};
    auto it = std::find(table_.begin(), table_.end(), clean);
    if (it == table_.end()) {
      if (table_.size() >= static_cast<std::size_t>(std::numeric_limits<std::int16_t>::max()))
        throw StoreError("/provenance: more than 32767 platforms");
      table_.push_back(clean);
      it = table_.end() - 1;
      grown = true;
    }
    index.push_back(static_cast<std::int16_t>(it - table_.begin()));
  }
  if (grown) save_table();
  h5::write_rows(column_.id(), H5T_NATIVE_INT16, runs, index.data());
}

std::vector<std::int16_t> PlatformColumn::read_indices() const {
  std::vector<std::int16_t> index(n_tasks_, -1);
  if (column_ && n_tasks_ > 0) h5::read_all(column_.id(), H5T_NATIVE_INT16, index.data());
  return index;
}

std::vector<Platform> PlatformColumn::read_all() const {
  std::vector<Platform> out(n_tasks_);
  const auto index = read_indices();
  for (std::size_t t = 0; t < index.size(); ++t)
    if (index[t] >= 0 && static_cast<std::size_t>(index[t]) < table_.size())
      out[t] = table_[static_cast<std::size_t>(index[t])];
  return out;
}

std::vector<std::pair<Platform, std::uint64_t>> PlatformColumn::count(const std::vector<bool>& counted) const {
  const auto index = read_indices();
  std::vector<std::uint64_t> n(table_.size() + 1, 0);  // last: not recorded
  for (std::size_t t = 0; t < index.size() && t < counted.size(); ++t) {
    if (!counted[t]) continue;
    const bool known = index[t] >= 0 && static_cast<std::size_t>(index[t]) < table_.size();
    ++n[known ? static_cast<std::size_t>(index[t]) : table_.size()];
  }
  std::vector<std::pair<Platform, std::uint64_t>> out;
  for (std::size_t i = 0; i < table_.size(); ++i)
    if (n[i] > 0) out.emplace_back(table_[i], n[i]);
  if (n.back() > 0) out.emplace_back(Platform{}, n.back());
  return out;
}

}  // namespace rcsweep::store::detail
