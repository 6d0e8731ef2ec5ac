// The farm's messages without mpiexec (sweep/protocol.hpp): every message packed and unpacked
// gives the same values bitwise (a finished task's every field, the theory row and NaN payloads
// included; the result header; a unit's task ids), the layout is the documented one, and a cut,
// damaged or foreign buffer is refused, never read past its end.
#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/error.hpp"
#include "models/theory.hpp"
#include "store/store.hpp"
#include "sweep/protocol.hpp"

using namespace rcsweep;

namespace {
bool same_bits(double a, double b) { return std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b); }

store::TaskResult sample(std::uint64_t t) {
  store::TaskResult r;
  r.task = t;
  r.status = t == 1 ? store::TaskStatus::diverged : store::TaskStatus::done;
  r.wall_s = 0.5 + static_cast<double>(t);
  r.rank = static_cast<int>(t) + 2;
  r.message = t == 1 ? "diverged at layer 1: non-finite X" : "";
  for (int l = 0; l < 3; ++l) {
    metrics::LayerRow row{};
    for (std::size_t k = 0; k < row.size(); ++k)
      row[k] = static_cast<double>(t) + 0.1 * l + 1e-3 * static_cast<double>(k);
    r.layers.push_back(row);
    r.spectra.push_back(l == 2 ? std::vector<double>{0.9, 0.4, 1e-300} : std::vector<double>{});
    // mixer spectra at layers 1 and 2 (never layer 0); task 1 diverged: layer 1 only
    const bool mixer = l >= 1 && (t != 1 || l == 1);
    r.mixer_sv.push_back(mixer ? std::vector<double>{1.0 + static_cast<double>(t), 0.25 * l, 0.0}
                               : std::vector<double>{});
    r.mixer_eig_re.push_back(mixer ? std::vector<double>{1.0, -0.125, -0.125} : std::vector<double>{});
    r.mixer_eig_im.push_back(mixer
                                 ? std::vector<double>{0.0, 0.5 + static_cast<double>(t), -0.5 - static_cast<double>(t)}
                                 : std::vector<double>{});
  }
  if (t == 0) r.mixer_sv[2][2] = std::bit_cast<double>(std::uint64_t{0x7ff8000000000456});  // NaN payload
  for (std::size_t k = 0; k < r.theory.size(); ++k)
    r.theory[k] = static_cast<double>(t) * 10.0 + static_cast<double>(k) + 1.0 / 3.0;
  r.theory[4] = std::bit_cast<double>(std::uint64_t{0x7ff8000000000123});  // NaN with a payload
  r.theory[6] = -0.0;
  if (t != 1)  // gradient norms (task 1 diverged: none)
    for (int i = 0; i < 6; ++i) {
      r.grad_log10.push_back(static_cast<double>(t) + 1.0 / (i + 3.0));
      r.grad_stderr.push_back(i == 2 ? std::numeric_limits<double>::quiet_NaN() : 1e-3 * i);
    }
  return r;
}

store::TaskResult failed_task() {  // no layers, theory all NaN by default
  store::TaskResult r;
  r.task = 7;
  r.status = store::TaskStatus::failed;
  r.message = "failed: boom";
  return r;
}

