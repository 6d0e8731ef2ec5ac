// Lines written to a file descriptor by a thread of their own: the event streams of `rcsweep run`
// (docs/EVENTS.md "A reader that does not keep up"). Whoever hands a line over never waits for the
// reader of the descriptor (a pipe nobody reads, a closed pipe, a terminal on hold): the lines wait
// in a queue of bounded size, and when it is full they are dropped by the rule of their kind; the
// next line written is then preceded by a notice of what was dropped.
#pragma once
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

namespace rcsweep::cli {

class LineWriter {
 public:
  /// How a line may be dropped.
  enum class Keep {
    latest,   ///< only the newest line of its kind matters (progress): a line of the kind still waiting is
              ///< replaced by the new one, and such lines are the first dropped when the queue is full
    if_room,  ///< dropped only when the queue is full of lines that are not `latest`
    always,   ///< never dropped (the last lines of a run: few and small; they may pass the bound)
  };
  /// Lines dropped since the last notice: how many of each kind.
  using Dropped = std::map<std::string, std::uint64_t>;
  /// The text written before the next line after drops (e.g. a JSON object and its newline; "" for
  /// nothing). Called on the writing thread.
  using Notice = std::function<std::string(const Dropped&)>;

  /// What became of the lines, as close() found it.
  struct Outcome {
    std::uint64_t lines = 0;    ///< handed over
    std::uint64_t written = 0;  ///< written whole
    std::uint64_t dropped = 0;  ///< dropped by the rule and counted in a notice that was written
    std::uint64_t lost = 0;     ///< neither written nor in a written notice: left at close, or after a failed write
    int error = 0;              ///< errno of the write that failed (EPIPE: the reader is gone); 0 if none did
  };

  static constexpr std::size_t default_bound_bytes = std::size_t{1} << 20;
  static constexpr std::chrono::milliseconds default_close_wait{2000};

  /// Start the thread writing to `fd` (a pipe, a terminal, a file; blocking or not; not closed
  /// here). `bound_bytes`: the most the waiting lines take (their text and bookkeeping), `always`
  /// lines excepted. The thread blocks every signal (they go to the other threads) and a write
  /// that fails with EPIPE does not raise SIGPIPE for the process. Throws std::system_error when
  /// no thread can be started.
  LineWriter(int fd, Notice notice, std::size_t bound_bytes = default_bound_bytes);
  /// close(default_close_wait) unless closed.
  ~LineWriter();
  LineWriter(const LineWriter&) = delete;
  LineWriter& operator=(const LineWriter&) = delete;

  /// Queue `text` (whole lines) of `kind` (e.g. the event's name), or drop it as `keep` says.
  /// Never waits for the reader: only, briefly, for the lock the writing thread takes between
  /// writes. Thread-safe. After close() or a failed write the text is counted lost.
  void write(std::string text, const std::string& kind, Keep keep);

  /// Wait until every waiting line is written, a write failed or `wait` has passed, then stop the
  /// writing thread (a thread still blocked in a write is left to end with the process; its line
  /// counts as lost). The same outcome on later calls.
  Outcome close(std::chrono::milliseconds wait);

 private:
  struct State;
  static void write_lines(const std::shared_ptr<State>& s);  // the thread
  std::shared_ptr<State> state_;
  std::thread thread_;
};

}  // namespace rcsweep::cli
