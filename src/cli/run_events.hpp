// How `rcsweep run` shows the events of a run (sweep/events.hpp): text lines on stderr
// ("[rcsweep] ..."), and with `--progress json` also one JSON object per event and line on stdout
// (docs/EVENTS.md; stderr then keeps the text of every event but progress). Both are written by a
// thread of their own (cli/line_writer.hpp): a reader that does not keep up never holds the run.
#pragma once
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "cli/line_writer.hpp"
#include "sweep/events.hpp"

namespace rcsweep::cli {

struct TextStyle {
  bool quiet = false;    ///< --quiet: only what the user must know (stops, lost ranks, kernels that differ)
  bool tty = false;      ///< stderr is a terminal: progress overwrites its line
  bool progress = true;  ///< progress lines (without: --progress json, whose progress is on stdout)
};

/// The text of an event as rank 0 prints it ("" when `style` shows nothing of it). Each kind has
/// its own text in run_events.cpp, without a generic fallback: a kind without it does not compile.
std::string event_text(const sweep::Event& e, const TextStyle& style);

/// The event as one JSON object on one line (with its newline): {"event": NAME, ...its fields},
/// the kind's `name` and `fields` (sweep/events.hpp); a time that is not known is null.
std::string event_json(const sweep::Event& e);

/// The notices of dropped events (LineWriter::Notice): as JSON, {"event": "dropped", "events": N,
/// "kinds": {NAME: COUNT, ...}} and its newline; as text, a line naming the events that are not
/// progress ("" when only progress was dropped: a text progress line is replaced by the next).
std::string dropped_json(const LineWriter::Dropped& dropped);
std::string dropped_text(const LineWriter::Dropped& dropped);

/// How an event may be dropped when its reader does not keep up: progress as `latest`; the events
/// that may come many times in a run (task_ended, warning, paused) `if_room`; the last progress and
/// the events that come at most once in a run (started, stopping, finished, ...) `always`.
LineWriter::Keep keep_of(const sweep::Event& e);

/// Sinks giving event_text or event_json to `out` (which never waits for its reader), thread-safe.
sweep::EventSink text_sink(std::shared_ptr<LineWriter> out, TextStyle style);
sweep::EventSink json_sink(std::shared_ptr<LineWriter> out);

/// Both: every event to `first`, then to `second`.
sweep::EventSink both(sweep::EventSink first, sweep::EventSink second);

/// The event streams of `rcsweep run` on rank 0: text on `err_fd` and, with `json`, JSON lines on
/// `out_fd`, each through a LineWriter of `bound_bytes`: a reader that does not keep up, or is
/// gone, never holds the run (docs/EVENTS.md "A reader that does not keep up").
class RunEvents {
 public:
  RunEvents(TextStyle style, bool json, int out_fd, int err_fd,
            std::size_t bound_bytes = LineWriter::default_bound_bytes);
  /// close(LineWriter::default_close_wait) unless closed.
  ~RunEvents();
  RunEvents(const RunEvents&) = delete;
  RunEvents& operator=(const RunEvents&) = delete;

  /// The sink of the run (RunOptions::events); events given to it after close() are not written.
  /// A `fatal` event (the process ends as soon as the sink returns) closes the writers before it
  /// returns, giving them about fatal_close_wait to write it and what is waiting before it.
  const sweep::EventSink& sink() const noexcept { return sink_; }
  static constexpr std::chrono::milliseconds fatal_close_wait{500};

  /// Give the writers about `wait` to write the events still waiting (as long again at most for
  /// the text after a stalled stdout), then stop them; when JSON events were neither written nor
  /// counted in a written `dropped` notice, the text says how many and why. The outcome of the
  /// JSON writer (all zero without one).
  LineWriter::Outcome close(std::chrono::milliseconds wait);

 private:
  std::shared_ptr<LineWriter> text_, json_;
  sweep::EventSink sink_;
  bool closed_ = false;
  LineWriter::Outcome json_outcome_;
};

}  // namespace rcsweep::cli
