#include "cli/run_events.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <concepts>
#include <string>
#include <variant>

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
                  sweep::event::stopped_because(s).c_str(), ull{s.store_pending}, f.store.c_str());
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

// The text of each kind of event ("" when `style` shows nothing of it): one overload per kind and
// no generic one, so that a kind of sweep::Event without its text does not compile (event_text
// visits them). --quiet keeps only what the user must know: stops, lost ranks, kernels that
// differ, a store nothing keeps a second writer out of, how to go on after an early stop, errors.

std::string text(const sweep::event::WaitingForStore& x, const TextStyle& style) {
  if (style.quiet) return "";
  return format("[rcsweep] %s is still held by a run that is stopping (%s): waiting up to %.0f s\n", x.store.c_str(),
                x.holder.c_str(), x.wait_s);
}

std::string text(const sweep::event::StoreGrown& x, const TextStyle& style) {
  if (style.quiet) return "";
  return "[rcsweep] " + x.store + " was made from another version of the sweep file:\n" + x.changes +
         "[rcsweep] grown to this sweep: " + std::to_string(x.copied) + " finished tasks copied\n";
}

std::string text(const sweep::event::NoFlock& x, const TextStyle& style) {
  if (x.hdf5_locking_off)
    return "[rcsweep] warning: the file system of " + x.store +
           " has no flock and HDF5's file locking is off (HDF5_USE_FILE_LOCKING=FALSE): nothing keeps a second "
           "writer out of this store; run one writer at a time\n";
  if (style.quiet) return "";
  return "[rcsweep] note: the file system of " + x.store +
         " has no flock: one writer per store is not enforced by rcsweep's lock\n";
}

std::string text(const sweep::event::Reused& x, const TextStyle& style) { return style.quiet ? "" : reused_text(x); }

std::string text(const sweep::event::KernelsDiffer& x, const TextStyle&) { return kernels_text(x); }

std::string text(const sweep::event::Started& x, const TextStyle& style) { return style.quiet ? "" : started_text(x); }

std::string text(const sweep::event::Warning& x, const TextStyle& style) {
  return style.quiet ? "" : "[rcsweep] warning: " + x.text + "\n";
}

std::string text(const sweep::event::Progress& x, const TextStyle& style) {
  return style.quiet || !style.progress ? "" : progress_text(x, style.tty);
}

std::string text(const sweep::event::TaskEnded& x, const TextStyle& style) {
  return style.quiet ? "" : "[rcsweep] task " + std::to_string(x.task) + " " + x.message + "\n";
}

std::string text(const sweep::event::Paused& x, const TextStyle& style) {
  if (style.quiet) return "";
  return format("[rcsweep] rank 0 was held up for %.0f s (the job stopped, its machine paused, "
                "or a slow write): the workers' silence meanwhile is not counted\n",
                x.seconds);
}

std::string text(const sweep::event::Stopping& x, const TextStyle&) { return stopping_text(x); }

std::string text(const sweep::event::LauncherGone& x, const TextStyle&) {
  return "[rcsweep] " + x.launcher + " is gone: stopping now; finished tasks are kept\n";
}

std::string text(const sweep::event::RankLost& x, const TextStyle&) {
  return format(
      "[rcsweep] rank %d (%s) has not been heard from for %.0f s: its node or the network failed; stopping now, "
      "finished tasks are kept\n",
      x.rank, x.host.c_str(), x.silent_s);
}

std::string text(const sweep::event::Finished& x, const TextStyle& style) { return finished_text(x, style.quiet); }

std::string text(const sweep::event::WeightsDumped& x, const TextStyle& style) {
  if (style.quiet) return "";
  return "[rcsweep] --dump-weights: /dump holds " + std::to_string(x.tasks) + " tasks (" +
         human_bytes(static_cast<double>(x.bytes)) + ")" +
         (x.not_done ? "; " + std::to_string(x.not_done) + " tasks not done (no dump)" : std::string()) + "\n";
}

std::string text(const sweep::event::Fatal& x, const TextStyle&) {
  return "[rank 0/" + std::to_string(x.ranks) + "] error: " + x.message + "\n";
}

/// Whether `T` has its text here.
template <typename T>
concept HasText = requires(const T& e, const TextStyle& style) {
  { text(e, style) } -> std::same_as<std::string>;
};
template <typename V>
inline constexpr bool every_text = false;
template <typename... T>
inline constexpr bool every_text<std::variant<T...>> = (HasText<T> && ...);
static_assert(every_text<sweep::Event>, "every kind of event has its text here");

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
  return std::visit([&style](const auto& x) { return text(x, style); }, e);
}

std::string event_json(const sweep::Event& e) {
  return std::visit(
      [](const auto& x) {
        JsonObject o(x.name);
        x.fields([&o](const char* key, const auto& value) { o.add(key, value); });
        return o.line();
      },
      e);
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

namespace {

/// Give `json` (if any) about `wait` to write what is waiting, then `text` what is left of `wait`
/// (at least a quarter of it after a stalled stdout), and stop them; JSON events neither written
/// nor counted in a written `dropped` notice are said in the text. The outcome of `json`.
LineWriter::Outcome close_writers(const std::shared_ptr<LineWriter>& json, const std::shared_ptr<LineWriter>& text,
                                  std::chrono::milliseconds wait) {
  const auto start = std::chrono::steady_clock::now();
  LineWriter::Outcome json_outcome;
  if (json) {
    json_outcome = json->close(wait);
    if (json_outcome.lost > 0)
      text->write("[rcsweep] note: " + count_of(json_outcome.lost, "event was", "events were") +
                      " not written to stdout (" + why_not_written(json_outcome) + ")\n",
                  "note", LineWriter::Keep::always);
  }
  const auto spent = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  text->close(std::max(wait - spent, wait / 4));
  return json_outcome;
}

}  // namespace

RunEvents::RunEvents(TextStyle style, bool json, int out_fd, int err_fd, std::size_t bound_bytes)
    : text_(std::make_shared<LineWriter>(err_fd, dropped_text, bound_bytes)) {
  sink_ = text_sink(text_, style);
  if (json) {
    json_ = std::make_shared<LineWriter>(out_fd, dropped_json, bound_bytes);
    sink_ = both(json_sink(json_), std::move(sink_));
  }
  // The process ends as soon as the sink returns from a `fatal` event: write it first.
  sink_ = [sink = std::move(sink_), json = json_, text = text_](const sweep::Event& e) {
    sink(e);
    if (std::holds_alternative<sweep::event::Fatal>(e)) close_writers(json, text, fatal_close_wait);
  };
}

RunEvents::~RunEvents() { close(LineWriter::default_close_wait); }

LineWriter::Outcome RunEvents::close(std::chrono::milliseconds wait) {
  if (closed_) return json_outcome_;
  closed_ = true;
  json_outcome_ = close_writers(json_, text_, wait);
  return json_outcome_;
}

}  // namespace rcsweep::cli
