#include "cli/run_events.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <type_traits>

#include "base/units.hpp"
#include "cli/json.hpp"
#include "sweep/stop.hpp"

namespace rcsweep::cli {
namespace {

using ull = unsigned long long;

template <typename... Args>
std::string format(const char* fmt, Args... args) {
  const int n = std::snprintf(nullptr, 0, fmt, args...);
  std::string out(static_cast<std::size_t>(n) + 1, '\0');
  std::snprintf(out.data(), out.size(), fmt, args...);
  out.pop_back();
  return out;
}

/// Elapsed and left times of the progress line: "42s", "12m05s", "2.5h" ("?" when unknown).
std::string short_duration(double s) {
  if (s < 0 || s != s) return "?";
  if (s < 90) return format("%.0fs", s);
  if (s < 5400) {
    const long total = static_cast<long>(s);
    return format("%ldm%02lds", total / 60, total % 60);
  }
  return format("%.1fh", s / 3600);
}

/// Why a run stopped early ("" when it did not).
std::string stop_reason(const sweep::RunSummary& s) {
  if (s.exit_code() != 4) return "";
  if (s.lost_rank > 0) return "stopped because rank " + std::to_string(s.lost_rank) + " was lost";
  if (s.launcher_gone) return "stopped because " + sweep::launcher_name() + " is gone";
  if (s.stop_signal)
    return "stopped by " + sweep::signal_name(s.stop_signal) +
           (sweep::launcher_teardown() ? " from " + sweep::launcher_name() : std::string());
  return "time limit of " + human_seconds(s.time_limit_s) + " reached";
}

/// What rank 0 says at the end of a run: this run's outcomes and the store's (not with --quiet),
/// then, after an early stop, why and how to go on (always: the user must know).
std::string finished_text(const sweep::event::Finished& f, bool quiet) {
  const auto& s = f.summary;
  std::string out;
  if (!quiet) {
    out += format("[rcsweep] %s after %s: %llu done, %llu diverged, %llu vanished, %llu failed this run",
                  s.exit_code() == 4 ? "stopped" : "finished", human_seconds(s.wall_s).c_str(), ull{s.done},
                  ull{s.diverged}, ull{s.vanished}, ull{s.failed});
    if (s.not_needed) out += format(", %llu replicates not needed", ull{s.not_needed});
    if (s.skipped) out += format(" (%llu were already finished)", ull{s.skipped});
    out += "; store " + f.store + "\n";
    if (s.ended_first_layer >= 0)
      out += format("[rcsweep] this run's diverged and vanished tasks ended at layers %d to %d\n", s.ended_first_layer,
                    s.ended_last_layer);
    if (s.store_diverged + s.store_vanished > 0)
      out += format("[rcsweep] the store holds %llu diverged (X non-finite) and %llu vanished (X exactly zero) tasks: "
                    "outcomes of the stack, recorded with the layers before (/tasks/message)%s\n",
                    ull{s.store_diverged}, ull{s.store_vanished},
                    s.fail_on_diverged ? "; --fail-on-diverged: exit code 3" : "");
    if (s.store_failed > 0)
      out += format("[rcsweep] the store holds %llu failed tasks (errors, see /tasks/message; --retry-failed runs them "
                    "again)\n",
                    ull{s.store_failed});
  }
  if (s.exit_code() == 4)
    out += format("[rcsweep] %s: %llu tasks left, every finished task is in %s; resume with the same command\n",
                  stop_reason(s).c_str(), ull{s.store_pending}, f.store.c_str());
  return out;
}

std::string started_text(const sweep::event::Started& s) {
  const std::string threads = s.threads > 1 ? " x " + std::to_string(s.threads) + " threads" : std::string();
  const std::string more = s.possible_tasks > 0 ? " (+ up to " + std::to_string(s.possible_tasks) +
                                                      " replicates as the targets need them)"
                                                : std::string();
  std::string out = format(
      "[rcsweep] %s %s: %llu tasks%s in %llu bundles to run on %d rank%s%s (%llu already finished)\n",
      s.resumed ? "resuming" : "writing", s.store.c_str(), ull{s.tasks}, more.c_str(), ull{s.bundles}, s.ranks,
      s.ranks == 1 ? "" : "s", threads.c_str(), ull{s.already_finished});
  if (!s.schedule.empty()) out += format("[rcsweep] ranks %d: %s\n", s.ranks, s.schedule.c_str());
  return out;
}

std::string progress_text(const sweep::event::Progress& p, bool tty) {
  return format("%s[rcsweep] %llu/%llu tasks, %5.1f%% of work, elapsed %s, ETA %s%s%s", tty ? "\r" : "",
                ull{p.tasks_done}, ull{p.tasks_total}, 100.0 * p.fraction, short_duration(p.elapsed_s).c_str(),
                p.eta_is_bound ? "at most " : "", short_duration(p.eta_s).c_str(), tty && !p.last ? "   " : "\n");
}

std::string stopping_text(const sweep::event::Stopping& s) {
  if (!s.launcher.empty())
    return format(
        "[rcsweep] %s from %s, which kills the job next: no new tasks; running bundles that finish within %.0f s "
        "are kept, the rest are abandoned\n",
        s.signal.c_str(), s.launcher.c_str(), s.grace_s);
  return format(
      "[rcsweep] %s: no new tasks; running bundles that finish within %.0f s are kept, the rest are abandoned "
      "(%s stops at once)\n",
      s.signal.c_str(), s.grace_s, s.stops_at_once.c_str());
}

std::string kernels_text(const sweep::event::KernelsDiffer& k) {
  std::string out;
  if (k.ranks_differ) out += "[rcsweep] note: the ranks of this run use different BLAS kernels (" + k.this_run + ")\n";
  if (k.new_kernel)
    out += "[rcsweep] note: this run computes with " + k.this_run + "; the store's finished tasks were computed with " +
           k.stored + "\n";
  return out +
         "[rcsweep] results of different BLAS kernels agree to rounding, not bitwise (docs/GUARANTEES.md); rcsweep "
         "info counts the tasks of each\n";
}

std::string reused_text(const sweep::event::Reused& r) {
  std::string out = format("[rcsweep] --reuse %s: copied %llu finished tasks", r.from.c_str(), ull{r.copied});
  if (r.not_in_sweep)
    out += " (" + std::to_string(r.not_in_sweep) + " of its finished tasks are not tasks of this sweep)";
  if (r.other_shards) out += " (" + std::to_string(r.other_shards) + " belong to other shards)";
  return out + "\n";
}

/// The text of the events --quiet drops (everything but stops, lost ranks and kernel notes).
std::string chatty_text(const sweep::Event& e, const TextStyle& style) {
  namespace ev = sweep::event;
  return std::visit(
      [&style](const auto& x) -> std::string {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, ev::WaitingForStore>)
          return format("[rcsweep] %s is still held by a run that is stopping (%s): waiting up to %.0f s\n",
                        x.store.c_str(), x.holder.c_str(), x.wait_s);
        else if constexpr (std::is_same_v<T, ev::StoreGrown>)
          return "[rcsweep] " + x.store + " was made from another version of the sweep file:\n" + x.changes +
                 "[rcsweep] grown to this sweep: " + std::to_string(x.copied) + " finished tasks copied\n";
        else if constexpr (std::is_same_v<T, ev::NoFlock>)
          return "[rcsweep] note: the file system of " + x.store +
                 " has no flock: one writer per store is not enforced by rcsweep's lock\n";
        else if constexpr (std::is_same_v<T, ev::Reused>)
          return reused_text(x);
        else if constexpr (std::is_same_v<T, ev::Started>)
          return started_text(x);
        else if constexpr (std::is_same_v<T, ev::Warning>)
          return "[rcsweep] warning: " + x.text + "\n";
        else if constexpr (std::is_same_v<T, ev::Progress>)
          return style.progress ? progress_text(x, style.tty) : std::string();
        else if constexpr (std::is_same_v<T, ev::TaskEnded>)
          return "[rcsweep] task " + std::to_string(x.task) + " " + x.message + "\n";
        else if constexpr (std::is_same_v<T, ev::Paused>)
          return format("[rcsweep] rank 0 was held up for %.0f s (the job stopped, its machine paused, "
                        "or a slow write): the workers' silence meanwhile is not counted\n",
                        x.seconds);
        else if constexpr (std::is_same_v<T, ev::WeightsDumped>)
          return "[rcsweep] --dump-weights: /dump holds " + std::to_string(x.tasks) + " tasks (" +
                 human_bytes(static_cast<double>(x.bytes)) + ")" +
                 (x.not_done ? "; " + std::to_string(x.not_done) + " tasks not done (no dump)" : std::string()) + "\n";
        else
          return "";
      },
      e);
}

/// JSON: one object, fields in the order added.
class JsonObject {
 public:
  explicit JsonObject(const char* name) { add("event", name); }
  JsonObject& add(const char* key, const std::string& v) { return raw(key, json_string(v)); }
  JsonObject& add(const char* key, const char* v) { return add(key, std::string(v)); }
  JsonObject& add(const char* key, bool v) { return raw(key, v ? "true" : "false"); }
  JsonObject& add(const char* key, int v) { return raw(key, std::to_string(v)); }
  JsonObject& add(const char* key, std::uint64_t v) { return raw(key, std::to_string(v)); }
  JsonObject& add(const char* key, double v) {
    return raw(key, std::isfinite(v) ? format("%.9g", v) : std::string("null"));
  }
  std::string line() const { return text_ + "}\n"; }

