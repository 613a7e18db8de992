// resurgo._core: nanobind bindings of the public C++ headers only
// (resurgo/resurgo.hpp, resurgo/auto.hpp, resurgo/tools.hpp, resurgo/mpi.hpp
// when built with MPI). The typed Python layer (python/resurgo/*.py) is the
// public surface; this module stays thin: it converts types, releases the
// GIL around blocking calls and translates resurgo::Error into the Python
// exception classes. The records the API returns are bound once, in
// record_bindings.cpp; the tools (inspect, verify, ...) in tools_bindings.cpp.

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <array>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "record_bindings.h"
#include "resurgo/auto.hpp"
#include "resurgo/resurgo.hpp"
#include "resurgo/tools.hpp"
#include "tools_bindings.h"
#include "without_gil.h"

#ifdef RESURGO_HAVE_MPI
#include "matrix_bindings.h"
#include "resurgo/mpi.hpp"
#endif

namespace nb = nanobind;
using namespace nb::literals;

namespace {

// ---------------------------------------------------------------------------
// Exceptions: the classes are defined in Python (resurgo/errors.py) and handed
// over once at import by _register_exceptions(). Strong references, kept for
// the life of the process.

constexpr std::array<std::pair<resurgo::ErrorCode, const char*>, 9> kErrorNames{{
    {resurgo::ErrorCode::kInvalidArgument, "InvalidArgumentError"},
    {resurgo::ErrorCode::kNotFound, "NotFoundError"},
    {resurgo::ErrorCode::kCorrupt, "CorruptionError"},
    {resurgo::ErrorCode::kMismatch, "MismatchError"},
    {resurgo::ErrorCode::kStorage, "StorageError"},
    {resurgo::ErrorCode::kConfig, "ConfigError"},
    {resurgo::ErrorCode::kFormat, "FormatError"},
    {resurgo::ErrorCode::kState, "StateError"},
    {resurgo::ErrorCode::kInternal, "Error"},
}};

PyObject* g_base_error = nullptr;
std::map<int, PyObject*> g_errors;  // ErrorCode value -> class

void register_exceptions(nb::dict classes) {
  auto fetch = [&](const char* name) -> PyObject* {
    if (!classes.contains(name)) throw nb::key_error(name);
    nb::object cls = classes[name];
    if (!PyExceptionClass_Check(cls.ptr()))
      throw nb::type_error((std::string(name) + " is not an exception class").c_str());
    return cls.release().ptr();  // intentionally leaked: lives as long as the module
  };
  PyObject* base = fetch("Error");
  std::map<int, PyObject*> table;
  for (const auto& [code, name] : kErrorNames) table[static_cast<int>(code)] = fetch(name);
  g_base_error = base;
  g_errors = std::move(table);
}

void translate_error(const std::exception_ptr& p, void*) {
  try {
    std::rethrow_exception(p);
  } catch (const resurgo::Error& e) {
    PyObject* cls = g_base_error ? g_base_error : PyExc_RuntimeError;
    auto it = g_errors.find(static_cast<int>(e.code()));
    if (it != g_errors.end()) cls = it->second;
    PyErr_SetString(cls, e.what());
  }
}

// ---------------------------------------------------------------------------
// DLPack: what a producer's tensor is, for resurgo/array_view.py, which
// checks it as it checks every other kind of array.

std::string dlpack_dtype_name(nb::dlpack::dtype dt) {
  using C = nb::dlpack::dtype_code;
  std::string prefix;
  switch (static_cast<C>(dt.code)) {
    case C::Bool:
      return dt.bits == 8 && dt.lanes == 1 ? "bool" : "";
    case C::Int: prefix = "int"; break;
    case C::UInt: prefix = "uint"; break;
    case C::Float: prefix = "float"; break;
    case C::Bfloat: prefix = "bfloat"; break;
    case C::Complex: prefix = "complex"; break;
    default: return "";
  }
  if (dt.lanes != 1) return "";
  return prefix + std::to_string(dt.bits);
}

// (pointer, DLPack device type, dtype name or "", element bits, shape,
// strides in elements) of a writable tensor.
using DLPackTensor = std::tuple<std::uintptr_t, int, std::string, std::uint64_t, std::vector<std::int64_t>,
                                std::vector<std::int64_t>>;

DLPackTensor dlpack_tensor(nb::ndarray<> array) {
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;
  for (std::size_t axis = 0; axis < array.ndim(); ++axis) {
    shape.push_back(static_cast<std::int64_t>(array.shape(axis)));
    strides.push_back(array.stride(axis));
  }
  const nb::dlpack::dtype dt = array.dtype();
  return {reinterpret_cast<std::uintptr_t>(array.data()), array.device_type(), dlpack_dtype_name(dt),
          static_cast<std::uint64_t>(dt.bits) * dt.lanes, std::move(shape), std::move(strides)};
}

// ---------------------------------------------------------------------------
// Store

#ifdef RESURGO_HAVE_MPI
constexpr bool kHaveMpi = true;

// The communicator of an mpi4py handle (comm.py2f(): the Fortran handle, an
// int), so that the extension needs no mpi4py headers at build time.
std::shared_ptr<resurgo::Comm> comm_from_fortran_handle(const std::string&, std::int64_t handle) {
  return resurgo::mpi_comm(MPI_Comm_f2c(static_cast<MPI_Fint>(handle)));
}
#else
constexpr bool kHaveMpi = false;

[[noreturn]] std::shared_ptr<resurgo::Comm> comm_from_fortran_handle(const std::string& name, std::int64_t) {
  throw resurgo::ConfigError(
      "Store '" + name + "': comm= needs a resurgo built with MPI, and this one was built without it: install "
      "MPI (Debian: apt-get install libopenmpi-dev openmpi-bin) and rebuild the Python package (make python)");
}
#endif

class PyStore {
 public:
  // `mpi_comm`: the Fortran handle of an MPI communicator (an MPI store,
  // opened collectively), or none for a store of this process alone.
  PyStore(const std::string& name, const std::string& config_path,
          const std::map<std::string, std::string>& overrides, std::optional<std::int64_t> mpi_comm) {
    store_ = without_gil([&] {
      resurgo::Config config = resurgo::Config::load(config_path, overrides);
      if (!mpi_comm) return std::make_unique<resurgo::Store>(name, config);
      return std::make_unique<resurgo::Store>(name, config, comm_from_fortran_handle(name, *mpi_comm));
    });
  }

