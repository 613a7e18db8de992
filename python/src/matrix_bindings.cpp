// resurgo._core.ConvergentMatrixFloat32 / ConvergentMatrixFloat64: thin
// bindings of resurgo::ConvergentMatrix<float|double>. The Python layer
// (resurgo/matrix.py) checks and converts the arguments (C-contiguous arrays
// of the matrix's type, int64 indices); this module releases the GIL around
// every call that may wait for other ranks and hands out the local part as a
// NumPy view.

#include "matrix_bindings.h"
#include "without_gil.h"

#include <mpi.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/array.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <tuple>

#include "resurgo/errors.hpp"
#include "resurgo/matrix.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace {

StoreOfObject g_store_of = nullptr;

resurgo::MatrixBackend backend_named(const std::string& name) {
  if (name == "messages") return resurgo::MatrixBackend::kMessages;
  if (name == "rma") return resurgo::MatrixBackend::kRma;
  throw resurgo::InvalidArgumentError("ConvergentMatrix: unknown backend '" + name +
                                      "'; use 'messages' or 'rma'");
}

resurgo::MatrixProgress progress_named(const std::string& name) {
  if (name == "auto") return resurgo::MatrixProgress::kAuto;
  if (name == "thread") return resurgo::MatrixProgress::kThread;
  if (name == "inline") return resurgo::MatrixProgress::kInline;
  throw resurgo::InvalidArgumentError("ConvergentMatrix: unknown progress '" + name +
                                      "'; use 'auto', 'thread' or 'inline'");
}

template <typename T>
using Values2D = nb::ndarray<const T, nb::ndim<2>, nb::c_contig, nb::device::cpu>;
template <typename T>
using Values1D = nb::ndarray<const T, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using Indices = nb::ndarray<const std::int64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

template <typename Array>
auto span_of(const Array& array) {
  return std::span(array.data(), array.size());
}

template <typename T>
class PyMatrix {
 public:
  using LocalView = nb::ndarray<nb::numpy, T, nb::ndim<2>, nb::f_contig>;

  PyMatrix(std::int64_t fortran_comm, const resurgo::MatrixLayout& layout, const resurgo::MatrixOptions& options) {
    const MPI_Comm comm = MPI_Comm_f2c(static_cast<MPI_Fint>(fortran_comm));
    matrix_ = without_gil([&] { return std::make_unique<resurgo::ConvergentMatrix<T>>(comm, layout, options); });
  }

  // The C++ destructor frees collectively. A matrix still alive once MPI is
  // finalized (a global at interpreter exit, after mpi4py's finalization) is
  // leaked instead: freeing it would call MPI after MPI_Finalize.
  ~PyMatrix() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) {
      static_cast<void>(matrix_.release());
      return;
    }
    without_gil([&] { matrix_.reset(); });
  }

  PyMatrix(const PyMatrix&) = delete;
  PyMatrix& operator=(const PyMatrix&) = delete;

  resurgo::ConvergentMatrix<T>& matrix() { return *matrix_; }

  void update(Values2D<T> values, Indices rows, Indices cols) {
    without_gil([&] { matrix_->update(span_of(values), span_of(rows), span_of(cols)); });
  }

  void update_symmetric(Values2D<T> values, Indices ix) {
    without_gil([&] { matrix_->update_symmetric(span_of(values), span_of(ix)); });
  }

  void update_vector(Values1D<T> values, Indices rows) {
    without_gil([&] { matrix_->update_vector(span_of(values), span_of(rows)); });
  }

  // Column-major, leading dimension leading_dimension(): ScaLAPACK's local
  // array, as a view whose owner is this object (rv_policy reference_internal).
  LocalView local_data() {
    T* data = matrix_->local_data();
    const std::array<std::size_t, 2> shape{static_cast<std::size_t>(matrix_->local_rows()),
                                           static_cast<std::size_t>(matrix_->local_cols())};
    const std::array<std::int64_t, 2> strides{1, matrix_->leading_dimension()};
    return LocalView(data, 2, shape.data(), nb::handle(), strides.data());
  }

  std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t, int, int> layout() {
    const resurgo::MatrixLayout& l = matrix_->layout();
    return {l.rows, l.cols, l.row_block, l.col_block, l.grid_rows, l.grid_cols};
  }

  nb::dict stats() {
    const resurgo::MatrixStats s = matrix_->stats();
    nb::dict d;
    d["updates"] = s.updates;
    d["elements_sent"] = s.elements_sent;
    d["elements_local"] = s.elements_local;
    d["bytes_sent"] = s.bytes_sent;
    d["bins_received"] = s.bins_received;
    d["update_seconds"] = s.update_seconds;
    d["binning_seconds"] = s.binning_seconds;
    d["backpressure_seconds"] = s.backpressure_seconds;
    d["commit_seconds"] = s.commit_seconds;
    d["commits"] = s.commits;
    return d;
  }

  void protect(nb::handle store, int id, const std::string& label) {
    resurgo::Store& target = g_store_of(store);
    without_gil([&] { matrix_->protect(target, id, label); });
  }

  void checkpoint(nb::handle store, int version) {
    resurgo::Store& target = g_store_of(store);
    without_gil([&] { matrix_->checkpoint(target, version); });
  }

  void write_global(const std::string& path, bool row_major) {
    const resurgo::MatrixOrder order = row_major ? resurgo::MatrixOrder::kRowMajor : resurgo::MatrixOrder::kColumnMajor;
    without_gil([&] { matrix_->write_global(path, order); });
  }

  void read_global(const std::string& path) {
    without_gil([&] { matrix_->read_global(path); });
  }

  int restart(nb::handle store, int version) {
    resurgo::Store& target = g_store_of(store);
    return without_gil([&] { return matrix_->restart(target, version); });
  }

 private:
  std::unique_ptr<resurgo::ConvergentMatrix<T>> matrix_;
};

