// libFuzzer harness: the safetensors header parser and its validation (checkpoint::SafetensorsFile::parse)
// and, on the same bytes as text, the config.json reader (checkpoint::ModelConfig::parse)
// (docs/FUZZING.md, docs/CHECKPOINTS.md). A ConfigError naming the file is the normal answer to a
// bad input. Everything else is a bug: a crash, a sanitizer report (a read outside the input), a
// hang, another exception (it escapes and aborts), or an accepted file that breaks what parse
// promises: tensors sorted by unique name, inside the data area, of exactly elements × dtype size
// bytes, not overlapping, each convertible one converting.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.hpp"
#include "checkpoint/model_config.hpp"
#include "checkpoint/safetensors.hpp"
#include "fuzz_check.hpp"

namespace {

using rcsweep::fuzz::fail;
namespace ck = rcsweep::checkpoint;

constexpr const char* file_name = "fuzz/model.safetensors";

void check_refusal(const rcsweep::ConfigError& e, const std::string& file) {
  if (e.issues().empty()) fail("ConfigError without any issue");
  for (const rcsweep::ConfigIssue& issue : e.issues()) {
    if (issue.problem.empty()) fail("ConfigError issue without a problem text");
    if (issue.key != file) fail("ConfigError issue names '" + issue.key + "', not the file " + file);
  }
}

void check_accepted(const ck::SafetensorsFile& file, std::size_t size) {
  const auto& tensors = file.tensors();
  if (file.file_bytes() != size) fail("file_bytes differs from the input's size");
  std::vector<std::pair<std::size_t, std::size_t>> ranges;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const ck::TensorInfo& t = tensors[i];
    if (i > 0 && !(tensors[i - 1].name < t.name)) fail("tensors not sorted by unique name");
    if (file.find(t.name) != &t) fail("find does not return the tensor of that name");
    if (t.end < t.begin || t.end - t.begin != t.elements * ck::dtype_size(t.dtype))
      fail("tensor size is not elements x dtype size");
    const std::span<const std::byte> raw = file.raw(t.name);
    if (raw.size() != t.end - t.begin) fail("raw size differs from data_offsets");
    std::size_t elements = 1;
    for (const std::size_t d : t.shape) elements *= d;
    if (elements != t.elements) fail("elements is not the product of the shape");
    if (t.end > t.begin) ranges.emplace_back(t.begin, t.end);
    if (ck::is_convertible(t.dtype)) {
      const std::vector<double> values = file.values(t.name);  // reads every byte of the tensor
      if (values.size() != t.elements) fail("values has the wrong size");
      if (t.shape.size() <= 2) {
        const rcsweep::Matrix m = file.matrix(t.name);
        if (m.size() != t.elements) fail("matrix has the wrong size");
      }
    } else {
      try {
        (void)file.values(t.name);
        fail("a non-float tensor converted");
      } catch (const rcsweep::ConfigError& e) {
        check_refusal(e, file.file());
      }
    }
  }
  std::sort(ranges.begin(), ranges.end());
  for (std::size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second) fail("accepted overlapping tensors");
  try {
    (void)file.tensor("\x01 no such tensor");
    fail("a missing tensor was found");
  } catch (const rcsweep::ConfigError& e) {
    check_refusal(e, file.file());
  }
}

// config.json: the typed accessors refuse or answer, never crash.
void check_config(std::string_view text) {
  try {
    const ck::ModelConfig config = ck::ModelConfig::parse(text, "fuzz/config.json");
    for (const char* key : {"hidden_size", "model_type", "layer_norm_eps", "architectures", "tie_word_embeddings"}) {
      try {
        (void)config.integer(key, 0);
        (void)config.number(key, 0.0);
        (void)config.string(key, "");
        (void)config.boolean(key, false);
        (void)config.strings(key);
      } catch (const rcsweep::ConfigError& e) {
        check_refusal(e, "fuzz/config.json");
      }
    }
  } catch (const rcsweep::ConfigError& e) {
    check_refusal(e, "fuzz/config.json");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // A copy of exactly `size` bytes, so that ASan sees any read past the end.
  const std::vector<std::byte> bytes(reinterpret_cast<const std::byte*>(data),
                                     reinterpret_cast<const std::byte*>(data) + size);
  try {
    const ck::SafetensorsFile file = ck::SafetensorsFile::parse(bytes, file_name);
    check_accepted(file, size);
  } catch (const rcsweep::ConfigError& e) {
    check_refusal(e, file_name);
  }
  check_config(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