  resurgo::Store& store() { return *store_; }

  // Registers the memory resurgo/array_view.py found behind the caller's
  // array: `kind` "host", "device" or "managed", `pointer` and `bytes`
  // where it lies. `global_shape`/`offset`: where a host region lies in a
  // global array (empty: a region of this rank alone).
  void protect(int id, const std::string& kind, std::uintptr_t pointer, std::uint64_t bytes,
               const std::string& label, const std::string& dtype, std::vector<std::int64_t> shape,
               std::vector<std::int64_t> global_shape, std::vector<std::int64_t> offset) {
    void* data = reinterpret_cast<void*>(pointer);
    const resurgo::ElementType type{dtype, std::move(shape)};
    switch (resurgo::tools::memory_kind_named(kind)) {
      case resurgo::MemoryKind::kHost:
        store_->protect(id, data, bytes, label, type, resurgo::GlobalBlock{std::move(global_shape), std::move(offset)});
        break;
      case resurgo::MemoryKind::kDevice:
        store_->protect_device(id, data, bytes, label, type);
        break;
      case resurgo::MemoryKind::kManaged:
        store_->protect_managed(id, data, bytes, label, type);
        break;
    }
  }

 private:
  std::unique_ptr<resurgo::Store> store_;
};

// ---------------------------------------------------------------------------
// Automatic checkpointing. The Python layer (resurgo/auto.py) hands over
// datasets as array_view.py found them, and payloads as flat uint8 views of
// its own C-contiguous copies; noconvert() makes sure that nanobind never
// substitutes a converted copy, whose memory the runtime would keep.

using ByteView = nb::ndarray<std::uint8_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

class PyRuntime {
 public:
  PyRuntime(PyStore& store, resurgo::autockpt::Options options) {
    runtime_ = without_gil(
        [&] { return std::make_unique<resurgo::autockpt::Runtime>(store.store(), std::move(options)); });
  }

  // Detaches (the runtime's destructor); later calls raise StateError.
  void close() {
    without_gil([&] { runtime_.reset(); });
  }

  resurgo::autockpt::Runtime& runtime() {
    if (!runtime_) throw resurgo::StateError("the automatic checkpointing runtime is closed");
    return *runtime_;
  }

  // `pointer` and `bytes`: where the array resurgo/array_view.py checked lies.
  // A non-empty `global_shape` declares a block of a global array at `offset`.
  int dataset(const std::string& name, std::uintptr_t pointer, std::uint64_t bytes, const std::string& dtype,
              std::vector<std::int64_t> shape, int halo, std::vector<std::int64_t> global_shape,
              std::vector<std::int64_t> offset) {
    resurgo::ElementType type{dtype, std::move(shape)};
    void* data = reinterpret_cast<void*>(pointer);
    if (global_shape.empty() && offset.empty()) return runtime().dataset(name, data, bytes, type, halo);
    if (halo != 0) {
      throw resurgo::InvalidArgumentError("dataset '" + name + "' as a block of a global array: a dataset with a halo "
                                          "cannot be one; declare it with halo 0");
    }
    return runtime().dataset(name, data, bytes, type, resurgo::GlobalBlock{std::move(global_shape), std::move(offset)});
  }

