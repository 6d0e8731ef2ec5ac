// The text and JSON forms of a run's events (cli/run_events.hpp): the text is what rank 0 has
// always printed, the JSON one object per line with every field; every kind has its name, fields
// and text by construction, and docs/EVENTS.md's table lists the JSON keys of every kind.
#include "cli/run_events.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <variant>
#include <vector>

namespace rcsweep::cli {
namespace {

namespace ev = sweep::event;

ev::Progress progress(std::uint64_t done, std::uint64_t total, double fraction, double elapsed, double eta) {
  ev::Progress p;
  p.tasks_done = done;
  p.tasks_total = total;
  p.fraction = fraction;
  p.elapsed_s = elapsed;
  p.eta_s = eta;
  return p;
}

TEST(EventText, ProgressLineInALog) {
  EXPECT_EQ(event_text(progress(3, 10, 0.42, 5.0, 7.0), {}),
            "[rcsweep] 3/10 tasks,  42.0% of work, elapsed 5s, ETA 7s\n");
}

TEST(EventText, ProgressDurationsInSecondsMinutesHours) {
  EXPECT_EQ(event_text(progress(1, 2, 0.5, 100.0, 5400.0), {}),
            "[rcsweep] 1/2 tasks,  50.0% of work, elapsed 1m40s, ETA 1.5h\n");
  EXPECT_EQ(event_text(progress(0, 2, 0.0, 0.4, -1.0), {}), "[rcsweep] 0/2 tasks,   0.0% of work, elapsed 0s, ETA ?\n");
}

TEST(EventText, ProgressOnATerminalOverwritesItsLineUntilTheLast) {
  auto p = progress(3, 10, 0.42, 5.0, 7.0);
  const TextStyle tty{false, true, true};
  EXPECT_EQ(event_text(p, tty), "\r[rcsweep] 3/10 tasks,  42.0% of work, elapsed 5s, ETA 7s   ");
  p.last = true;
  EXPECT_EQ(event_text(p, tty), "\r[rcsweep] 3/10 tasks,  42.0% of work, elapsed 5s, ETA 7s\n");
}

TEST(EventText, AnEtaThatIsABoundSaysAtMost) {
  auto p = progress(3, 10, 0.42, 5.0, 7.0);
  p.eta_is_bound = true;
  EXPECT_EQ(event_text(p, {}), "[rcsweep] 3/10 tasks,  42.0% of work, elapsed 5s, ETA at most 7s\n");
}

TEST(EventText, NoProgressLinesWhenProgressGoesElsewhere) {
  EXPECT_EQ(event_text(progress(3, 10, 0.42, 5.0, 7.0), {false, false, false}), "");
  EXPECT_NE(event_text(ev::TaskEnded{7, "diverged", "diverged at layer 3"}, {false, false, false}), "");
}

TEST(EventText, StartedSaysWhatRunsWhere) {
  ev::Started s;
  s.store = "out.h5";
  s.tasks = 12;
  s.bundles = 3;
  s.ranks = 2;
  s.threads = 4;
  s.already_finished = 5;
  s.schedule = "4 units";
  EXPECT_EQ(event_text(s, {}),
            "[rcsweep] writing out.h5: 12 tasks in 3 bundles to run on 2 ranks x 4 threads (5 already finished)\n"
            "[rcsweep] ranks 2: 4 units\n");
  s.resumed = true;
  s.ranks = 1;
  s.threads = 1;
  s.possible_tasks = 6;
  s.schedule.clear();
  EXPECT_EQ(event_text(s, {}),
            "[rcsweep] resuming out.h5: 12 tasks (+ up to 6 replicates as the targets need them) in 3 bundles to run "
            "on 1 rank (5 already finished)\n");
}

TEST(EventText, StoppingNamesTheSignalAndTheGrace) {
  EXPECT_EQ(event_text(ev::Stopping{"SIGTERM", "", 30.0, "the same signal again"}, {}),
            "[rcsweep] SIGTERM: no new tasks; running bundles that finish within 30 s are kept, the rest are "
            "abandoned (the same signal again stops at once)\n");
  EXPECT_EQ(event_text(ev::Stopping{"SIGTERM", "srun", 5.0, ""}, {}),
            "[rcsweep] SIGTERM from srun, which kills the job next: no new tasks; running bundles that finish "
            "within 5 s are kept, the rest are abandoned\n");
}

TEST(EventText, QuietKeepsWhatTheUserMustKnow) {
  const TextStyle quiet{true, false, true};
  EXPECT_EQ(event_text(progress(3, 10, 0.42, 5.0, 7.0), quiet), "");
  EXPECT_EQ(event_text(ev::TaskEnded{7, "failed", "failed: out of memory"}, quiet), "");
  EXPECT_EQ(event_text(ev::NoFlock{"a.h5"}, quiet), "");
  // No flock and HDF5's locking off too: nothing keeps a second writer out, said even with -q.
  EXPECT_NE(
      event_text(ev::NoFlock{"a.h5", true}, quiet).find("warning: the file system of a.h5 has no flock and HDF5's"),
      std::string::npos);
  EXPECT_NE(event_json(ev::NoFlock{"a.h5", true}).find("\"hdf5_locking_off\": true"), std::string::npos);
  EXPECT_NE(event_text(ev::Stopping{"SIGINT", "", 30.0, "a SIGINT or SIGTERM"}, quiet), "");
  EXPECT_EQ(event_text(ev::LauncherGone{"mpiexec"}, quiet),
            "[rcsweep] mpiexec is gone: stopping now; finished tasks are kept\n");
  EXPECT_EQ(event_text(ev::RankLost{3, "node7", 121.4}, quiet),
            "[rcsweep] rank 3 (node7) has not been heard from for 121 s: its node or the network failed; stopping "
            "now, finished tasks are kept\n");
  EXPECT_NE(event_text(ev::KernelsDiffer{"Haswell, Zen", "", true, false}, quiet), "");
}

TEST(EventText, KernelNotesEndWithWhatTheyMean) {
  const std::string text = event_text(ev::KernelsDiffer{"Zen", "Haswell (4 tasks)", false, true}, {});
  EXPECT_EQ(text,
            "[rcsweep] note: this run computes with Zen; the store's finished tasks were computed with Haswell (4 "
            "tasks)\n"
            "[rcsweep] results of different BLAS kernels agree to rounding, not bitwise (docs/GUARANTEES.md); "
            "rcsweep info counts the tasks of each\n");
}

TEST(EventText, FinishedSummarisesTheRunUnlessQuiet) {
  ev::Finished f;
  f.store = "s.h5";
  f.summary.done = 4;
  f.summary.diverged = 1;
  f.summary.wall_s = 3.25;
  f.summary.skipped = 2;
  f.summary.ended_first_layer = 5;
  f.summary.ended_last_layer = 5;
  f.summary.store_diverged = 1;
  EXPECT_EQ(event_text(f, {}),
            "[rcsweep] finished after 3.2 s: 4 done, 1 diverged, 0 vanished, 0 failed this run (2 were already "
            "finished); store s.h5\n"
            "[rcsweep] this run's diverged and vanished tasks ended at layers 5 to 5\n"
            "[rcsweep] the store holds 1 diverged (X non-finite) and 0 vanished (X exactly zero) tasks: outcomes of "
            "the stack, recorded with the layers before (/tasks/message)\n");
  EXPECT_EQ(event_text(f, {true, false, true}), "");
}

TEST(EventText, AnEarlyStopSaysHowToGoOnEvenWhenQuiet) {
  ev::Finished f;
  f.store = "s.h5";
  f.summary.time_limited = true;
  f.summary.time_limit_s = 90.0;
  f.summary.store_pending = 7;
  ASSERT_EQ(f.summary.exit_code(), 4);
  EXPECT_EQ(event_text(f, {true, false, true}),
            "[rcsweep] time limit of 90.0 s reached: 7 tasks left, every finished task is in s.h5; resume with the "
            "same command\n");
}

TEST(EventJson, OneObjectPerLineWithItsName) {
  const std::string line = event_json(progress(3, 10, 0.42, 5.0, 7.0));
  EXPECT_EQ(line,
            "{\"event\": \"progress\", \"tasks_done\": 3, \"tasks_total\": 10, \"fraction\": 0.42, \"elapsed_s\": 5, "
            "\"eta_s\": 7, \"eta_is_bound\": false, \"last\": false}\n");
}

TEST(EventJson, UnknownTimesAreNullAndStringsEscaped) {
  EXPECT_NE(event_json(progress(0, 1, 0.0, 0.0, -1.0)).find("\"eta_s\": null"), std::string::npos);
  const std::string line = event_json(ev::TaskEnded{9, "failed", "bad \"value\"\nsecond line\\"});
  EXPECT_EQ(
      line,
      "{\"event\": \"task_ended\", \"task\": 9, \"status\": \"failed\", \"message\": \"bad \\\"value\\\"\\nsecond "
      "line\\\\\"}\n");
}

TEST(EventJson, StoppingSaysWhatStopsAtOnce) {
  EXPECT_EQ(event_json(ev::Stopping{"SIGTERM", "", 30.0, "the same signal again"}),
            "{\"event\": \"stopping\", \"signal\": \"SIGTERM\", \"launcher\": \"\", \"grace_s\": 30, "
            "\"stops_at_once\": \"the same signal again\"}\n");
}

TEST(EventText, AFatalErrorIsSaidAsRankZerosErrorEvenWhenQuiet) {
  const ev::Fatal fatal{2, "out of memory while handing results over"};
  const std::string said = "[rank 0/2] error: out of memory while handing results over\n";
  EXPECT_EQ(event_text(fatal, {}), said);
  EXPECT_EQ(event_text(fatal, {true, false, true}), said);
  EXPECT_EQ(event_json(fatal),
            "{\"event\": \"fatal\", \"ranks\": 2, \"message\": \"out of memory while handing results over\"}\n");
  EXPECT_EQ(keep_of(fatal), LineWriter::Keep::always);
}

TEST(EventJson, FinishedCarriesTheExitCodeAndCounts) {
  ev::Finished f;
  f.store = "s.h5";
  f.summary.done = 4;
  f.summary.failed = 1;
  f.summary.store_failed = 1;
  const std::string line = event_json(f);
  EXPECT_NE(line.find("\"exit_code\": 3"), std::string::npos) << line;
  EXPECT_NE(line.find("\"done\": 4"), std::string::npos) << line;
  EXPECT_NE(line.find("\"stopped_because\": \"\""), std::string::npos) << line;
}

/// Every kind of event: a distinct name, a JSON line of its own that starts with it.
template <std::size_t... I>
void check_every_kind(std::index_sequence<I...>) {
  std::set<std::string> names;
  (
      [&] {
        const sweep::Event e{std::in_place_index<I>};
        const std::string name = sweep::event_name(e);
        EXPECT_TRUE(names.insert(name).second) << name << " twice";
        const std::string line = event_json(e);
        EXPECT_EQ(line.rfind("{\"event\": \"" + name + "\"", 0), 0u) << line;
        EXPECT_EQ(line.find('\n'), line.size() - 1) << line;
        EXPECT_EQ(line[line.size() - 2], '}') << line;
      }(),
      ...);
  EXPECT_EQ(names.size(), sizeof...(I));
}

TEST(EventJson, EveryKindHasItsOwnName) {
  check_every_kind(std::make_index_sequence<std::variant_size_v<sweep::Event>>{});
}

// Exhaustive by construction: every kind has its name and JSON fields (sweep::event::Kind; the
// variant static_asserts it), and a struct without them is no kind, so a new kind that lacks them
// does not compile. Its text: run_events.cpp visits one overload per kind without a fallback and
// static_asserts that every kind has one.
struct NoName {
  template <typename F>
  void fields(F&&) const {}
};
struct NoFields {
  static constexpr const char* name = "no_fields";
};
struct Complete {
  static constexpr const char* name = "complete";
  int n = 0;
  template <typename F>
  void fields(F&& f) const {
    f("n", n);
  }
};
static_assert(!sweep::event::Kind<NoName>);
static_assert(!sweep::event::Kind<NoFields>);
static_assert(sweep::event::Kind<Complete>);
static_assert(sweep::all_kinds<sweep::Event>);
static_assert(!sweep::all_kinds<std::variant<ev::Started, NoFields>>);

/// The top-level keys of a JSON object on one line, in order.
std::vector<std::string> top_level_keys(const std::string& line) {
  std::vector<std::string> keys;
  int depth = 0;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      --depth;
    } else if (c == '"') {
      std::string s;
      for (++i; i < line.size() && line[i] != '"'; ++i) {
        if (line[i] == '\\') ++i;
        s += line[i];
      }
      std::size_t j = i + 1;
      while (j < line.size() && line[j] == ' ') ++j;
      if (depth == 1 && j < line.size() && line[j] == ':') keys.push_back(s);
    }
  }
  return keys;
}

