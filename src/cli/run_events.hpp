// How `rcsweep run` shows the events of a run (sweep/events.hpp): text lines on stderr
// ("[rcsweep] ..."), and with `--progress json` also one JSON object per event and line on stdout
// (docs/EVENTS.md; stderr then keeps the text of every event but progress).
#pragma once
#include <cstdio>
#include <string>

#include "sweep/events.hpp"

namespace rcsweep::cli {

struct TextStyle {
  bool quiet = false;    ///< --quiet: only what the user must know (stops, lost ranks, kernels that differ)
  bool tty = false;      ///< stderr is a terminal: progress overwrites its line
  bool progress = true;  ///< progress lines (without: --progress json, whose progress is on stdout)
};

/// The text of an event as rank 0 prints it ("" when `style` shows nothing of it).
std::string event_text(const sweep::Event& e, const TextStyle& style);

/// The event as one JSON object on one line (with its newline): {"event": NAME, ...its fields}.
std::string event_json(const sweep::Event& e);

/// Sinks writing event_text or event_json to `out`, flushed after each event, thread-safe.
sweep::EventSink text_sink(std::FILE* out, TextStyle style);
sweep::EventSink json_sink(std::FILE* out);

/// Both: every event to `first`, then to `second`.
sweep::EventSink both(sweep::EventSink first, sweep::EventSink second);

}  // namespace rcsweep::cli
