#include "store/dump.hpp"

#include <string>
#include <utility>

#include "base/error.hpp"
#include "config/params.hpp"
#include "models/mixers/mixer_kind.hpp"
#include "models/task_runner.hpp"
#include "plan/bundle_job.hpp"
#include "store/hdf5.hpp"
#include "store/task_status.hpp"
#include "store/writer_lock.hpp"

namespace rcsweep::store {
namespace {

// HDF5 bookkeeping per group or dataset (object header, link, one attribute): a rough allowance.
constexpr std::uint64_t object_overhead_bytes = 1024;

// The tape matrices a layer of `model` dumps, by their dumped name and shape (rows, cols) — the
// same list write_layer writes, so the estimate is exact in the values.
std::vector<std::pair<std::uint64_t, std::uint64_t>> layer_shapes(const config::ModelParams& m) {
  const std::uint64_t T = static_cast<std::uint64_t>(m.T), d = static_cast<std::uint64_t>(m.d);
  std::vector<std::pair<std::uint64_t, std::uint64_t>> shapes;
  const models::MixerKind& kind = models::mixer_kind(m.mixer);
  const models::MixerDump own = kind.dump(m);  // the mixer's own weights (models/mixers/)
  const int heads = kind.per_channel ? 1 : m.heads;
  for (int h = 0; h < heads; ++h) {
    if (!kind.per_channel) shapes.emplace_back(T, T);                                                   // M
    if (m.gap_fix == config::GapFix::outliers && m.input_dependent_mixer()) shapes.emplace_back(T, T);  // M_raw
    shapes.emplace_back(d, d);                                                                          // W_V
    shapes.insert(shapes.end(), own.per_head.begin(), own.per_head.end());
  }
  shapes.insert(shapes.end(), own.per_layer.begin(), own.per_layer.end());
  if (m.gate == config::Gate::silu) shapes.emplace_back(d, d);
  if (m.mlp == config::Mlp::relu) {
    const std::uint64_t hidden = static_cast<std::uint64_t>(m.mlp_ratio) * d;
    shapes.emplace_back(d, hidden);
    shapes.emplace_back(hidden, d);
  }
  return shapes;
}

h5::Handle write_matrix(hid_t group, const std::string& name, const Matrix& A) {
  h5::Handle dset = h5::create_dataset(group, name, H5T_IEEE_F64LE, {A.rows(), A.cols()});
  h5::write_all(dset.id(), H5T_NATIVE_DOUBLE, A.data());
  return dset;
}

// Writes A as `name` when it holds values; returns the bytes written.
std::uint64_t write_if_set(hid_t group, const std::string& name, const Matrix& A) {
  if (A.empty()) return 0;
  write_matrix(group, name, A);
  return 8 * static_cast<std::uint64_t>(A.size());
}

std::uint64_t write_layer(hid_t task_group, int layer, const models::LayerTape& tape) {
  const h5::Handle g = h5::create_group(task_group, "layer_" + std::to_string(layer));
  std::uint64_t bytes = 0;
  for (std::size_t h = 0; h < tape.heads.size(); ++h) {
    const auto& ht = tape.heads[h];
    const std::string k = "_h" + std::to_string(h);
    bytes += write_if_set(g.id(), "M" + k, ht.M);
    bytes += write_if_set(g.id(), "M_raw" + k, ht.M_raw);
    bytes += write_if_set(g.id(), "W_V" + k, ht.W_V);
    bytes += write_if_set(g.id(), "W_Q" + k, ht.W_Q);
    bytes += write_if_set(g.id(), "W_K" + k, ht.W_K);
    bytes += write_if_set(g.id(), "W_B" + k, ht.W_B);
    bytes += write_if_set(g.id(), "W_C" + k, ht.W_C);
  }
  bytes += write_if_set(g.id(), "s4d_K", tape.s4d_K);
  bytes += write_if_set(g.id(), "W_G", tape.W_G);
  bytes += write_if_set(g.id(), "W_1", tape.W_1);
  bytes += write_if_set(g.id(), "W_2", tape.W_2);
  return bytes;
}

std::uint64_t write_signal(hid_t task_group, int layer, const Matrix& X, long log2_scale) {
  const h5::Handle dset = write_matrix(task_group, "X_" + std::to_string(layer), X);
  h5::set_attr_i64(dset.id(), "log2_scale", log2_scale);
  return 8 * static_cast<std::uint64_t>(X.size());
}

}  // namespace

std::uint64_t dump_bytes(const plan::Plan& plan, const std::vector<std::uint64_t>& tasks) {
  const auto L = static_cast<std::uint64_t>(plan.max_depth);
  std::uint64_t total = object_overhead_bytes;  // the /dump group
  for (const auto id : tasks) {
    const auto& m = plan.models.at(plan.tasks.at(id).point);
    const auto shapes = layer_shapes(m);
    std::uint64_t values = (L + 1) * static_cast<std::uint64_t>(m.T) * static_cast<std::uint64_t>(m.d);
    for (const auto& [r, c] : shapes) values += L * r * c;
    const std::uint64_t objects = 1 + (L + 1) + L * (1 + shapes.size());
    total += 8 * values + object_overhead_bytes * objects;
  }
  return total;
}

DumpSummary write_dump(const std::filesystem::path& path, const plan::Plan& plan,
                       const std::vector<std::uint64_t>& tasks) {
  h5::init();
  const WriterLock lock = WriterLock::acquire(path);  // the store's one writer while the dump is written
  const h5::Handle file = h5::open_file(lock.path(), true);
  const auto status = read_status_column(h5::open_dataset(file.id(), "/tasks").id(), plan.tasks.size());
  if (h5::link_exists(file.id(), "/dump"))
    h5::check(H5Ldelete(file.id(), "/dump", H5P_DEFAULT), "cannot replace the existing /dump");
  const h5::Handle dump = h5::create_group(file.id(), "/dump");
  h5::set_attr(dump.id(), "description",
               "rcsweep run --dump-weights: per done task, X_0..X_L as carried (true X_l = X_l * "
               "2^log2_scale) and every layer's weights as used (docs/SCHEMA.md)");

  DumpSummary summary;
  for (const auto id : tasks) {
    if (status.at(id) != TaskStatus::done) {
      ++summary.skipped;
      continue;
    }
    const auto& task = plan.tasks.at(id);
    const models::TaskTape tape = models::record_task(plan::bundle_job(plan, {id}), id);
    if (!tape.finite || tape.layers.size() != static_cast<std::size_t>(plan.max_depth))
      throw Error("--dump-weights: task " + std::to_string(id) +
                  " is done in the store but its recorded forward pass is not finite");
    const h5::Handle g = h5::create_group(dump.id(), "task_" + std::to_string(id));
    h5::set_attr_u64(g.id(), "task", id);
    h5::set_attr_u64(g.id(), "point", task.point);
    h5::set_attr_i32(g.id(), "replicate", task.replicate);
    h5::set_attr_i32(g.id(), "layers", plan.max_depth);
    const int L = plan.max_depth;
    for (int l = 0; l < L; ++l) {
      const auto& t = tape.layers[static_cast<std::size_t>(l)];
      summary.bytes += write_signal(g.id(), l, t.X, t.log2_scale);
    }
    summary.bytes += write_signal(g.id(), L, tape.X_out, tape.X_out_log2);  // X_L (X_0 when L = 0)
    for (int l = 1; l <= L; ++l) summary.bytes += write_layer(g.id(), l, tape.layers[static_cast<std::size_t>(l - 1)]);
    ++summary.written;
  }
  h5::set_attr_u64(dump.id(), "tasks", summary.written);
  h5::fsync_file(file.id());
  return summary;
}

}  // namespace rcsweep::store