/// docs/EVENTS.md's table of events: each event's name and its fields, the names in backquotes
/// outside parentheses in the table's last column.
std::map<std::string, std::set<std::string>> events_table() {
  const auto path = std::filesystem::path(__FILE__).parent_path() / "../../../docs/EVENTS.md";
  std::ifstream in(path);
  EXPECT_TRUE(in) << path;
  std::map<std::string, std::set<std::string>> table;
  bool in_section = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("## ", 0) == 0) in_section = line == "## The events";
    if (!in_section || line.rfind("| `", 0) != 0) continue;
    std::vector<std::string> cells;
    for (std::size_t at = 1, bar; (bar = line.find('|', at)) != std::string::npos; at = bar + 1)
      cells.push_back(line.substr(at, bar - at));
    if (cells.size() != 3) {
      ADD_FAILURE() << "a row of 3 cells: " << line;
      continue;
    }
    const auto open = cells[0].find('`'), close = cells[0].find('`', open + 1);
    auto& fields = table[cells[0].substr(open + 1, close - open - 1)];
    int depth = 0;
    const std::string& f = cells[2];
    for (std::size_t i = 0; i < f.size(); ++i) {
      if (f[i] == '(') ++depth;
      if (f[i] == ')') --depth;
      if (f[i] != '`') continue;
      const auto end = f.find('`', i + 1);
      if (depth == 0) fields.insert(f.substr(i + 1, end - i - 1));
      i = end;
    }
  }
  return table;
}