void expect_same(const store::TaskResult& a, const store::TaskResult& b) {
  EXPECT_EQ(a.task, b.task);
  EXPECT_EQ(a.status, b.status);
  EXPECT_TRUE(same_bits(a.wall_s, b.wall_s));
  EXPECT_EQ(a.rank, b.rank);
  EXPECT_EQ(a.message, b.message);
  ASSERT_EQ(a.layers.size(), b.layers.size());
  for (std::size_t l = 0; l < a.layers.size(); ++l)
    for (std::size_t k = 0; k < a.layers[l].size(); ++k) EXPECT_TRUE(same_bits(a.layers[l][k], b.layers[l][k]));
  EXPECT_EQ(a.spectra, b.spectra);
  const auto same_spectra = [](const std::vector<std::vector<double>>& x, const std::vector<std::vector<double>>& y) {
    if (x.size() != y.size()) return false;
    for (std::size_t l = 0; l < x.size(); ++l) {
      if (x[l].size() != y[l].size()) return false;
      for (std::size_t i = 0; i < x[l].size(); ++i)
        if (!same_bits(x[l][i], y[l][i])) return false;
    }
    return true;
  };
  EXPECT_TRUE(same_spectra(a.mixer_sv, b.mixer_sv)) << "task " << a.task;
  EXPECT_TRUE(same_spectra(a.mixer_eig_re, b.mixer_eig_re)) << "task " << a.task;
  EXPECT_TRUE(same_spectra(a.mixer_eig_im, b.mixer_eig_im)) << "task " << a.task;
  for (std::size_t k = 0; k < models::n_theory; ++k)
    EXPECT_TRUE(same_bits(a.theory[k], b.theory[k])) << "task " << a.task << " theory " << models::theory_names[k];
  ASSERT_EQ(a.grad_log10.size(), b.grad_log10.size());
  ASSERT_EQ(a.grad_stderr.size(), b.grad_stderr.size());
  for (std::size_t i = 0; i < a.grad_log10.size(); ++i) EXPECT_TRUE(same_bits(a.grad_log10[i], b.grad_log10[i]));
  for (std::size_t i = 0; i < a.grad_stderr.size(); ++i) EXPECT_TRUE(same_bits(a.grad_stderr[i], b.grad_stderr[i]));
}

template <class T>
T read_at(const std::vector<char>& buf, std::size_t at) {
  T v;
  std::memcpy(&v, buf.data() + at, sizeof v);
  return v;
}
}  // namespace

// --- a finished task's bytes (pack / unpack) ---

TEST(Protocol, TaskRoundTripKeepsEveryFieldBitwise) {
  const std::vector<store::TaskResult> in = {sample(0), sample(1), failed_task()};
  std::vector<char> buf;
  for (const auto& r : in) sweep::pack(r, buf);
  const auto out = sweep::unpack(buf);
  ASSERT_EQ(out.size(), in.size());
  for (std::size_t i = 0; i < in.size(); ++i) expect_same(in[i], out[i]);
  for (double x : out[2].theory) EXPECT_TRUE(std::isnan(x));
  EXPECT_TRUE(sweep::unpack(std::vector<char>{}).empty());
}

TEST(Protocol, TheoryIsAFixedNumberOfDoubles) {
  store::TaskResult r;
  std::vector<char> empty_theory, with_theory;
  sweep::pack(r, empty_theory);
  r.theory.fill(1.0);
  sweep::pack(r, with_theory);
  EXPECT_EQ(empty_theory.size(), with_theory.size());
  static_assert(sizeof(store::TaskResult::theory) == models::n_theory * sizeof(double));
  static_assert(models::n_theory == 8);  // C_M, S, lambda_min, a_star, b, bound_applies, bound_holds, bound_reason
}

TEST(Protocol, TaskLayoutIsTheDocumentedOne) {
  // task u64, status i8, wall_s f64, rank i32, message (u64 length + bytes), layers (u64 count +
  // rows), spectra, mixer_sv, mixer_eig_re, mixer_eig_im (u64 count, then per layer u64 + f64s),
  // theory (n_theory f64), grad_log10 and grad_stderr (u64 count + f64s); no padding.
  store::TaskResult r = failed_task();
  r.wall_s = 2.5;
  r.rank = 3;
  std::vector<char> buf;
  sweep::pack(r, buf);
  const std::size_t msg = r.message.size();
  EXPECT_EQ(buf.size(), 8 + 1 + 8 + 4 + (8 + msg) + 8 + 4 * 8 + models::n_theory * 8 + 2 * 8);
  EXPECT_EQ(read_at<std::uint64_t>(buf, 0), 7u);
  EXPECT_EQ(read_at<std::int8_t>(buf, 8), static_cast<std::int8_t>(store::TaskStatus::failed));
  EXPECT_EQ(read_at<double>(buf, 9), 2.5);
  EXPECT_EQ(read_at<std::int32_t>(buf, 17), 3);
  EXPECT_EQ(read_at<std::uint64_t>(buf, 21), msg);
  EXPECT_EQ(std::string(buf.data() + 29, msg), r.message);
}

TEST(Protocol, TruncatedTheoryIsRefused) {
  std::vector<char> buf;
  sweep::pack(sample(3), buf);
  buf.resize(buf.size() - sizeof(double));
  EXPECT_THROW(sweep::unpack(buf), MpiError);
}

