// The task farm's protocol: every message between rank 0's service thread (service.hpp) and the
// worker ranks (worker.hpp), its tag, its layout, and the calls that send and receive it. No
// other source file makes a point-to-point MPI call (a test checks). The layouts are pure
// functions on bytes (encode_* / decode_*, pack / unpack), tested without mpiexec
// (tests/unit/sweep/test_protocol.cpp).
//
// The messages, all sent on the run's communicator as MPI_BYTE (numbers in the host's byte order
// and without padding: every rank runs the same binary):
//
//   tag_result  worker -> 0  int32 header, then zero or more packed tasks (pack): the results of
//                            the worker's last unit, and its request for the next. The header is 0,
//                            the worker's stop signal (> 0), or `leaving` (its launcher is gone:
//                            its last message, not answered).
//   tag_assign  0 -> worker  the next unit's task ids, uint64 each (the count is the length / 8);
//                            none: stop. Answers every tag_result except a `leaving` one.
//   tag_cancel  0 -> worker  no bytes: abandon the running unit (the grace period is over).
//   tag_beat    worker -> 0  no bytes: a heartbeat, at most every beat_s while the worker computes
//                            or waits. Never waited for.
//
// A packed task (one store::TaskResult but its platform, which rank 0 fills in):
//   task u64 | status i8 | wall_s f64 | rank i32 | message: u64 length, bytes |
//   layers: u64 count, count x metrics::LayerRow (n_metrics f64 each) |
//   spectra, mixer_sv, mixer_eig_re, mixer_eig_im: each a u64 layer count, then per layer a u64
//   count and the f64 values | theory: models::n_theory f64 | grad_log10, grad_stderr: each a u64
//   count and the f64 values.
//
// Decoding refuses a malformed buffer (cut short, a count larger than what is left, an unknown
// status, a partial task id) with an MpiError, never reading past its end.
#pragma once
#include <mpi.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "store/store.hpp"
#include "sweep/farm.hpp"

namespace rcsweep::sweep {

constexpr int tag_result = 11;
constexpr int tag_assign = 12;
constexpr int tag_cancel = 13;
constexpr int tag_beat = 14;

/// Seconds between two heartbeats of a worker, at least.
constexpr double beat_s = 1.0;
/// The result header in place of a stop signal: the worker's launcher is gone, it exits now.
constexpr std::int32_t leaving = -1;

// --- layouts (no MPI) ---

/// Append the bytes of `r` (its platform excepted) to `buf`.
void pack(const store::TaskResult& r, std::vector<char>& buf);
/// Every task in `bytes`, as written by one or more pack() calls (none: empty). Throws MpiError
/// on a malformed buffer.
std::vector<store::TaskResult> unpack(std::span<const char> bytes);

/// A worker's result message, decoded.
struct ResultMessage {
  std::int32_t signal = 0;                 ///< 0, the worker's stop signal, or `leaving`
  std::vector<store::TaskResult> results;  ///< of its last unit (none: its first request, or leaving)
};
/// The bytes of a result message: `signal`, then `results` packed.
std::vector<char> encode_results(std::int32_t signal, const std::vector<store::TaskResult>& results);
/// Throws MpiError when `bytes` has no header or its tasks are malformed.
ResultMessage decode_results(std::span<const char> bytes);

/// The bytes of an assignment: the task ids (empty: stop).
std::vector<char> encode_assignment(const TaskList& tasks);
/// Throws MpiError when `bytes` is not a whole number of task ids.
TaskList decode_assignment(std::span<const char> bytes);

// --- a worker's side (rank 0 is its peer) ---

/// A result message on its way to rank 0 (an MPI_Isend of bytes this object owns). Destroyed
/// before the send was seen complete (given up: rank 0 may be gone), its bytes are left to MPI,
/// which may still read them, and never freed.
class ResultSend {
 public:
  ResultSend(MPI_Comm comm, std::vector<char> bytes);
  ~ResultSend();
  ResultSend(const ResultSend&) = delete;
  ResultSend& operator=(const ResultSend&) = delete;
  /// Whether rank 0 has taken the message (MPI_Test; never blocks). Throws MpiError.
  bool done();

 private:
  std::unique_ptr<std::vector<char>> bytes_;
  MPI_Request request_ = MPI_REQUEST_NULL;
  bool done_ = false;
};

/// Start sending a result message to rank 0. Throws MpiError.
ResultSend send_results(MPI_Comm comm, std::int32_t signal, const std::vector<store::TaskResult>& results);
/// Send a heartbeat to rank 0 without waiting for it to arrive. Throws MpiError.
void send_beat(MPI_Comm comm);
/// Rank 0's next assignment if one has arrived (never blocks). Throws MpiError.
std::optional<TaskList> poll_assignment(MPI_Comm comm);
/// Receive a cancel from rank 0 if one has arrived; whether one had. Throws MpiError.
bool take_cancel(MPI_Comm comm);

// --- rank 0's side ---

/// A result message and the worker rank it came from.
struct FromWorker {
  int rank = 0;
  ResultMessage message;
};
/// The next result message from any worker if one has arrived (never blocks). Throws MpiError.
std::optional<FromWorker> poll_results(MPI_Comm comm);
/// Send worker `rank` its next unit (empty: stop); returns once the bytes are handed to MPI. Throws MpiError.
void send_assignment(MPI_Comm comm, int rank, const TaskList& tasks);
/// Tell worker `rank` to abandon its running unit. Throws MpiError.
void send_cancel(MPI_Comm comm, int rank);
/// Receive every heartbeat that has arrived; the rank of each (in arrival order). Throws MpiError.
std::vector<int> take_beats(MPI_Comm comm);

}  // namespace rcsweep::sweep
