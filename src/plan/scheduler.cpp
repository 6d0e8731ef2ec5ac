// Cores per node as the batch scheduler reports them.
#include "plan/scheduler.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace rcsweep::plan {

int most_cores_per_node(Scheduler scheduler, std::string_view report) {
  static constexpr std::string_view ncpus = "resources_available.ncpus = ";
  int most = 0;
  while (!report.empty()) {
    const auto end = report.find('\n');
    std::string line(report.substr(0, end));
    report = end == std::string_view::npos ? std::string_view() : report.substr(end + 1);
    std::size_t at = 0;
    if (scheduler == Scheduler::pbs) {
      at = line.find(ncpus);
      if (at == std::string::npos) continue;
      at += ncpus.size();
    }
    most = std::max(most, std::atoi(line.c_str() + at));  // sinfo: "64", or "32+" where nodes differ
  }
  return most;
}

int scheduler_cores_per_node(Scheduler scheduler, const std::string& partition) {
  const bool slurm = scheduler == Scheduler::slurm;
  const std::string cmd = slurm ? "timeout 20 sinfo -h -o %c" +
                                      (partition.empty() ? std::string() : " -p " + shell_quote(partition))
                                : std::string("timeout 20 pbsnodes -a");
  FILE* pipe = ::popen((cmd + " 2>/dev/null").c_str(), "r");
  if (!pipe) return 0;
  std::string report;
  char buffer[512];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) report.append(buffer, n);
  ::pclose(pipe);
  return most_cores_per_node(scheduler, report);
}

}  // namespace rcsweep::plan