TEST(Protocol, MixerSpectraRoundTripAndDamagedCountsAreRefused) {
  const auto r = sample(0);
  ASSERT_FALSE(r.mixer_sv[2].empty());
  std::vector<char> buf;
  sweep::pack(r, buf);
  const auto out = sweep::unpack(buf);
  ASSERT_EQ(out.size(), 1u);
  expect_same(r, out[0]);
  EXPECT_TRUE(std::isnan(out[0].mixer_sv[2][2]));
  // Every cut of the message is refused, never read past its end.
  for (std::size_t n = 1; n < buf.size(); ++n) {
    std::vector<char> cut(buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(n));
    EXPECT_THROW(sweep::unpack(cut), MpiError) << n;
  }
  // A huge per-layer count (damaged message) is refused instead of allocating.
  store::TaskResult plain;
  plain.mixer_sv = {{1.0}};
  std::vector<char> one;
  sweep::pack(plain, one);
  const std::uint64_t huge = std::uint64_t{1} << 60;
  // layout of `plain`: task(8) status(1) wall(8) rank(4) msg len(8) layers count(8) spectra count(8)
  // mixer_sv count(8) ...
  const std::size_t at = 8 + 1 + 8 + 4 + 8 + 8 + 8;
  ASSERT_EQ(read_at<std::uint64_t>(one, at), 1u);
  std::memcpy(one.data() + at, &huge, sizeof huge);
  EXPECT_THROW(sweep::unpack(one), MpiError);
}

TEST(Protocol, UnknownStatusIsRefused) {
  std::vector<char> buf;
  sweep::pack(failed_task(), buf);
  for (const std::int8_t status : {std::int8_t{6}, std::int8_t{-1}, std::int8_t{100}}) {
    std::memcpy(buf.data() + 8, &status, 1);
    EXPECT_THROW(sweep::unpack(buf), MpiError) << int{status};
  }
  const auto vanished = static_cast<std::int8_t>(store::TaskStatus::vanished);
  std::memcpy(buf.data() + 8, &vanished, 1);
  EXPECT_EQ(sweep::unpack(buf).at(0).status, store::TaskStatus::vanished);
}

// --- worker -> 0, tag_result: int32 header, then packed tasks ---

TEST(Protocol, ResultMessageRoundTrip) {
  const std::vector<store::TaskResult> results = {sample(0), failed_task(), sample(1)};
  for (const std::int32_t signal : {std::int32_t{0}, std::int32_t{15}, sweep::leaving}) {
    const auto bytes = sweep::encode_results(signal, results);
    // The header, then exactly the tasks' own bytes.
    std::vector<char> tasks;
    for (const auto& r : results) sweep::pack(r, tasks);
    ASSERT_EQ(bytes.size(), sizeof(std::int32_t) + tasks.size());
    EXPECT_EQ(read_at<std::int32_t>(bytes, 0), signal);
    EXPECT_TRUE(std::equal(tasks.begin(), tasks.end(), bytes.begin() + sizeof(std::int32_t)));
    const auto back = sweep::decode_results(bytes);
    EXPECT_EQ(back.signal, signal);
    ASSERT_EQ(back.results.size(), results.size());
    for (std::size_t i = 0; i < results.size(); ++i) expect_same(results[i], back.results[i]);
  }
  // A request without results (a worker's first, or its last when leaving): the header alone.
  const auto bare = sweep::encode_results(sweep::leaving, {});
  EXPECT_EQ(bare.size(), sizeof(std::int32_t));
  const auto back = sweep::decode_results(bare);
  EXPECT_EQ(back.signal, sweep::leaving);
  EXPECT_TRUE(back.results.empty());
}

