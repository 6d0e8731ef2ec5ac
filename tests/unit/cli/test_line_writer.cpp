// Lines written by a thread of their own (cli/line_writer.hpp): in order to a reader that keeps up;
// to one that does not, the writer's callers never wait, the queue stays within its bound, progress
// is coalesced and dropped first, and every other drop is said in a notice before the next line.
#include "cli/line_writer.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <future>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace rcsweep::cli {
namespace {

using Keep = LineWriter::Keep;
using namespace std::chrono_literals;

/// A pipe; with `full`, of one page and filled: the next write to it blocks until it is read.
struct Pipe {
  int r = -1, w = -1;
  explicit Pipe(bool full = false) {
    int fds[2];
    if (::pipe(fds) != 0) throw std::runtime_error("pipe");
    r = fds[0];
    w = fds[1];
    if (full) {
      ::fcntl(w, F_SETPIPE_SZ, 4096);
      const int flags = ::fcntl(w, F_GETFL);
      ::fcntl(w, F_SETFL, flags | O_NONBLOCK);
      const std::string page(4096, '#');
      while (::write(w, page.data(), page.size()) > 0 || errno == EINTR) {
      }
      ::fcntl(w, F_SETFL, flags);
    }
  }
  ~Pipe() {
    if (r >= 0) ::close(r);
    if (w >= 0) ::close(w);
  }
  void close_write() {
    ::close(w);
    w = -1;
  }
  /// Everything written (after the filling '#'s) until the write end is closed.
  std::string read_to_end() const {
    std::string out;
    char buf[4096];
    for (ssize_t n; (n = ::read(r, buf, sizeof buf)) != 0;)
      if (n > 0) out.append(buf, static_cast<std::size_t>(n));
    const auto start = out.find_first_not_of('#');
    return start == std::string::npos ? std::string() : out.substr(start);
  }
};

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

/// The notice of these tests: "dropped KIND=N ...".
std::string notice(const LineWriter::Dropped& d) {
  std::string out = "dropped";
  for (const auto& [kind, n] : d) out += " " + kind + "=" + std::to_string(n);
  return out + "\n";
}

/// Run `f` and fail (instead of hanging) when it does not return within `limit`.
template <typename F>
void within(std::chrono::seconds limit, F f) {
  auto done = std::async(std::launch::async, f);
  ASSERT_EQ(done.wait_for(limit), std::future_status::ready) << "blocked";
  done.get();
}

TEST(LineWriter, AReaderThatKeepsUpGetsEveryLineInOrder) {
  Pipe pipe;
  std::string expected;
  LineWriter::Outcome o;
  {
    LineWriter out(pipe.w, notice);
    for (int i = 0; i < 200; ++i) {
      const std::string line = "line " + std::to_string(i) + "\n";
      out.write(line, i % 3 ? "task_ended" : "warning", i % 199 ? Keep::if_room : Keep::always);
      expected += line;
    }
    o = out.close(10s);
  }
  EXPECT_EQ(o.lines, 200u);
  EXPECT_EQ(o.written, 200u);
  EXPECT_EQ(o.dropped + o.lost + static_cast<unsigned>(o.error), 0u);
  pipe.close_write();
  EXPECT_EQ(pipe.read_to_end(), expected);
}

/// The lines a test wrote through a stalled pipe once it is read: per kind, how many were written
/// and how many the notices said were dropped; the last line of each kind; the lines but notices.
struct Read {
  std::map<std::string, std::uint64_t> delivered, said;
  std::map<std::string, std::string> last;
  std::vector<std::string> lines;
};

Read read_lines(const std::string& text) {
  Read out;
  for (const auto& line : lines_of(text)) {
    std::istringstream in(line);
    std::string kind;
    in >> kind;
    if (kind == "dropped") {
      for (std::string item; in >> item;)
        out.said[item.substr(0, item.find('='))] += std::stoull(item.substr(item.find('=') + 1));
    } else {
      ++out.delivered[kind];
      out.last[kind] = line;
      out.lines.push_back(line);
    }
  }
  return out;
}

TEST(LineWriter, AStalledReaderNeverHoldsTheCallerAndEveryDropIsSaid) {
  Pipe pipe(true);  // full: the writer's first write blocks until the pipe is read
  LineWriter out(pipe.w, notice, 2000);
  within(10s, [&] {
    out.write("started\n", "started", Keep::if_room);
    for (int i = 0; i < 500; ++i) {
      out.write("progress " + std::to_string(i) + "\n", "progress", Keep::latest);
      if (i % 10 == 0)
        out.write("task_ended " + std::to_string(i) + std::string(60, '.') + "\n", "task_ended", Keep::if_room);
    }
    out.write("finished\n", "finished", Keep::always);
  });
  auto reading = std::async(std::launch::async, [&] { return pipe.read_to_end(); });
  const auto o = out.close(10s);  // all written: the writing thread has ended
  pipe.close_write();
  const Read r = read_lines(reading.get());

  EXPECT_EQ(o.lines, 1u + 500u + 50u + 1u);
  EXPECT_EQ(o.lost, 0u);
  EXPECT_EQ(o.written + o.dropped, o.lines);
  ASSERT_FALSE(r.lines.empty());
  EXPECT_EQ(r.lines.front(), "started");
  EXPECT_EQ(r.lines.back(), "finished");
  EXPECT_EQ(r.delivered.at("task_ended") + r.said.at("task_ended"), 50u);  // each written or said
  EXPECT_GT(r.said.at("task_ended"), 0u);                                  // the bound of 2000 bytes held some back
  EXPECT_LT(r.delivered.at("task_ended"), 2000u / 60u);
  EXPECT_EQ(r.delivered.count("progress") ? r.delivered.at("progress") : 0u, 500u - r.said.at("progress"));
}

TEST(LineWriter, ProgressWaitingForAStalledReaderIsReplacedByTheNewest) {
  Pipe pipe(true);
  LineWriter out(pipe.w, notice);
  within(10s, [&] {
    out.write("started\n", "started", Keep::if_room);
    for (int i = 0; i < 100; ++i) {
      out.write("progress " + std::to_string(i) + "\n", "progress", Keep::latest);
      if (i == 50) out.write("task_ended 50\n", "task_ended", Keep::if_room);
    }
    out.write("finished\n", "finished", Keep::always);
  });
  auto reading = std::async(std::launch::async, [&] { return pipe.read_to_end(); });
  const auto o = out.close(10s);
  pipe.close_write();
  const Read r = read_lines(reading.get());
  EXPECT_EQ(o.lost, 0u);
  // One progress line waits at a time: the writer took at most one before the newest.
  EXPECT_LE(r.delivered.at("progress"), 2u);
  EXPECT_EQ(r.delivered.at("progress") + r.said.at("progress"), 100u);
  EXPECT_EQ(r.last.at("progress"), "progress 99");
  EXPECT_EQ(r.delivered.at("task_ended"), 1u);  // nothing else is dropped while there is room
  EXPECT_EQ(r.said.count("task_ended"), 0u);
  EXPECT_EQ(r.lines.back(), "finished");
}

TEST(LineWriter, AGoneReaderEndsTheWritingWithoutKillingTheProcess) {
  Pipe pipe;
  ::close(pipe.r);  // SIGPIPE is not ignored here: the writing thread must not raise it
  pipe.r = -1;
  LineWriter out(pipe.w, notice);
  for (int i = 0; i < 10; ++i) out.write("line\n", "warning", Keep::if_room);
  const auto o = out.close(10s);
  EXPECT_EQ(o.error, EPIPE);
  EXPECT_EQ(o.written, 0u);
  EXPECT_EQ(o.lost, 10u);
}

TEST(LineWriter, CloseGivesUpOnAReaderThatNeverReads) {
  Pipe pipe(true);
  LineWriter::Outcome o;
  within(10s, [&] {
    LineWriter out(pipe.w, notice);
    out.write("a\n", "started", Keep::if_room);
    out.write("b\n", "progress", Keep::latest);
    out.write("c\n", "finished", Keep::always);
    o = out.close(100ms);
    out.write("d\n", "weights_dumped", Keep::always);  // after close: lost
    EXPECT_EQ(out.close(100ms).lost, 4u);
  });  // the destructor does not wait for the blocked thread either
  EXPECT_EQ(o.lines, 3u);
  EXPECT_EQ(o.written, 0u);
  EXPECT_EQ(o.lost, 3u);
  // The abandoned thread is still in its write: closing the read end ends it (EPIPE); the write
  // end stays open (a descriptor the thread may still use is not closed under it).
  ::close(pipe.r);
  pipe.r = -1;
  pipe.w = -1;
}

}  // namespace
}  // namespace rcsweep::cli