/// The JSON keys of each kind of event (but "event"), from a line of each, and of `dropped`.
template <std::size_t... I>
std::map<std::string, std::set<std::string>> json_keys(std::index_sequence<I...>) {
  std::map<std::string, std::set<std::string>> keys;
  const auto add = [&keys](const std::string& line) {
    const auto k = top_level_keys(line);
    EXPECT_FALSE(k.empty()) << line;
    if (k.empty() || k[0] != "event") return;
    const auto name_at = line.find('"', line.find(':') + 1);
    auto& fields = keys[line.substr(name_at + 1, line.find('"', name_at + 1) - name_at - 1)];
    fields.insert(k.begin() + 1, k.end());
  };
  (add(event_json(sweep::Event{std::in_place_index<I>})), ...);
  add(dropped_json({{"progress", 1}}));
  return keys;
}

TEST(EventsDoc, TheTableListsTheJsonFieldsOfEveryKind) {
  const auto table = events_table();
  const auto keys = json_keys(std::make_index_sequence<std::variant_size_v<sweep::Event>>{});
  ASSERT_FALSE(table.empty());
  for (const auto& [name, fields] : keys) {
    const auto row = table.find(name);
    if (row == table.end()) {
      ADD_FAILURE() << "docs/EVENTS.md has no row for " << name;
      continue;
    }
    for (const auto& k : fields)
      EXPECT_TRUE(row->second.count(k)) << name << "." << k << " is written but not in docs/EVENTS.md";
    for (const auto& k : row->second)
      EXPECT_TRUE(fields.count(k)) << name << "." << k << " is in docs/EVENTS.md but not written";
  }
  for (const auto& [name, fields] : table) EXPECT_TRUE(keys.count(name)) << name << " is no event";
}

