// Reading a plain matrix from an HDF5 file (the input = "file" of a sweep). Only src/store uses
// HDF5; the CLI calls this and attaches the result to the sweep spec.
#pragma once
#include <filesystem>
#include <string>

#include "base/matrix.hpp"

namespace rcsweep::store {

/// The 2-D dataset `dataset` of the HDF5 file `path` as a float64 matrix (rows x columns as
/// stored, row-major). Integer and float datasets of any width are converted by HDF5. Throws
/// StoreError naming the file and dataset when the file is missing or not HDF5, the dataset is
/// missing or not a dataset, its rank is not 2, it is empty, its type is not numeric, or a value
/// is not finite.
Matrix read_matrix(const std::filesystem::path& path, const std::string& dataset);

}  // namespace rcsweep::store