 private:
  JsonObject& raw(const char* key, const std::string& value) {
    text_ += (text_.size() > 1 ? ", " : "") + json_string(key) + ": " + value;
    return *this;
  }
  std::string text_ = "{";
};

void add_fields(JsonObject& o, const sweep::event::Finished& f) {
  const auto& s = f.summary;
  o.add("store", f.store).add("exit_code", s.exit_code()).add("stopped_because", stop_reason(s));
  o.add("done", s.done).add("diverged", s.diverged).add("vanished", s.vanished).add("failed", s.failed);
  o.add("not_needed", s.not_needed).add("already_finished", s.skipped).add("wall_s", s.wall_s);
  o.add("resumed", s.resumed).add("ended_first_layer", s.ended_first_layer).add("ended_last_layer", s.ended_last_layer);
  o.add("store_failed", s.store_failed).add("store_diverged", s.store_diverged).add("store_vanished", s.store_vanished);
  o.add("store_pending", s.store_pending);
}

void add_fields(JsonObject& o, const sweep::Event& e) {
  namespace ev = sweep::event;
  std::visit(
      [&o](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, ev::WaitingForStore>)
          o.add("store", x.store).add("holder", x.holder).add("wait_s", x.wait_s);
        else if constexpr (std::is_same_v<T, ev::StoreGrown>)
          o.add("store", x.store).add("changes", x.changes).add("copied", x.copied);
        else if constexpr (std::is_same_v<T, ev::NoFlock>)
          o.add("store", x.store).add("hdf5_locking_off", x.hdf5_locking_off);
        else if constexpr (std::is_same_v<T, ev::Reused>)
          o.add("from", x.from)
              .add("copied", x.copied)
              .add("not_in_sweep", x.not_in_sweep)
              .add("other_shards", x.other_shards);
        else if constexpr (std::is_same_v<T, ev::KernelsDiffer>)
          o.add("this_run", x.this_run)
              .add("stored", x.stored)
              .add("ranks_differ", x.ranks_differ)
              .add("new_kernel", x.new_kernel);
        else if constexpr (std::is_same_v<T, ev::Started>)
          o.add("store", x.store)
              .add("resumed", x.resumed)
              .add("tasks", x.tasks)
              .add("possible_tasks", x.possible_tasks)
              .add("bundles", x.bundles)
              .add("ranks", x.ranks)
              .add("threads", x.threads)
              .add("already_finished", x.already_finished)
              .add("schedule", x.schedule);
        else if constexpr (std::is_same_v<T, ev::Warning>)
          o.add("text", x.text);
        else if constexpr (std::is_same_v<T, ev::Progress>)
          o.add("tasks_done", x.tasks_done)
              .add("tasks_total", x.tasks_total)
              .add("fraction", x.fraction)
              .add("elapsed_s", x.elapsed_s)
              .add("eta_s", x.eta_s < 0 ? std::nan("") : x.eta_s)
              .add("eta_is_bound", x.eta_is_bound)
              .add("last", x.last);
        else if constexpr (std::is_same_v<T, ev::TaskEnded>)
          o.add("task", x.task).add("status", x.status).add("message", x.message);
        else if constexpr (std::is_same_v<T, ev::Paused>)
          o.add("seconds", x.seconds);
        else if constexpr (std::is_same_v<T, ev::Stopping>)
          o.add("signal", x.signal).add("launcher", x.launcher).add("grace_s", x.grace_s);
        else if constexpr (std::is_same_v<T, ev::LauncherGone>)
          o.add("launcher", x.launcher);
        else if constexpr (std::is_same_v<T, ev::RankLost>)
          o.add("rank", x.rank).add("host", x.host).add("silent_s", x.silent_s);
        else if constexpr (std::is_same_v<T, ev::Finished>)
          add_fields(o, x);
        else if constexpr (std::is_same_v<T, ev::WeightsDumped>)
          o.add("tasks", x.tasks).add("bytes", x.bytes).add("not_done", x.not_done);
      },
      e);
}