TEST(EventsDoc, TheKeysOfALineAreReadAtItsTopLevel) {
  EXPECT_EQ(top_level_keys("{\"a\": \"x\\\": 1\", \"b\": {\"c\": 2}, \"d\": [\"e\"]}"),
            (std::vector<std::string>{"a", "b", "d"}));
}

TEST(EventSinks, BothGivesEachEventToTheFirstThenTheSecond) {
  std::string order;
  const auto sink = both([&](const sweep::Event&) { order += "1"; }, [&](const sweep::Event&) { order += "2"; });
  sink(ev::NoFlock{"x"});
  sink(ev::NoFlock{"y"});
  EXPECT_EQ(order, "1212");
}

/// What was written to `fd` (a file) from its start.
std::string contents(int fd) {
  std::string out;
  char buf[4096];
  for (off_t at = 0;;) {
    const ssize_t n = ::pread(fd, buf, sizeof buf, at);
    if (n <= 0) return out;
    out.append(buf, static_cast<std::size_t>(n));
    at += n;
  }
}

TEST(EventSinks, TextSinkWritesTheTextAndJsonSinkTheLine) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    auto out = std::make_shared<LineWriter>(fileno(f), dropped_text);
    text_sink(out, {})(ev::Warning{"rank 2 idles"});
    json_sink(out)(ev::Warning{"rank 2 idles"});
    text_sink(out, {true, false, true})(ev::Warning{"not shown"});
    EXPECT_EQ(out->close(std::chrono::seconds(10)).written, 2u);
  }
  EXPECT_EQ(contents(fileno(f)),
            "[rcsweep] warning: rank 2 idles\n{\"event\": \"warning\", \"text\": \"rank 2 idles\"}\n");
  std::fclose(f);
}