  bool loop(const std::string& name, const std::vector<std::tuple<int, int, int>>& args) {
    args_.clear();
    for (const auto& [dataset, access, range] : args) args_.push_back(arg(name, dataset, access, range));
    return without_gil([&] { return runtime().loop(name, args_); });
  }

  bool fastfw(ByteView payload) {
    return without_gil([&] { return runtime().fastfw(payload.data(), payload.size()); });
  }

  bool datlist(const std::vector<int>& datasets, std::optional<ByteView> payload) {
    return without_gil([&] {
      return payload ? runtime().datlist(datasets, payload->data(), payload->size()) : runtime().datlist(datasets);
    });
  }

 private:
  static resurgo::autockpt::Arg arg(const std::string& loop, int dataset, int access, int range) {
    using resurgo::autockpt::Access;
    using resurgo::autockpt::Range;
    if (access < static_cast<int>(Access::kRead) || access > static_cast<int>(Access::kIncrement))
      throw resurgo::InvalidArgumentError("loop '" + loop + "': unknown access " + std::to_string(access) +
                                          " (resurgo.auto.Access)");
    if (range < static_cast<int>(Range::kAll) || range > static_cast<int>(Range::kHalo))
      throw resurgo::InvalidArgumentError("loop '" + loop + "': unknown range " + std::to_string(range) +
                                          " (resurgo.auto.Range)");
    return {dataset, static_cast<Access>(access), static_cast<Range>(range)};
  }

  std::unique_ptr<resurgo::autockpt::Runtime> runtime_;
  std::vector<resurgo::autockpt::Arg> args_;  // loop()'s conversion, reused
};

resurgo::autockpt::Options auto_options(std::uint64_t interval_loops, double interval_seconds,
                                        std::uint64_t region_timeout_loops, std::uint64_t agreement_loops,
                                        int diagnostics, bool check_access, bool flush_on_termination) {
  resurgo::autockpt::Options options;
  options.interval_loops = interval_loops;
  options.interval_seconds = interval_seconds;
  options.region_timeout_loops = region_timeout_loops;
  options.agreement_loops = agreement_loops;
  options.diagnostics = diagnostics;
  options.check_access = check_access;
  options.flush_on_termination = flush_on_termination;
  return options;
}

}  // namespace