/// The text of a count: "1 event", "3 events".
std::string count_of(std::uint64_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

/// Why a writer did not write all: its reader is gone, or did not read in time.
std::string why_not_written(const LineWriter::Outcome& o) {
  if (o.error == EPIPE) return "its reader is gone";
  if (o.error) return std::strerror(o.error);
  return "its reader did not read them in time";
}

}  // namespace

std::string event_text(const sweep::Event& e, const TextStyle& style) {
  namespace ev = sweep::event;
  if (const auto* s = std::get_if<ev::Stopping>(&e)) return stopping_text(*s);
  if (const auto* g = std::get_if<ev::LauncherGone>(&e))
    return "[rcsweep] " + g->launcher + " is gone: stopping now; finished tasks are kept\n";
  if (const auto* l = std::get_if<ev::RankLost>(&e))
    return format(
        "[rcsweep] rank %d (%s) has not been heard from for %.0f s: its node or the network failed; stopping now, "
        "finished tasks are kept\n",
        l->rank, l->host.c_str(), l->silent_s);
  if (const auto* k = std::get_if<ev::KernelsDiffer>(&e)) return kernels_text(*k);
  if (const auto* n = std::get_if<ev::NoFlock>(&e); n && n->hdf5_locking_off)
    return "[rcsweep] warning: the file system of " + n->store +
           " has no flock and HDF5's file locking is off (HDF5_USE_FILE_LOCKING=FALSE): nothing keeps a second "
           "writer out of this store; run one writer at a time\n";
  if (const auto* f = std::get_if<ev::Finished>(&e)) return finished_text(*f, style.quiet);
  return style.quiet ? std::string() : chatty_text(e, style);
}