TEST(EventSinks, ProgressMayBeCoalescedEventsOfOnceARunAreAlwaysKept) {
  auto p = progress(1, 2, 0.5, 1.0, 1.0);
  EXPECT_EQ(keep_of(p), LineWriter::Keep::latest);
  p.last = true;
  EXPECT_EQ(keep_of(p), LineWriter::Keep::always);
  EXPECT_EQ(keep_of(ev::TaskEnded{}), LineWriter::Keep::if_room);
  EXPECT_EQ(keep_of(ev::Warning{}), LineWriter::Keep::if_room);
  EXPECT_EQ(keep_of(ev::Paused{}), LineWriter::Keep::if_room);
  EXPECT_EQ(keep_of(ev::Started{}), LineWriter::Keep::always);
  EXPECT_EQ(keep_of(ev::Stopping{}), LineWriter::Keep::always);
  EXPECT_EQ(keep_of(ev::RankLost{}), LineWriter::Keep::always);
  EXPECT_EQ(keep_of(ev::Finished{}), LineWriter::Keep::always);
  EXPECT_EQ(keep_of(ev::WeightsDumped{}), LineWriter::Keep::always);
}

TEST(EventSinks, DroppedEventsAreNamedWithTheirCounts) {
  EXPECT_EQ(dropped_json({{"progress", 12}, {"task_ended", 3}}),
            "{\"event\": \"dropped\", \"events\": 15, \"kinds\": {\"progress\": 12, \"task_ended\": 3}}\n");
  EXPECT_EQ(dropped_text({{"progress", 12}, {"task_ended", 3}, {"warning", 1}}),
            "[rcsweep] stderr was not read in time: 4 events not shown (3 task_ended, 1 warning)\n");
  EXPECT_EQ(dropped_text({{"progress", 12}}), "");  // a progress line is replaced by the next
}

TEST(RunEvents, AFatalEventIsWrittenBeforeTheSinkReturns) {
  std::FILE* out = std::tmpfile();
  std::FILE* err = std::tmpfile();
  ASSERT_NE(out, nullptr);
  ASSERT_NE(err, nullptr);
  {
    RunEvents events({}, true, fileno(out), fileno(err));
    // Enough lines waiting that the writers are still at them when the sink returns, unless it
    // waits for them.
    for (std::uint64_t t = 0; t < 2000; ++t) events.sink()(ev::TaskEnded{t, "failed", "failed: an error"});
    events.sink()(ev::Fatal{1, "out of memory"});
    const std::string text = contents(fileno(err)), json = contents(fileno(out));
    const std::string said = "[rank 0/1] error: out of memory\n";
    EXPECT_EQ(text.substr(text.size() - std::min(text.size(), said.size())), said);
    const std::string line = "{\"event\": \"fatal\", \"ranks\": 1, \"message\": \"out of memory\"}\n";
    EXPECT_EQ(json.substr(json.size() - std::min(json.size(), line.size())), line);
  }
  std::fclose(out);
  std::fclose(err);
}

TEST(RunEvents, AStdoutWithoutReaderIsSaidOnStderrAndHoldsNothing) {
  int out[2];
  ASSERT_EQ(::pipe(out), 0);
  ::close(out[0]);  // the reader of stdout is gone
  std::FILE* err = std::tmpfile();
  ASSERT_NE(err, nullptr);
  {
    RunEvents events({}, true, out[1], fileno(err));
    ev::Started s;
    s.store = "s.h5";
    events.sink()(s);
    events.sink()(ev::TaskEnded{7, "diverged", "diverged at layer 3"});
    ev::Finished f;
    f.store = "s.h5";
    events.sink()(f);
    const auto o = events.close(std::chrono::seconds(10));
    EXPECT_EQ(o.error, EPIPE);
    EXPECT_EQ(o.lost, 3u);
    events.sink()(ev::Warning{"after close"});  // not written, nothing blocks
  }
  const std::string text = contents(fileno(err));
  std::fclose(err);
  ::close(out[1]);
  EXPECT_NE(text.find("[rcsweep] task 7 diverged at layer 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("[rcsweep] finished after"), std::string::npos) << text;
  EXPECT_NE(text.find("[rcsweep] note: 3 events were not written to stdout (its reader is gone)\n"), std::string::npos)
      << text;
  EXPECT_EQ(text.find("after close"), std::string::npos) << text;
}

}  // namespace
}  // namespace rcsweep::cli
