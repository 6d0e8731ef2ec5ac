// Runs the tasks of one bundle (same replicate, T, d) layer by layer and records MODELS.md's
// metrics at every layer; an encoder task's layer is a block of its model folder's encoder
// (models/encoder/encoder_task.hpp, docs/ENCODERS.md "In a sweep"). Pure: no MPI, and no I/O but
// the model folders' config.json and checkpoint through encoder::open_model, which the sweep's
// loading opened before any work (memoised per process).
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "metrics/metrics.hpp"
#include "models/bundle_job.hpp"
#include "models/gradients.hpp"
#include "models/layer.hpp"
#include "models/task_values.hpp"
#include "models/theory.hpp"

namespace rcsweep::models {

/// How a task ended: every layer computed (done); a non-finite value in X (diverged: the stack
/// overflows); or X exactly zero (vanished: the signal collapsed completely). Diverged and vanished
/// are outcomes of the stack, not errors: the layers before are recorded.
enum class Outcome { done, diverged, vanished };

/// What one task computed: how it ended and its values.
struct TaskOutput : TaskValues {
  std::uint64_t task = 0;
  Outcome outcome = Outcome::done;
  std::string message;   ///< why it ended early ("" when done)
  double seconds = 0.0;  ///< compute time spent on this task (its share of shared draws included)
};

/// Thrown by run_bundle when its `cancelled` callback says so: the bundle was abandoned; tasks
/// already passed to `on_done` stay reported, the others are not.
struct Cancelled : std::exception {
  const char* what() const noexcept override { return "bundle abandoned (stop requested)"; }
};

/// How many times run_bundle asks its `cancelled` callback per layer, whatever the bundle's tasks
/// and their outcomes: once before the layer, then once each time the bundle's tasks have passed
/// another 1 / (checks_per_layer - 1) of the layer's stages (layer_stages per running task: after
/// its mixer, its mixer metrics and its mixing products, an encoder's after its block, its mixer
/// metrics and its signal metrics; for one task, after each of them), the
/// rest at the end of the layer. So a caller that counts the calls sees the progress within a layer
/// (a single big task's too): a bundle makes job.max_depth * checks_per_layer calls, plus one
/// before each task's gradients when gradients are stored.
inline constexpr int checks_per_layer = 1 + layer_stages;

/// Run the job's tasks (all of one bundle: same replicate, T and d, else an Error) to job.max_depth.
/// Tasks share their random tensors. `on_done` is called once per task after the last layer.
/// Results are bitwise independent of which other tasks are in the call. `cancelled` (optional)
/// is asked checks_per_layer times per layer (before it and within it) and before every task's
/// gradients, never concurrently; when it returns true the bundle is abandoned by throwing
/// Cancelled. A task holds one T x T mixer at a time, in an allocation reused from layer to layer.
void run_bundle(const BundleJob& job, const std::function<void(TaskOutput&&)>& on_done,
                const std::function<bool()>& cancelled = {});

/// The taped forward pass of the job's task with id `task` to job.max_depth, alone
/// (models/gradients.hpp): bitwise the same X_l as run_bundle, with every weight and intermediate
/// the reverse pass needs. Throws Error when the job has no such task.
TaskTape record_task(const BundleJob& job, std::uint64_t task);

/// Task `task`'s gradient norms for the output depths `depths` by its route (JobTask::exact_gradients:
/// exact, else Hutchinson's with job.recording.grad_probes probes). Throws Error when the job has no such task.
GradientNorms task_gradients(const BundleJob& job, std::uint64_t task, const std::vector<int>& depths);

/// Convenience for tests: run a job of one task and return its output (throws Error for another size).
TaskOutput run_task(const BundleJob& job);

}  // namespace rcsweep::models