NB_MODULE(_core, m) {
  m.doc() = "Resurgo native core (internal; use the resurgo package)";
  nb::register_exception_translator(translate_error);

  m.def("_register_exceptions", &register_exceptions, "classes"_a,
        "Hands the Python exception classes (name -> class) to the extension.");
  m.attr("ALL_VERSIONS") = resurgo::kAllVersions;
  m.attr("LATEST") = resurgo::kLatest;
  m.attr("SMALL_STATE_BUFFER") = resurgo::kSmallStateBuffer;
  m.def("default_local_path", &resurgo::Config::default_local_path);
  m.attr("HAVE_MPI") = kHaveMpi;
  bind_records(m);
  bind_tools(m);
  m.def("dlpack_tensor", &dlpack_tensor, "array"_a.noconvert(),
        "(pointer, DLPack device type, dtype name or '', element bits, shape, strides in elements) of a "
        "writable DLPack tensor; TypeError when nanobind cannot import it as one.");
#ifdef RESURGO_HAVE_MPI
  bind_matrix(m, [](nb::handle store) -> resurgo::Store& { return nb::cast<PyStore&>(store).store(); });
#endif

  nb::class_<PyStore>(m, "Store")
      .def(nb::init<const std::string&, const std::string&, const std::map<std::string, std::string>&,
                    std::optional<std::int64_t>>(),
           "name"_a, "config_path"_a, "overrides"_a, "mpi_comm"_a = nb::none())
      .def_prop_ro("name", [](PyStore& s) { return s.store().name(); })
      .def_prop_ro("rank", [](PyStore& s) { return s.store().rank(); })
      .def("close", [](PyStore& s) { without_gil([&] { s.store().close(); }); })
      .def("protect", &PyStore::protect, "id"_a, "kind"_a, "pointer"_a, "bytes"_a, "label"_a, "dtype"_a, "shape"_a,
           "global_shape"_a, "offset"_a)
      .def("unprotect", [](PyStore& s, int id) { s.store().unprotect(id); }, "id"_a)
      .def("set_metadata",
           [](PyStore& s, nb::bytes data) { s.store().set_metadata(data.c_str(), data.size()); },
           "data"_a)
      .def("metadata",
           [](PyStore& s) {
             const std::vector<std::byte>& metadata = s.store().metadata();
             return nb::bytes(metadata.data(), metadata.size());
           })
      .def("checkpoint", [](PyStore& s, int v) { without_gil([&] { s.store().checkpoint(v); }); },
           "version"_a)
      .def("wait",
           [](PyStore& s, int v, int level) { without_gil([&] { s.store().wait(v, level); }); },
           "version"_a, "level"_a)
      .def("latest", [](PyStore& s) { return without_gil([&] { return s.store().latest(); }); })
      .def("describe", [](PyStore& s, int v) { return without_gil([&] { return s.store().describe(v); }); },
           "version"_a)
      .def("restart",
           [](PyStore& s, int v, bool protected_only) {
             const resurgo::RestartScope scope =
                 protected_only ? resurgo::RestartScope::kProtectedRegions : resurgo::RestartScope::kExactRegions;
             return without_gil([&] { return s.store().restart(v, scope); });
           },
           "version"_a, "protected_only"_a = false)
      .def("versions", [](PyStore& s) { return without_gil([&] { return s.store().versions(); }); })
      .def("stats", [](PyStore& s) { return without_gil([&] { return s.store().stats(); }); })
      .def("last_restart", [](PyStore& s) { return s.store().last_restart(); })
      .def("device_stats", [](PyStore& s) { return s.store().device_stats(); })
      .def("prefetch",
           [](PyStore& s, std::vector<int> versions) { without_gil([&] { s.store().prefetch(versions); }); },
           "versions"_a)
      .def("discard", [](PyStore& s, int v) { without_gil([&] { s.store().discard(v); }); }, "version"_a)
      .def(
          "set_capture_streams",
          [](PyStore& s, const std::vector<std::uintptr_t>& handles) {
            std::vector<void*> streams;
            for (const std::uintptr_t handle : handles) streams.push_back(reinterpret_cast<void*>(handle));
            s.store().set_capture_streams(std::move(streams));
          },
          "streams"_a)
      .def("need_checkpoint", [](PyStore& s) { return s.store().need_checkpoint(); })
      .def("checkpoint_interval", [](PyStore& s) { return s.store().checkpoint_interval(); });

  nb::class_<PyRuntime>(m, "AutoRuntime")
      .def(
          "__init__",
          [](PyRuntime* self, PyStore& store, std::uint64_t interval_loops, double interval_seconds,
             std::uint64_t region_timeout_loops, std::uint64_t agreement_loops, int diagnostics, bool check_access,
             bool flush_on_termination) {
            new (self) PyRuntime(store, auto_options(interval_loops, interval_seconds, region_timeout_loops,
                                                     agreement_loops, diagnostics, check_access,
                                                     flush_on_termination));
          },
          "store"_a, "interval_loops"_a, "interval_seconds"_a, "region_timeout_loops"_a, "agreement_loops"_a,
          "diagnostics"_a,
          "check_access"_a, "flush_on_termination"_a, nb::keep_alive<1, 2>())
      .def("close", &PyRuntime::close)
      .def("dataset", &PyRuntime::dataset, "name"_a, "pointer"_a, "bytes"_a, "dtype"_a, "shape"_a, "halo"_a,
           "global_shape"_a, "offset"_a)
      .def("loop", &PyRuntime::loop, "name"_a, "args"_a)
      .def(
          "query", [](PyRuntime& r, ByteView data) { r.runtime().query(data.data(), data.size()); },
          "data"_a.noconvert())
      .def("initphase_done", [](PyRuntime& r) { r.runtime().initphase_done(); })
      .def("fastfw", &PyRuntime::fastfw, "payload"_a.noconvert())
      .def("datlist", &PyRuntime::datlist, "datasets"_a, "payload"_a.noconvert().none())
      .def("trigger", [](PyRuntime& r) { r.runtime().trigger(); })
      .def_prop_ro("restoring", [](PyRuntime& r) { return r.runtime().restoring(); })
      .def_prop_ro("loop_index", [](PyRuntime& r) { return r.runtime().loop_index(); })
      .def_prop_ro("location", [](PyRuntime& r) { return r.runtime().location(); })
      .def("last_checkpoint", [](PyRuntime& r) { return r.runtime().last_checkpoint(); })
      .def("last_restore", [](PyRuntime& r) { return r.runtime().last_restore(); })
      .def_prop_ro("bookkeeping_bytes", [](PyRuntime& r) { return r.runtime().bookkeeping_bytes(); });
}
