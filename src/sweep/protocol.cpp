#include "sweep/protocol.hpp"

#include <cstring>
#include <string>
#include <utility>

#include "base/error.hpp"
#include "sweep/mpi.hpp"

namespace rcsweep::sweep {
namespace {

template <class T>
void put(std::vector<char>& buf, const T& v) {
  const auto* p = reinterpret_cast<const char*>(&v);
  buf.insert(buf.end(), p, p + sizeof(T));
}
void put_bytes(std::vector<char>& buf, const void* data, std::size_t n) {
  const auto* p = static_cast<const char*>(data);
  buf.insert(buf.end(), p, p + n);
}

/// Reads a buffer front to back; every read that would pass its end throws.
class Reader {
 public:
  explicit Reader(std::span<const char> buf) : buf_(buf) {}
  template <class T>
  T get() {
    T v;
    bytes(&v, sizeof(T));
    return v;
  }
  void bytes(void* out, std::size_t n) {
    if (n > buf_.size() - pos_) throw MpiError("truncated task message");
    if (n > 0) std::memcpy(out, buf_.data() + pos_, n);
    pos_ += n;
  }
  bool done() const { return pos_ == buf_.size(); }
  /// A count of items of at least `item_bytes` each that must still fit in the message (so a
  /// damaged count cannot make a huge allocation).
  std::uint64_t count(std::size_t item_bytes) {
    const auto n = get<std::uint64_t>();
    if (n > (buf_.size() - pos_) / item_bytes) throw MpiError("truncated task message");
    return n;
  }

