// The status column of /tasks, read for the store and the weights dump (module-internal: HDF5 ids).
#pragma once
#include <hdf5.h>

#include <cstdint>
#include <vector>

#include "store/store.hpp"

namespace rcsweep::store {

/// Every task's status from the /tasks dataset `tasks`; throws StoreError when it does not have
/// `n_tasks` rows or holds an invalid status.
std::vector<TaskStatus> read_status_column(hid_t tasks, std::uint64_t n_tasks);

}  // namespace rcsweep::store