template <typename T>
void bind_matrix_of(nb::module_& m, const char* name) {
  using Py = PyMatrix<T>;
  nb::class_<Py>(m, name)
      .def(
          "__init__",
          [](Py* self, std::int64_t fortran_comm, std::int64_t rows, std::int64_t cols, std::int64_t row_block,
             std::int64_t col_block, int grid_rows, int grid_cols, const std::string& backend,
             const std::string& progress, std::size_t max_in_flight_bytes, std::uint64_t seed,
             bool check_collective, double timeout_seconds) {
            const resurgo::MatrixLayout layout{rows, cols, row_block, col_block, grid_rows, grid_cols};
            const resurgo::MatrixOptions options{backend_named(backend), progress_named(progress),
                                                 max_in_flight_bytes, seed, check_collective, timeout_seconds};
            new (self) Py(fortran_comm, layout, options);
          },
          "fortran_comm"_a, "rows"_a, "cols"_a, "row_block"_a, "col_block"_a, "grid_rows"_a, "grid_cols"_a,
          "backend"_a, "progress"_a, "max_in_flight_bytes"_a, "seed"_a, "check_collective"_a, "timeout_seconds"_a)
      .def("update", &Py::update, "values"_a, "rows"_a, "cols"_a)
      .def("update_symmetric", &Py::update_symmetric, "values"_a, "ix"_a)
      .def("update_vector", &Py::update_vector, "values"_a, "rows"_a)
      .def("commit", [](Py& p) { without_gil([&] { p.matrix().commit(); }); })
      .def("progress", [](Py& p) { without_gil([&] { p.matrix().progress(); }); })
      .def("reset", [](Py& p) { without_gil([&] { p.matrix().reset(); }); })
      .def("free", [](Py& p) { without_gil([&] { p.matrix().free(); }); })
      .def("local_data", &Py::local_data, nb::rv_policy::reference_internal)
      .def("layout", &Py::layout)
      .def("grid_position", [](Py& p) { return std::tuple{p.matrix().grid_row(), p.matrix().grid_col()}; })
      .def("local_shape", [](Py& p) { return std::tuple{p.matrix().local_rows(), p.matrix().local_cols()}; })
      .def("leading_dimension", [](Py& p) { return p.matrix().leading_dimension(); })
      .def("descriptor", [](Py& p, int context) { return p.matrix().descriptor(context); }, "context"_a)
      .def("owns", [](Py& p, std::int64_t i, std::int64_t j) { return p.matrix().owns(i, j); }, "row"_a, "col"_a)
      .def("owner", [](Py& p, std::int64_t i, std::int64_t j) { return p.matrix().owner(i, j); }, "row"_a, "col"_a)
      .def("at", [](Py& p, std::int64_t i, std::int64_t j) { return p.matrix().at(i, j); }, "row"_a, "col"_a)
      .def("stats", &Py::stats)
      .def("protect", &Py::protect, "store"_a, "id"_a, "label"_a)
      .def("checkpoint", &Py::checkpoint, "store"_a, "version"_a)
      .def("restart", &Py::restart, "store"_a, "version"_a)
      .def("write_global", &Py::write_global, "path"_a, "row_major"_a)
      .def("read_global", &Py::read_global, "path"_a);
}

}  // namespace

void bind_matrix(nb::module_& m, StoreOfObject store_of) {
  g_store_of = store_of;
  bind_matrix_of<float>(m, "ConvergentMatrixFloat32");
  bind_matrix_of<double>(m, "ConvergentMatrixFloat64");
}
