// The text and JSON forms of a run's events (cli/run_events.hpp): the text is what rank 0 has
// always printed, the JSON one object per line with every field.
#include "cli/run_events.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <memory>
#include <set>
#include <string>
#include <variant>

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
  EXPECT_NE(event_text(ev::NoFlock{"a.h5", true}, quiet).find("warning: the file system of a.h5 has no flock and HDF5's"),
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