TEST(Protocol, ResultMessageWithoutHeaderOrCutIsRefused) {
  EXPECT_THROW(sweep::decode_results(std::vector<char>{}), MpiError);
  EXPECT_THROW(sweep::decode_results(std::vector<char>(3, 0)), MpiError);
  const auto bytes = sweep::encode_results(0, {sample(2)});
  for (std::size_t n = 0; n < bytes.size(); ++n)
    if (n != sizeof(std::int32_t)) {  // the header alone is a valid message
      std::vector<char> cut(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
      EXPECT_THROW(sweep::decode_results(cut), MpiError) << n;
    }
}

// --- 0 -> worker, tag_assign: the unit's task ids ---

TEST(Protocol, AssignmentRoundTrip) {
  for (const sweep::TaskList& tasks :
       {sweep::TaskList{}, sweep::TaskList{0}, sweep::TaskList{5, 3, 9, std::uint64_t{1} << 40}}) {
    const auto bytes = sweep::encode_assignment(tasks);
    ASSERT_EQ(bytes.size(), tasks.size() * sizeof(std::uint64_t));  // u64 ids, nothing else
    for (std::size_t i = 0; i < tasks.size(); ++i) EXPECT_EQ(read_at<std::uint64_t>(bytes, 8 * i), tasks[i]);
    EXPECT_EQ(sweep::decode_assignment(bytes), tasks);
  }
}

TEST(Protocol, AssignmentOfPartialIdsIsRefused) {
  auto bytes = sweep::encode_assignment({1, 2});
  for (const std::size_t n : {std::size_t{1}, std::size_t{7}, std::size_t{9}, std::size_t{15}}) {
    std::vector<char> cut(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
    EXPECT_THROW(sweep::decode_assignment(cut), MpiError) << n;
  }
}

// --- one file ---

namespace {
/// "file: call" for every point-to-point MPI call in the .cpp and .hpp files under `root`, except
/// in `allowed` (relative to `root`).
std::vector<std::string> point_to_point_calls(const std::filesystem::path& root, const std::filesystem::path& allowed) {
  static const char* calls[] = {"MPI_Send(",   "MPI_Isend(",   "MPI_Ssend(", "MPI_Issend(",    "MPI_Bsend(",
                                "MPI_Rsend(",  "MPI_Recv(",    "MPI_Irecv(", "MPI_Probe(",     "MPI_Iprobe(",
                                "MPI_Mprobe(", "MPI_Improbe(", "MPI_Mrecv(", "MPI_Get_count(", "MPI_Sendrecv("};
  std::vector<std::string> found;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(root)) {
    const auto ext = entry.path().extension();
    if (!entry.is_regular_file() || (ext != ".cpp" && ext != ".hpp")) continue;
    const auto relative = entry.path().lexically_relative(root);
    if (relative == allowed) continue;
    std::ifstream in(entry.path());
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (const char* call : calls)
      if (text.find(call) != std::string::npos) found.push_back(relative.string() + ": " + call);
  }
  return found;
}
}  // namespace

TEST(Protocol, NoOtherSourceMakesAPointToPointCall) {
  // The scanner sees a call where there is one ...
  const auto fixture = std::filesystem::temp_directory_path() / ("rcsweep_protocol_scan_" + std::to_string(::getpid()));
  std::filesystem::create_directories(fixture / "sweep");
  std::ofstream(fixture / "sweep" / "protocol.cpp") << "MPI_Send(nullptr, 0, MPI_BYTE, 1, 11, comm);";
  std::ofstream(fixture / "sweep" / "service.cpp") << "x = 1;\nmpi::check(MPI_Iprobe(0, 12, comm, &f, &s));";
  const auto seen = point_to_point_calls(fixture, "sweep/protocol.cpp");
  std::filesystem::remove_all(fixture);
  EXPECT_EQ(seen, std::vector<std::string>{"sweep/service.cpp: MPI_Iprobe("});
  // ... and the farm's messages are sent and received in sweep/protocol.cpp alone.
  EXPECT_EQ(point_to_point_calls(std::filesystem::path(RCSWEEP_SOURCE_DIR) / "src", "sweep/protocol.cpp"),
            std::vector<std::string>{});
}

// --- the tags ---

TEST(Protocol, TagsAreDistinctAndValid) {
  const std::set<int> tags = {sweep::tag_result, sweep::tag_assign, sweep::tag_cancel, sweep::tag_beat};
  EXPECT_EQ(tags.size(), 4u);
  for (const int t : tags) {
    EXPECT_GE(t, 0);
    EXPECT_LE(t, 32767);  // the least MPI_TAG_UB the standard allows
  }
  EXPECT_LT(sweep::leaving, 0);  // never a signal number
}
