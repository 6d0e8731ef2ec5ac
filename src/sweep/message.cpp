#include "sweep/message.hpp"

#include <cstdint>
#include <cstring>

#include "base/error.hpp"

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

class Reader {
 public:
  explicit Reader(const std::vector<char>& buf) : buf_(buf) {}
  template <class T>
  T get() {
    T v;
    bytes(&v, sizeof(T));
    return v;
  }
  void bytes(void* out, std::size_t n) {
    if (pos_ + n > buf_.size()) throw Error("truncated task message");
    std::memcpy(out, buf_.data() + pos_, n);
    pos_ += n;
  }
  bool done() const { return pos_ == buf_.size(); }
  /// A count of items of at least `item_bytes` each that must still fit in the message (so a
  /// damaged count cannot make a huge allocation).
  std::uint64_t count(std::size_t item_bytes) {
    const auto n = get<std::uint64_t>();
    if (n > (buf_.size() - pos_) / item_bytes) throw Error("truncated task message");
    return n;
  }

 private:
  const std::vector<char>& buf_;
  std::size_t pos_ = 0;
};
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

std::vector<store::TaskResult> unpack(const std::vector<char>& buf) {
  std::vector<store::TaskResult> out;
  Reader in(buf);
  while (!in.done()) {
    store::TaskResult r;
    r.task = in.get<std::uint64_t>();
    r.status = static_cast<store::TaskStatus>(in.get<std::int8_t>());
    r.wall_s = in.get<double>();
    r.rank = in.get<std::int32_t>();
    r.message.resize(in.get<std::uint64_t>());
    in.bytes(r.message.data(), r.message.size());
    r.layers.resize(in.get<std::uint64_t>());
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

}  // namespace rcsweep::sweep
