#include "store/matrix_file.hpp"

#include <cmath>
#include <system_error>

#include "base/error.hpp"
#include "store/hdf5.hpp"

namespace rcsweep::store {

Matrix read_matrix(const std::filesystem::path& path, const std::string& dataset) {
  h5::init();
  std::string where = path.string();  // quoted by appending (GCC 12 warns falsely on "'" + s)
  where.insert(where.begin(), '\'');
  where.push_back('\'');
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw StoreError("input file " + where + " does not exist");
  if (!std::filesystem::is_regular_file(path, ec)) throw StoreError("input file " + where + " is not a regular file");
  if (H5Fis_hdf5(path.c_str()) <= 0) {
    h5::error_text();  // clear the stack
    throw StoreError("input file " + where + " is not an HDF5 file");
  }
  if (dataset.empty() || dataset == "/") throw StoreError("no dataset name given for input file " + where);
  const h5::Handle file = h5::open_file(path, false, false);
  // H5Lexists needs every intermediate group to exist: walk the path one link at a time.
  std::string prefix;
  std::size_t start = dataset.front() == '/' ? 1 : 0;
  while (start <= dataset.size()) {
    const std::size_t slash = dataset.find('/', start);
    prefix = dataset.substr(0, slash);
    if (!h5::link_exists(file.id(), prefix))
      throw StoreError("input file " + where + " has no dataset '" + dataset + "'" +
                       (prefix != dataset && prefix != "/" + dataset ? " (no '" + prefix + "')" : ""));
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  {
    const h5::Handle object(H5Oopen(file.id(), dataset.c_str(), H5P_DEFAULT), "cannot open '" + dataset + "'");
    if (H5Iget_type(object.id()) != H5I_DATASET)
      throw StoreError("'" + dataset + "' in input file " + where + " is not a dataset (a group or a named type)");
  }
  const h5::Handle dset = h5::open_dataset(file.id(), dataset);
  const auto dims = h5::dataset_dims(dset.id());
  if (dims.size() != 2) {
    std::string shape;
    for (const auto n : dims) shape += (shape.empty() ? "" : " x ") + std::to_string(n);
    throw StoreError("dataset '" + dataset + "' in input file " + where + " has rank " + std::to_string(dims.size()) +
                     (shape.empty() ? std::string(" (a scalar)") : " (" + shape + ")") +
                     ", expected a 2-D T x d matrix");
  }
  if (dims[0] == 0 || dims[1] == 0)
    throw StoreError("dataset '" + dataset + "' in input file " + where + " is empty (" + std::to_string(dims[0]) +
                     " x " + std::to_string(dims[1]) + ")");
  const h5::Handle type(H5Dget_type(dset.id()), "H5Dget_type");
  const H5T_class_t cls = H5Tget_class(type.id());
  if (cls != H5T_FLOAT && cls != H5T_INTEGER)
    throw StoreError("dataset '" + dataset + "' in input file " + where + " is not numeric (expected float64)");
  Matrix X(static_cast<std::size_t>(dims[0]), static_cast<std::size_t>(dims[1]));
  h5::read_all(dset.id(), H5T_NATIVE_DOUBLE, X.data());
  for (std::size_t i = 0; i < X.size(); ++i)
    if (!std::isfinite(X.data()[i]))
      throw StoreError("dataset '" + dataset + "' in input file " + where + " has a non-finite value at [" +
                       std::to_string(i / X.cols()) + ", " + std::to_string(i % X.cols()) + "]");
  return X;
}

}  // namespace rcsweep::store