 private:
  std::span<const char> buf_;
  std::size_t pos_ = 0;
};

/// A packed status byte, one of store::TaskStatus's values.
store::TaskStatus status_of(std::int8_t code) {
  if (code < static_cast<std::int8_t>(store::TaskStatus::pending) ||
      code > static_cast<std::int8_t>(store::TaskStatus::vanished))
    throw MpiError("a task message with unknown status " + std::to_string(code));
  return static_cast<store::TaskStatus>(code);
}

/// The bytes of the message of `tag` whose envelope MPI_Iprobe gave (`status`).
std::vector<char> receive(MPI_Comm comm, const MPI_Status& status, int tag) {
  int count = 0;
  mpi::check(MPI_Get_count(&status, MPI_BYTE, &count), "MPI_Get_count");
  std::vector<char> buf(static_cast<std::size_t>(count));
  mpi::check(MPI_Recv(buf.data(), count, MPI_BYTE, status.MPI_SOURCE, tag, comm, MPI_STATUS_IGNORE), "MPI_Recv");
  return buf;
}

/// Whether a message of `tag` from `source` has arrived (its envelope in `status`).
bool arrived(MPI_Comm comm, int source, int tag, MPI_Status& status) {
  int flag = 0;
  mpi::check(MPI_Iprobe(source, tag, comm, &flag, &status), "MPI_Iprobe");
  return flag != 0;
}

}  // namespace

void pack(const store::TaskResult& r, std::vector<char>& buf) {
  put(buf, r.task);
  put(buf, static_cast<std::int8_t>(r.status));
  put(buf, r.wall_s);
  put(buf, static_cast<std::int32_t>(r.rank));
  put(buf, static_cast<std::uint64_t>(r.message.size()));
  put_bytes(buf, r.message.data(), r.message.size());
  put(buf, static_cast<std::uint64_t>(r.layers.size()));
  put_bytes(buf, r.layers.data(), r.layers.size() * sizeof(r.layers[0]));
  for (const auto* per_layer : {&r.spectra, &r.mixer_sv, &r.mixer_eig_re, &r.mixer_eig_im}) {
    put(buf, static_cast<std::uint64_t>(per_layer->size()));
    for (const auto& s : *per_layer) {
      put(buf, static_cast<std::uint64_t>(s.size()));
      put_bytes(buf, s.data(), s.size() * sizeof(double));
    }
  }
  put_bytes(buf, r.theory.data(), sizeof(r.theory));  // fixed size: models::n_theory doubles
  for (const auto* v : {&r.grad_log10, &r.grad_stderr}) {
    put(buf, static_cast<std::uint64_t>(v->size()));
    put_bytes(buf, v->data(), v->size() * sizeof(double));
  }
}

std::vector<store::TaskResult> unpack(std::span<const char> bytes) {
  std::vector<store::TaskResult> out;
  Reader in(bytes);
  while (!in.done()) {
    store::TaskResult r;
    r.task = in.get<std::uint64_t>();
    r.status = status_of(in.get<std::int8_t>());
    r.wall_s = in.get<double>();
    r.rank = in.get<std::int32_t>();
    r.message.resize(in.count(1));
    in.bytes(r.message.data(), r.message.size());
    r.layers.resize(in.count(sizeof(r.layers[0])));
    in.bytes(r.layers.data(), r.layers.size() * sizeof(r.layers[0]));
    for (auto* per_layer : {&r.spectra, &r.mixer_sv, &r.mixer_eig_re, &r.mixer_eig_im}) {
      per_layer->resize(in.count(sizeof(std::uint64_t)));
      for (auto& s : *per_layer) {
        s.resize(in.count(sizeof(double)));
        in.bytes(s.data(), s.size() * sizeof(double));
      }
    }
    in.bytes(r.theory.data(), sizeof(r.theory));
    for (auto* v : {&r.grad_log10, &r.grad_stderr}) {
      v->resize(in.count(sizeof(double)));
      in.bytes(v->data(), v->size() * sizeof(double));
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<char> encode_results(std::int32_t signal, const std::vector<store::TaskResult>& results) {
  std::vector<char> buf(sizeof signal);  // (put() into an empty vector trips GCC 12's -Wstringop-overflow)
  std::memcpy(buf.data(), &signal, sizeof signal);
  for (const auto& r : results) pack(r, buf);
  return buf;
}

ResultMessage decode_results(std::span<const char> bytes) {
  ResultMessage m;
  if (bytes.size() < sizeof m.signal) throw MpiError("a worker's result message has no header");
  std::memcpy(&m.signal, bytes.data(), sizeof m.signal);
  m.results = unpack(bytes.subspan(sizeof m.signal));
  return m;
}

std::vector<char> encode_assignment(const TaskList& tasks) {
  std::vector<char> buf;
  put_bytes(buf, tasks.data(), tasks.size() * sizeof(tasks[0]));
  return buf;
}

TaskList decode_assignment(std::span<const char> bytes) {
  if (bytes.size() % sizeof(TaskList::value_type) != 0)
    throw MpiError("an assignment of " + std::to_string(bytes.size()) + " bytes is not a whole number of task ids");
  TaskList tasks(bytes.size() / sizeof(TaskList::value_type));
  if (!bytes.empty()) std::memcpy(tasks.data(), bytes.data(), bytes.size());
  return tasks;
}

ResultSend::ResultSend(MPI_Comm comm, std::vector<char> bytes)
    : bytes_(std::make_unique<std::vector<char>>(std::move(bytes))) {
  mpi::check(MPI_Isend(bytes_->data(), static_cast<int>(bytes_->size()), MPI_BYTE, 0, tag_result, comm, &request_),
             "MPI_Isend");
}

ResultSend::~ResultSend() {
  if (!done_) (void)bytes_.release();  // the send may still read them: leave them to MPI
}

bool ResultSend::done() {
  if (done_) return true;
  int flag = 0;
  mpi::check(MPI_Test(&request_, &flag, MPI_STATUS_IGNORE), "MPI_Test");
  done_ = flag != 0;
  return done_;
}

ResultSend send_results(MPI_Comm comm, std::int32_t signal, const std::vector<store::TaskResult>& results) {
  return ResultSend(comm, encode_results(signal, results));
}

void send_beat(MPI_Comm comm) {
  MPI_Request request;
  mpi::check(MPI_Isend(nullptr, 0, MPI_BYTE, 0, tag_beat, comm, &request), "MPI_Isend");
  mpi::check(MPI_Request_free(&request), "MPI_Request_free");
}

std::optional<TaskList> poll_assignment(MPI_Comm comm) {
  MPI_Status status;
  if (!arrived(comm, 0, tag_assign, status)) return std::nullopt;
  return decode_assignment(receive(comm, status, tag_assign));
}

bool take_cancel(MPI_Comm comm) {
  MPI_Status status;
  if (!arrived(comm, 0, tag_cancel, status)) return false;
  mpi::check(MPI_Recv(nullptr, 0, MPI_BYTE, 0, tag_cancel, comm, MPI_STATUS_IGNORE), "MPI_Recv");
  return true;
}

std::optional<FromWorker> poll_results(MPI_Comm comm) {
  MPI_Status status;
  if (!arrived(comm, MPI_ANY_SOURCE, tag_result, status)) return std::nullopt;
  return FromWorker{status.MPI_SOURCE, decode_results(receive(comm, status, tag_result))};
}

void send_assignment(MPI_Comm comm, int rank, const TaskList& tasks) {
  const auto bytes = encode_assignment(tasks);
  mpi::check(MPI_Send(bytes.data(), static_cast<int>(bytes.size()), MPI_BYTE, rank, tag_assign, comm), "MPI_Send");
}

void send_cancel(MPI_Comm comm, int rank) {
  mpi::check(MPI_Send(nullptr, 0, MPI_BYTE, rank, tag_cancel, comm), "MPI_Send");
}

std::vector<int> take_beats(MPI_Comm comm) {
  std::vector<int> from;
  MPI_Status status;
  while (arrived(comm, MPI_ANY_SOURCE, tag_beat, status)) {
    mpi::check(MPI_Recv(nullptr, 0, MPI_BYTE, status.MPI_SOURCE, tag_beat, comm, MPI_STATUS_IGNORE), "MPI_Recv");
    from.push_back(status.MPI_SOURCE);
  }
  return from;
}

}  // namespace rcsweep::sweep
