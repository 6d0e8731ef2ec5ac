// Human-readable quantities for messages: "634.4 MiB", "3.8 min".
#pragma once
#include <cstdio>
#include <string>

namespace rcsweep {

/// Bytes with a binary unit, one decimal: "40.0 MiB".
inline std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) {
    b /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", b, units[u]);
  return buf;
}

/// Seconds as s (under 2 min), min (under 2 h) or h, one decimal.
inline std::string human_seconds(double s) {
  char buf[32];
  if (s < 120)
    std::snprintf(buf, sizeof buf, "%.1f s", s);
  else if (s < 7200)
    std::snprintf(buf, sizeof buf, "%.1f min", s / 60);
  else
    std::snprintf(buf, sizeof buf, "%.1f h", s / 3600);
  return buf;
}

}  // namespace rcsweep
