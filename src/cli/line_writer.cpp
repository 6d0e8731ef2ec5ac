#include "cli/line_writer.hpp"

#include <poll.h>
#include <pthread.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <csignal>
#include <deque>
#include <mutex>
#include <optional>

namespace rcsweep::cli {

struct LineWriter::State {
  struct Line {
    std::string text, kind;
    Keep keep;
  };

  State(int f, Notice n, std::size_t b) : fd(f), notice(std::move(n)), bound(b) {}

  static std::size_t cost(const Line& l) { return sizeof(Line) + l.text.size() + l.kind.size(); }

  /// Count one line of `kind` as dropped (for the next notice). Under `mutex`.
  void drop(const std::string& kind) {
    ++dropped[kind];
    ++pending;
  }

  /// Remove queued line `i`. Under `mutex`.
  void erase(std::deque<Line>::iterator i) {
    bytes -= cost(*i);
    queue.erase(i);
  }

  const int fd;
  const Notice notice;
  const std::size_t bound;
  std::mutex mutex;
  std::condition_variable changed;  // a line queued, written, or the writer stopped
  std::deque<Line> queue;
  std::size_t bytes = 0;      // the cost of the queued lines
  Dropped dropped;            // since the last notice
  std::uint64_t pending = 0;  // their number
  Outcome outcome;
  bool busy = false;            // the thread is in a write (without the lock)
  std::uint64_t in_flight = 0;  // the drops that write announces
  bool failed = false;          // a write failed: nothing more is written
  std::optional<Outcome> closed;
  std::atomic<bool> stop{false};
};

namespace {

/// Write all of `text` to `fd`: 0, or the errno of the failure. Waits (poll) when the descriptor is
/// non-blocking and full; gives up with ECANCELED when `stop` is set meanwhile.
int write_all(int fd, const std::string& text, const std::atomic<bool>& stop) {
  const char* p = text.data();
  std::size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n > 0) {
      p += n;
      left -= static_cast<std::size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n == 0 || errno == EAGAIN || errno == EWOULDBLOCK) {
      if (stop.load()) return ECANCELED;
      pollfd pfd{fd, POLLOUT, 0};
      ::poll(&pfd, 1, 100);
    } else {
      return errno;
    }
  }
  return 0;
}

}  // namespace

void LineWriter::write_lines(const std::shared_ptr<State>& s) {
  std::unique_lock lock(s->mutex);
  for (;;) {
    s->changed.wait(lock, [&] { return s->stop.load() || !s->queue.empty(); });
    if (s->stop.load()) return;
    std::string text;
    const std::uint64_t announced = s->pending;
    if (announced) {
      if (s->notice) text = s->notice(s->dropped);
      s->dropped.clear();
      s->pending = 0;
    }
    text += s->queue.front().text;
    s->erase(s->queue.begin());
    s->busy = true;
    s->in_flight = announced;
    lock.unlock();
    const int error = write_all(s->fd, text, s->stop);
    lock.lock();
    s->busy = false;
    if (s->stop.load()) return;  // close() has counted this line lost
    if (error) {
      s->failed = true;
      s->outcome.error = error;
      s->outcome.lost += 1 + announced + s->pending + s->queue.size();
      s->queue.clear();
      s->bytes = 0;
      s->dropped.clear();
      s->pending = 0;
      s->changed.notify_all();
      return;
    }
    ++s->outcome.written;
    s->outcome.dropped += announced;
    s->changed.notify_all();
  }
}

LineWriter::LineWriter(int fd, Notice notice, std::size_t bound_bytes)
    : state_(std::make_shared<State>(fd, std::move(notice), bound_bytes)) {
  // The thread starts with every signal blocked: stop signals go to the threads that act on them,
  // and the SIGPIPE of a write to a pipe without reader stays pending on this thread (the write
  // fails with EPIPE) instead of killing the process.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  try {
    thread_ = std::thread(write_lines, state_);
  } catch (...) {
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    throw;
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

LineWriter::~LineWriter() { close(default_close_wait); }

void LineWriter::write(std::string text, const std::string& kind, Keep keep) {
  State& s = *state_;
  const std::lock_guard lock(s.mutex);
  Outcome& o = s.closed ? *s.closed : s.outcome;
  ++o.lines;
  if (s.closed || s.failed) {
    ++o.lost;
    return;
  }
  State::Line line{std::move(text), kind, keep};
  if (keep == Keep::latest)
    for (auto i = s.queue.begin(); i != s.queue.end(); ++i)
      if (i->keep == Keep::latest && i->kind == kind) {
        s.drop(i->kind);
        s.erase(i);
        break;
      }
  const std::size_t cost = State::cost(line);
  // Full: the oldest `latest` lines go first.
  for (auto i = s.queue.begin(); s.bytes + cost > s.bound && i != s.queue.end();) {
    if (i->keep != Keep::latest) {
      ++i;
      continue;
    }
    s.drop(i->kind);
    const auto at = i - s.queue.begin();
    s.erase(i);
    i = s.queue.begin() + at;
  }
  if (s.bytes + cost > s.bound && keep != Keep::always) {
    s.drop(line.kind);
    return;
  }
  s.bytes += cost;
  s.queue.push_back(std::move(line));
  s.changed.notify_all();
}

LineWriter::Outcome LineWriter::close(std::chrono::milliseconds wait) {
  State& s = *state_;
  std::unique_lock lock(s.mutex);
  if (s.closed) return *s.closed;
  s.changed.wait_for(lock, wait, [&] { return s.failed || (s.queue.empty() && !s.busy); });
  const bool in_write = s.busy;
  Outcome out = s.outcome;
  out.lost += s.queue.size() + s.pending + (in_write ? 1 + s.in_flight : 0);
  s.queue.clear();
  s.bytes = 0;
  s.dropped.clear();
  s.pending = 0;
  s.closed = out;
  s.stop.store(true);
  s.changed.notify_all();
  lock.unlock();
  // Not in a write: the thread waits for the condition and ends now. In a write it may never come
  // back (a reader that never reads): it ends with the process.
  if (thread_.joinable()) {
    if (in_write)
      thread_.detach();
    else
      thread_.join();
  }
  return out;
}

}  // namespace rcsweep::cli