std::string event_json(const sweep::Event& e) {
  JsonObject o(sweep::event_name(e));
  add_fields(o, e);
  return o.line();
}

std::string dropped_json(const LineWriter::Dropped& dropped) {
  std::uint64_t total = 0;
  std::string kinds = "{";
  for (const auto& [kind, n] : dropped) {
    kinds += (kinds.size() > 1 ? ", " : "") + json_string(kind) + ": " + std::to_string(n);
    total += n;
  }
  return "{\"event\": \"dropped\", \"events\": " + std::to_string(total) + ", \"kinds\": " + kinds + "}}\n";
}

std::string dropped_text(const LineWriter::Dropped& dropped) {
  std::uint64_t total = 0;
  std::string kinds;
  for (const auto& [kind, n] : dropped) {
    if (kind == sweep::event_name(sweep::event::Progress{})) continue;
    kinds += (kinds.empty() ? "" : ", ") + std::to_string(n) + " " + kind;
    total += n;
  }
  if (total == 0) return "";
  return "[rcsweep] stderr was not read in time: " + count_of(total, "event", "events") + " not shown (" + kinds +
         ")\n";
}

LineWriter::Keep keep_of(const sweep::Event& e) {
  namespace ev = sweep::event;
  if (const auto* p = std::get_if<ev::Progress>(&e))
    return p->last ? LineWriter::Keep::always : LineWriter::Keep::latest;
  if (std::holds_alternative<ev::TaskEnded>(e) || std::holds_alternative<ev::Warning>(e) ||
      std::holds_alternative<ev::Paused>(e))
    return LineWriter::Keep::if_room;
  return LineWriter::Keep::always;  // at most once in a run: few and bounded
}

sweep::EventSink text_sink(std::shared_ptr<LineWriter> out, TextStyle style) {
  return [out = std::move(out), style](const sweep::Event& e) {
    std::string text = event_text(e, style);
    if (!text.empty()) out->write(std::move(text), sweep::event_name(e), keep_of(e));
  };
}

sweep::EventSink json_sink(std::shared_ptr<LineWriter> out) {
  return [out = std::move(out)](const sweep::Event& e) { out->write(event_json(e), sweep::event_name(e), keep_of(e)); };
}

sweep::EventSink both(sweep::EventSink first, sweep::EventSink second) {
  return [first = std::move(first), second = std::move(second)](const sweep::Event& e) {
    first(e);
    second(e);
  };
}

RunEvents::RunEvents(TextStyle style, bool json, int out_fd, int err_fd, std::size_t bound_bytes)
    : text_(std::make_shared<LineWriter>(err_fd, dropped_text, bound_bytes)) {
  sink_ = text_sink(text_, style);
  if (json) {
    json_ = std::make_shared<LineWriter>(out_fd, dropped_json, bound_bytes);
    sink_ = both(json_sink(json_), std::move(sink_));
  }
}

RunEvents::~RunEvents() { close(LineWriter::default_close_wait); }

LineWriter::Outcome RunEvents::close(std::chrono::milliseconds wait) {
  if (closed_) return json_outcome_;
  closed_ = true;
  const auto start = std::chrono::steady_clock::now();
  if (json_) {
    json_outcome_ = json_->close(wait);
    if (json_outcome_.lost > 0)
      text_->write("[rcsweep] note: " + count_of(json_outcome_.lost, "event was", "events were") +
                       " not written to stdout (" + why_not_written(json_outcome_) + ")\n",
                   "note", LineWriter::Keep::always);
  }
  // The text gets what is left of `wait`, and at least a quarter of it after a stalled stdout.
  const auto spent = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  text_->close(std::max(wait - spent, wait / 4));
  return json_outcome_;
}

}  // namespace rcsweep::cli
