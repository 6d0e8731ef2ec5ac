// Replays inputs through a fuzz harness's LLVMFuzzerTestOneInput without libFuzzer, so the seed
// corpus and every regression input are run by the normal (g++) test suite.
//   rcsweep_fuzz_replay_<name> PATH...   (files, or folders read recursively)
// Exit 0 when every input ran without breaking an invariant; a broken invariant aborts and names
// the input; exit 1 when no input was found (a wrong path must not pass as an empty success).
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz_check.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

namespace fs = std::filesystem;

// Copied out of current_input() before each run: the handler may only use async-signal-safe calls.
char g_input[4096];

extern "C" void on_fatal_signal(int sig) {
  const char head[] = "fuzz replay: fatal signal while running input ";
  (void)!::write(2, head, sizeof head - 1);
  (void)!::write(2, g_input, std::strlen(g_input));
  (void)!::write(2, "\n", 1);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

void on_terminate() {
  std::string what = "unknown exception";
  if (std::exception_ptr e = std::current_exception()) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      what = ex.what();
    } catch (...) {
    }
  }
  std::fprintf(stderr, "fuzz replay: uncaught exception on input %s: %s\n", g_input, what.c_str());
  std::fflush(stderr);
  std::abort();
}

void collect(const fs::path& p, std::vector<fs::path>& out) {
  if (fs::is_directory(p)) {
    for (const fs::directory_entry& e : fs::recursive_directory_iterator(p))
      if (e.is_regular_file() && e.path().filename() != "README.md") out.push_back(e.path());
  } else if (fs::is_regular_file(p)) {
    out.push_back(p);
  } else {
    std::fprintf(stderr, "fuzz replay: %s is neither a file nor a folder\n", p.c_str());
    std::exit(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::set_terminate(on_terminate);
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) std::signal(sig, on_fatal_signal);

  std::vector<fs::path> inputs;
  for (int i = 1; i < argc; ++i) collect(argv[i], inputs);
  std::sort(inputs.begin(), inputs.end());
  if (inputs.empty()) {
    std::fprintf(stderr, "fuzz replay: no inputs found (usage: %s FILE_OR_FOLDER...)\n", argv[0]);
    return 1;
  }
  for (const fs::path& p : inputs) {
    std::ifstream in(p, std::ios::binary);
    const std::vector<char> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    if (in.bad()) {
      std::fprintf(stderr, "fuzz replay: cannot read %s\n", p.c_str());
      return 1;
    }
    rcsweep::fuzz::current_input() = p.string();
    std::snprintf(g_input, sizeof g_input, "%s", p.c_str());
    LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
  }
  std::printf("fuzz replay: %zu inputs ran without a crash or a broken invariant\n", inputs.size());
  return 0;
}
