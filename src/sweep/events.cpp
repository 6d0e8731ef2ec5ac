#include "sweep/events.hpp"

#include <type_traits>

namespace rcsweep::sweep {

const char* event_name(const Event& e) {
  return std::visit(
      [](const auto& x) -> const char* {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, event::WaitingForStore>)
          return "waiting_for_store";
        else if constexpr (std::is_same_v<T, event::StoreGrown>)
          return "store_grown";
        else if constexpr (std::is_same_v<T, event::NoFlock>)
          return "no_flock";
        else if constexpr (std::is_same_v<T, event::Reused>)
          return "reused";
        else if constexpr (std::is_same_v<T, event::KernelsDiffer>)
          return "kernels_differ";
        else if constexpr (std::is_same_v<T, event::Started>)
          return "started";
        else if constexpr (std::is_same_v<T, event::Warning>)
          return "warning";
        else if constexpr (std::is_same_v<T, event::Progress>)
          return "progress";
        else if constexpr (std::is_same_v<T, event::TaskEnded>)
          return "task_ended";
        else if constexpr (std::is_same_v<T, event::Paused>)
          return "paused";
        else if constexpr (std::is_same_v<T, event::Stopping>)
          return "stopping";
        else if constexpr (std::is_same_v<T, event::LauncherGone>)
          return "launcher_gone";
        else if constexpr (std::is_same_v<T, event::RankLost>)
          return "rank_lost";
        else if constexpr (std::is_same_v<T, event::Finished>)
          return "finished";
        else {
          static_assert(std::is_same_v<T, event::WeightsDumped>);
          return "weights_dumped";
        }
      },
      e);
}

}  // namespace rcsweep::sweep
