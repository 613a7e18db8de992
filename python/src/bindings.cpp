// resurgo._core: nanobind bindings of the C++ API (resurgo/resurgo.hpp,
// resurgo/auto.hpp, resurgo/mpi.hpp when built with MPI) and of the
// container and job manifest readers (format/container.h, format/manifest.h)
// used by the command-line tool.
// The typed Python layer (python/resurgo/*.py) is the public surface; this
// module stays thin: it converts types, releases the GIL around blocking
// calls and translates resurgo::Error into the Python exception classes.

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <array>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "format/codec.h"
#include "format/container.h"
#include "format/file_names.h"
#include "format/manifest.h"
#include "gpu/device_access.h"
#include "tier/directory_level.h"
#include "resurgo/auto.hpp"
#include "resurgo/resurgo.hpp"
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

// Raises a resurgo error of `code` from binding-level checks.
[[noreturn]] void raise(resurgo::ErrorCode code, const std::string& message) {
  throw resurgo::Error(code, message);
}

// ---------------------------------------------------------------------------
// Element types

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

// Region kinds: "host" | "device" | "managed", in describe(), inspect() and
// _write_container(). A container's format::RegionKind holds the same values
// as the public resurgo::MemoryKind (the store writes one as the other).
constexpr std::array kMemoryKinds{resurgo::MemoryKind::kHost, resurgo::MemoryKind::kDevice,
                                  resurgo::MemoryKind::kManaged};
static_assert(static_cast<int>(resurgo::MemoryKind::kHost) == static_cast<int>(resurgo::format::RegionKind::kHost));
static_assert(static_cast<int>(resurgo::MemoryKind::kDevice) == static_cast<int>(resurgo::format::RegionKind::kDevice));
static_assert(static_cast<int>(resurgo::MemoryKind::kManaged) ==
              static_cast<int>(resurgo::format::RegionKind::kManaged));

const char* kind_name(resurgo::MemoryKind kind) {
  switch (kind) {
    case resurgo::MemoryKind::kHost: return "host";
    case resurgo::MemoryKind::kDevice: return "device";
    case resurgo::MemoryKind::kManaged: return "managed";
  }
  return "unknown";
}

const char* kind_name(resurgo::format::RegionKind kind) { return kind_name(static_cast<resurgo::MemoryKind>(kind)); }

nb::bytes to_bytes(const std::vector<std::byte>& data) {
  return nb::bytes(reinterpret_cast<const char*>(data.data()), data.size());
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
  raise(resurgo::ErrorCode::kConfig,
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

  // Registers the memory of `array` (a writable host buffer, C-contiguous:
  // DLPack device CPU or CUDA pinned host). `dtype`/`shape` override what
  // the buffer itself describes (the Python layer passes NumPy's dtype name
  // and shape with a flat byte view).
  // `global_shape`/`offset`: where the region lies in a global array (empty:
  // a region of this rank alone).
  void protect(int id, nb::ndarray<> array, const std::string& label, const std::string& dtype,
               const std::optional<std::vector<std::int64_t>>& shape, std::vector<std::int64_t> global_shape,
               std::vector<std::int64_t> offset) {
    const auto [bytes, type] = array_region(resurgo::MemoryKind::kHost, array, label, dtype, shape);
    store_->protect(id, array.data(), bytes, label, type,
                    resurgo::GlobalBlock{std::move(global_shape), std::move(offset)});
  }

  // A region in CUDA device (Kind kDevice) or managed (kManaged) memory,
  // given by DLPack: an array whose device is that memory.
  template <resurgo::MemoryKind Kind>
  void protect_cuda_array(int id, nb::ndarray<> array, const std::string& label) {
    const auto [bytes, type] = array_region(Kind, array, label, "", std::nullopt);
    add_cuda_region(Kind, id, array.data(), bytes, label, type);
  }

  // The same given by pointer (the CUDA array interface): the Python layer
  // has read and checked `bytes`, `dtype` and `shape` from the interface.
  template <resurgo::MemoryKind Kind>
  void protect_cuda_pointer(int id, std::uintptr_t pointer, std::uint64_t bytes, const std::string& label,
                            const std::string& dtype, std::vector<std::int64_t> shape) {
    add_cuda_region(Kind, id, reinterpret_cast<void*>(pointer), static_cast<std::size_t>(bytes), label,
                    resurgo::ElementType{dtype, std::move(shape)});
  }

 private:
  void add_cuda_region(resurgo::MemoryKind kind, int id, void* data, std::size_t bytes, const std::string& label,
                       const resurgo::ElementType& type) {
    if (kind == resurgo::MemoryKind::kDevice) {
      store_->protect_device(id, data, bytes, label, type);
    } else {
      store_->protect_managed(id, data, bytes, label, type);
    }
  }

  // The byte count and element type of `array` as region `label` of `kind`:
  // its DLPack device must be that memory, its elements whole bytes, its
  // layout C-contiguous, its size not zero. `dtype`/`shape` override what
  // the array describes.
  static std::pair<std::size_t, resurgo::ElementType> array_region(
      resurgo::MemoryKind kind, const nb::ndarray<>& array, const std::string& label, const std::string& dtype,
      const std::optional<std::vector<std::int64_t>>& shape) {
    const int device = array.device_type();
    const bool host = device == nb::device::cpu::value || device == nb::device::cuda_host::value;
    const bool matches = kind == resurgo::MemoryKind::kHost     ? host
                         : kind == resurgo::MemoryKind::kDevice ? device == nb::device::cuda::value
                                                                : device == nb::device::cuda_managed::value;
    if (!matches)
      raise(resurgo::ErrorCode::kInvalidArgument,
            "protect: region '" + label + "' is an array on DLPack device type " + std::to_string(device) +
                ", not in " + kind_name(kind) +
                " memory (host: CPU 1 or CUDA host 3; device: CUDA 2; managed: CUDA managed 13)");
    if (array.size() == 0)
      raise(resurgo::ErrorCode::kInvalidArgument,
            "protect: region '" + label + "' is empty (no elements); a region needs at least one byte");
    const nb::dlpack::dtype dt = array.dtype();
    const std::uint64_t bits = static_cast<std::uint64_t>(dt.bits) * dt.lanes;
    if (bits == 0 || bits % 8 != 0)
      raise(resurgo::ErrorCode::kInvalidArgument,
            "protect: region '" + label + "' has an element type that is not a whole number of bytes");
    const std::int64_t itemsize = static_cast<std::int64_t>(bits / 8);
    // C-contiguity: strides (in elements) must be the row-major ones; axes of
    // extent 1 may have any stride.
    std::int64_t expected = 1;
    for (std::size_t i = array.ndim(); i-- > 0;) {
      const auto extent = static_cast<std::int64_t>(array.shape(i));
      if (extent != 1 && array.stride(i) != expected)
        raise(resurgo::ErrorCode::kInvalidArgument,
              "protect: region '" + label +
                  "' is not C-contiguous (Fortran-order or strided view); pass a C-contiguous array "
                  "(numpy.ascontiguousarray, cupy.ascontiguousarray, tensor.contiguous()) that stays alive");
      expected *= extent;
    }
    resurgo::ElementType type;
    type.dtype = dtype.empty() ? dlpack_dtype_name(dt) : dtype;
    if (shape) {
      type.shape = *shape;
    } else {
      for (std::size_t i = 0; i < array.ndim(); ++i)
        type.shape.push_back(static_cast<std::int64_t>(array.shape(i)));
    }
    return {static_cast<std::size_t>(array.size()) * static_cast<std::size_t>(itemsize), std::move(type)};
  }

  std::unique_ptr<resurgo::Store> store_;
};

// Missing values (a level not reached yet) become None in the Python layer.
nb::object seconds_or_none(double seconds) { return seconds < 0 ? nb::none() : nb::cast(seconds); }

nb::dict version_stats_dict(const resurgo::VersionStats& s) {
  nb::dict d;
  d["version"] = s.version;
  d["capture"] = s.capture;
  d["bytes"] = s.bytes;
  d["blocking_seconds"] = s.blocking_seconds;
  d["backpressure_seconds"] = s.backpressure_seconds;
  d["first_touch_seconds"] = s.first_touch_seconds;
  d["copy_seconds"] = s.copy_seconds;
  d["copy_on_write_bytes"] = s.copy_on_write_bytes;
  d["base_version"] = s.base_version < 0 ? nb::none() : nb::cast(s.base_version);
  d["captured_bytes"] = s.captured_bytes;
  d["dirty_bytes"] = s.dirty_bytes;
  d["granularity_bytes"] = s.granularity_bytes;
  d["tracker"] = s.tracker.empty() ? nb::none() : nb::cast(s.tracker);
  nb::list levels;
  for (const resurgo::LevelStats& l : s.levels) {
    nb::dict e;
    e["level"] = l.level;
    e["seconds_to_level"] = seconds_or_none(l.seconds_to_level);
    e["stored_bytes"] = l.stored_bytes;
    e["write_seconds"] = l.write_seconds;
    levels.append(e);
  }
  d["levels"] = levels;
  d["error"] = s.error;
  d["device_bytes"] = s.device_bytes;
  d["device_path"] = s.device_path.empty() ? nb::none() : nb::cast(s.device_path);
  d["device_wait_seconds"] = s.device_wait_seconds;
  return d;
}

nb::dict touch_rates_dict(const resurgo::TouchRates& r) {
  nb::dict d;
  d["touch_alone"] = r.touch_alone;
  d["touch_concurrent"] = r.touch_concurrent;
  d["flush_touched"] = r.flush_touched;
  d["flush_untouched"] = r.flush_untouched;
  d["flush_concurrent"] = r.flush_concurrent;
  return d;
}

nb::dict touch_decision_dict(const resurgo::TouchDecision& t) {
  nb::dict inputs;
  inputs["checkpoint_bytes"] = t.inputs.checkpoint_bytes;
  inputs["compute_seconds"] = t.inputs.compute_seconds;
  inputs["untouched_bytes"] = t.inputs.untouched_bytes;
  inputs["touched_ahead_bytes"] = t.inputs.touched_ahead_bytes;
  inputs["flushes_overlap_compute"] = t.inputs.flushes_overlap_compute;
  nb::dict d;
  d["strategy"] = resurgo::to_string(t.strategy);
  d["measured"] = touch_rates_dict(t.inputs.rates);
  d["rates"] = touch_rates_dict(t.rates);
  d["derived"] = t.derived;
  d["inputs"] = inputs;
  d["horizon_iterations"] = t.horizon_iterations;
  d["concurrent_flush_seconds"] = t.concurrent.flush_seconds;
  d["sequential_flush_seconds"] = t.sequential.flush_seconds;
  d["description"] = t.describe();
  return d;
}

nb::dict late_pin_stats_dict(const resurgo::LatePinStats& s) {
  nb::dict d;
  d["capacity"] = s.capacity;
  d["pin"] = resurgo::to_string(s.pin);
  d["touch"] = resurgo::to_string(s.touch);
  d["state"] = resurgo::to_string(s.state);
  d["strategy"] = resurgo::to_string(s.strategy);
  d["touched_bytes"] = s.touched_bytes;
  d["touch_seconds"] = s.touch_seconds;
  d["touch_stopped"] = s.touch_stopped;
  d["pinned"] = s.pinned;
  d["pin_pieces"] = s.pin_pieces;
  d["pin_seconds"] = s.pin_seconds;
  d["token_wait_seconds"] = s.token_wait_seconds;
  d["pin_failure"] = s.pin_failure;
  d["flushes"] = s.flushes;
  d["flushes_to_untouched"] = s.flushes_to_untouched;
  d["bytes_flushed_to_untouched"] = s.bytes_flushed_to_untouched;
  d["checkpoints"] = s.checkpoints;
  d["measured"] = touch_rates_dict(s.measured);
  d["decision"] = s.decision ? nb::object(touch_decision_dict(*s.decision)) : nb::none();
  return d;
}

nb::dict device_cache_stats_dict(const resurgo::DeviceCacheStats& s) {
  nb::dict d;
  d["capacity"] = s.capacity;
  d["mapped"] = s.mapped;
  d["used"] = s.used;
  d["versions"] = s.versions;
  d["evicted"] = s.evicted;
  d["bypassed"] = s.bypassed;
  d["growth_done"] = s.growth_done;
  d["growth_stopped"] = s.growth_stopped;
  d["mapping_seconds"] = s.mapping_seconds;
  d["map_wait_seconds"] = s.map_wait_seconds;
  d["flush_wait_seconds"] = s.flush_wait_seconds;
  return d;
}

nb::dict device_stats_dict(const resurgo::DeviceStats& s) {
  nb::dict d;
  d["cache"] = s.cache ? nb::object(device_cache_stats_dict(*s.cache)) : nb::none();
  d["staging"] = s.staging ? nb::object(late_pin_stats_dict(*s.staging)) : nb::none();
  return d;
}

nb::dict restart_report_dict(const resurgo::RestartReport& r) {
  nb::dict d;
  d["version"] = r.version < 0 ? nb::none() : nb::cast(r.version);
  d["level"] = r.level < 0 ? nb::none() : nb::cast(r.level);
  d["seconds"] = r.seconds;
  d["bytes"] = r.bytes;
  d["bytes_from_device_cache"] = r.bytes_from_device_cache;
  nb::list skipped;
  for (const std::string& line : r.skipped) skipped.append(nb::str(line.c_str(), line.size()));
  d["skipped"] = skipped;
  nb::list chain;
  for (int version : r.chain) chain.append(version);
  d["chain"] = chain;
  return d;
}

nb::dict version_description_dict(const resurgo::VersionDescription& d) {
  nb::list regions;
  for (const resurgo::RegionDescription& r : d.regions) {
    nb::dict e;
    e["id"] = r.id;
    e["label"] = r.label;
    e["kind"] = kind_name(r.kind);
    e["bytes"] = r.bytes;
    e["dtype"] = r.type.dtype;
    nb::list shape;
    for (std::int64_t extent : r.type.shape) shape.append(extent);
    e["shape"] = shape;
    regions.append(e);
  }
  nb::dict out;
  out["version"] = d.version;
  out["regions"] = regions;
  out["metadata"] = to_bytes(d.metadata);
  return out;
}

// ---------------------------------------------------------------------------
// Container files

nb::dict container_dict(const resurgo::format::Container& c) {
  const auto& h = c.header;
  nb::dict d;
  d["store"] = h.store;
  d["version"] = h.version;
  d["rank"] = h.rank;
  d["base_version"] = h.base_version;
  d["created_unix_ns"] = h.created_unix_ns;
  d["chunk_size"] = h.chunk_size;
  d["metadata"] = to_bytes(h.metadata);
  nb::list regions;
  for (const auto& r : h.regions) {
    nb::dict e;
    e["id"] = r.id;
    e["label"] = r.label;
    e["kind"] = kind_name(r.kind);
    e["bytes"] = r.bytes;
    e["dtype"] = r.dtype;
    nb::list shape;
    for (std::int64_t extent : r.shape) shape.append(extent);
    e["shape"] = shape;
    regions.append(e);
  }
  d["regions"] = regions;
  nb::list chunks;
  for (const auto& ch : c.chunks) {
    nb::dict e;
    e["region"] = ch.region;
    e["offset"] = ch.offset;
    e["raw_length"] = ch.raw_length;
    e["stored_length"] = ch.stored_length;
    e["codec"] = resurgo::format::codec_name(ch.codec);
    e["checksum"] = ch.checksum;
    e["file_offset"] = ch.file_offset;
    chunks.append(e);
  }
  d["chunks"] = chunks;
  d["file_size"] = c.file_size;
  d["index_offset"] = c.index_offset;
  d["checksum"] = c.checksum;
  return d;
}

nb::dict inspect(const std::string& path) {
  resurgo::format::Container container = without_gil([&] {
    auto file = resurgo::Env::posix()->open(path);
    return resurgo::format::read_container(*file);
  });
  return container_dict(container);
}

resurgo::format::RegionKind kind_from_name(const std::string& name) {
  for (resurgo::MemoryKind kind : kMemoryKinds) {
    if (name == kind_name(kind)) return static_cast<resurgo::format::RegionKind>(kind);
  }
  raise(resurgo::ErrorCode::kInvalidArgument, "unknown region kind '" + name + "'");
}

// Writes a container file (mode 0600) from a header dict shaped like
// inspect()'s and uncompressed chunks (region index, offset, bytes): lets
// tests and tools make full and delta files without a store. The reader's
// checks apply when the file is read back, not here.
void write_container(const std::string& path, nb::dict fields,
                     const std::vector<std::tuple<std::uint32_t, std::uint64_t, nb::bytes>>& chunks) {
  resurgo::format::Header header;
  header.store = nb::cast<std::string>(fields["store"]);
  header.version = nb::cast<std::int64_t>(fields["version"]);
  header.rank = nb::cast<std::uint32_t>(fields["rank"]);
  header.base_version = nb::cast<std::int64_t>(fields["base_version"]);
  header.chunk_size = nb::cast<std::uint64_t>(fields["chunk_size"]);
  if (fields.contains("metadata")) {
    const auto metadata = nb::cast<nb::bytes>(fields["metadata"]);
    const auto* begin = reinterpret_cast<const std::byte*>(metadata.c_str());
    header.metadata.assign(begin, begin + metadata.size());
  }
  for (nb::handle item : nb::cast<nb::list>(fields["regions"])) {
    nb::dict region = nb::cast<nb::dict>(item);
    header.regions.push_back({nb::cast<std::int32_t>(region["id"]), nb::cast<std::string>(region["label"]),
                              kind_from_name(nb::cast<std::string>(region["kind"])),
                              nb::cast<std::uint64_t>(region["bytes"]), nb::cast<std::string>(region["dtype"]),
                              nb::cast<std::vector<std::int64_t>>(region["shape"])});
  }
  auto file = resurgo::Env::posix()->create(path, 0600);
  resurgo::format::ContainerWriter writer(*file, header);
  for (const auto& [region, offset, bytes] : chunks) {
    resurgo::format::ChunkRecord record;
    record.region = region;
    record.offset = offset;
    record.raw_length = bytes.size();
    record.stored_length = bytes.size();
    record.checksum = resurgo::format::checksum(bytes.c_str(), bytes.size());
    writer.add_chunk(record, bytes.c_str());
  }
  writer.finish();
  file->sync();
  file->close();
}

constexpr std::uint64_t kProgressStep = 64u << 20;

// Full verification: header, index, footer and every chunk checksum.
nb::dict verify(const std::string& path, nb::object progress) {
  const bool report = !progress.is_none();
  auto [chunks, bytes] = without_gil([&] {
    auto file = resurgo::Env::posix()->open(path);
    resurgo::format::Container container = resurgo::format::read_container(*file);
    // A file named as a version must hold that version (a file of another
    // version renamed in place is damage). The store is not checked: a file
    // may be verified after being moved out of its store's directory.
    int named_version = 0;
    int named_rank = 0;
    if (resurgo::format::parse_container_file_name(std::filesystem::path(path).filename().string(), named_version, named_rank)) {
      resurgo::format::check_identity(container, path, "", named_version, named_rank);
    }
    std::uint64_t last = 0;
    std::uint64_t total_bytes = 0;
    resurgo::format::verify_chunks(*file, container, [&](std::uint64_t done, std::uint64_t total) {
      total_bytes = total;
      if (!report) return;
      if (done - last >= kProgressStep || done == total) {
        last = done;
        nb::gil_scoped_acquire acquire;
        progress(done, total);
      }
    });
    return std::pair<std::size_t, std::uint64_t>(container.chunks.size(), total_bytes);
  });
  nb::dict d;
  d["chunks"] = chunks;
  d["bytes"] = bytes;
  return d;
}

// The bytes of region `region_id` of a full version's container, every chunk
// verified. The bytes object is filled in place, without the GIL: a region
// may be most of the memory.
nb::bytes read_region(const std::string& path, int region_id) {
  std::unique_ptr<resurgo::ReadableFile> file;
  resurgo::format::Container container;
  without_gil([&] {
    file = resurgo::Env::posix()->open(path);
    container = resurgo::format::read_container(*file);
  });
  const resurgo::format::Header& header = container.header;
  if (resurgo::format::is_delta(header))
    raise(resurgo::ErrorCode::kInvalidArgument,
          "'" + path + "' holds a delta version (only the blocks written since version " +
              std::to_string(header.base_version) + "): export a full version");
  std::uint32_t index = 0;
  while (index < header.regions.size() && header.regions[index].id != region_id) ++index;
  if (index == header.regions.size())
    raise(resurgo::ErrorCode::kNotFound, "'" + path + "' has no region with id " + std::to_string(region_id));
  const auto bytes = static_cast<Py_ssize_t>(header.regions[index].bytes);
  nb::bytes out = nb::steal<nb::bytes>(PyBytes_FromStringAndSize(nullptr, bytes));
  if (!out.is_valid()) throw nb::python_error();
  char* destination = PyBytes_AS_STRING(out.ptr());
  without_gil([&] {
    std::vector<std::byte> scratch;
    for (const resurgo::format::ChunkRecord& chunk : container.chunks) {
      if (chunk.region == index)
        resurgo::format::read_chunk(*file, container, chunk, destination + chunk.offset, scratch);
    }
  });
  return out;
}

// The JSON line of the job manifest of `version` in a level's store
// directory, once its checksum line and content are verified.
std::string read_manifest_json(const std::string& store_dir, int version) {
  const std::string path = store_dir + "/" + resurgo::format::manifest_file_name(version);
  return without_gil([&] {
    const std::shared_ptr<resurgo::Env> env = resurgo::Env::posix();
    if (!env->exists(path))
      raise(resurgo::ErrorCode::kNotFound, "no job manifest '" + path + "': version " + std::to_string(version) +
                                               " of an MPI store is not committed in " + store_dir +
                                               " (`resurgo ls " + store_dir + "` lists the versions there)");
    const std::unique_ptr<resurgo::ReadableFile> file = env->open(path);
    if (file->size() > resurgo::format::kMaxManifestBytes)
      raise(resurgo::ErrorCode::kCorrupt, "job manifest '" + path + "' is " + std::to_string(file->size()) +
                                              " bytes, more than any manifest can be");
    std::string text(file->size(), '\0');
    file->read_at(0, text.data(), text.size());
    resurgo::format::decode_manifest(text, path);
    return text.substr(0, text.rfind('\n', text.size() - 2));
  });
}

// ---------------------------------------------------------------------------
// Automatic checkpointing. The Python layer (resurgo/auto.py) hands over flat
// uint8 views of C-contiguous arrays; noconvert() makes sure that nanobind
// never substitutes a converted copy, whose memory the runtime would keep.

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
    if (!runtime_) raise(resurgo::ErrorCode::kState, "the automatic checkpointing runtime is closed");
    return *runtime_;
  }

  int dataset(const std::string& name, ByteView data, const std::string& dtype, std::vector<std::int64_t> shape,
              int halo) {
    return runtime().dataset(name, data.data(), data.size(), resurgo::ElementType{dtype, std::move(shape)}, halo);
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
      raise(resurgo::ErrorCode::kInvalidArgument,
            "loop '" + loop + "': unknown access " + std::to_string(access) + " (resurgo.auto.Access)");
    if (range < static_cast<int>(Range::kAll) || range > static_cast<int>(Range::kHalo))
      raise(resurgo::ErrorCode::kInvalidArgument,
            "loop '" + loop + "': unknown range " + std::to_string(range) + " (resurgo.auto.Range)");
    return {dataset, static_cast<Access>(access), static_cast<Range>(range)};
  }

  std::unique_ptr<resurgo::autockpt::Runtime> runtime_;
  std::vector<resurgo::autockpt::Arg> args_;  // loop()'s conversion, reused
};

template <class Container>
nb::tuple string_tuple(const Container& strings) {
  nb::list out;
  for (const std::string& s : strings) out.append(nb::str(s.c_str(), s.size()));
  return nb::tuple(out);
}

nb::object checkpoint_report_dict(const std::optional<resurgo::autockpt::CheckpointReport>& r) {
  if (!r) return nb::none();
  nb::dict d;
  d["version"] = r->version;
  d["loop_index"] = r->loop_index;
  d["location"] = r->location;
  d["saved"] = string_tuple(r->saved);
  d["halos"] = string_tuple(r->halos);
  d["dataset_bytes"] = r->dataset_bytes;
  d["query_log_bytes"] = r->query_log_bytes;
  d["payload_bytes"] = r->payload_bytes;
  d["staged_bytes"] = r->staged_bytes;
  d["region_loops"] = r->region_loops;
  d["timed_out"] = r->timed_out;
  d["blocking_seconds"] = r->blocking_seconds;
  return std::move(d);
}

nb::object restore_report_dict(const std::optional<resurgo::autockpt::RestoreReport>& r) {
  if (!r) return nb::none();
  nb::dict d;
  d["version"] = r->version;
  d["loop_index"] = r->loop_index;
  d["skipped_loops"] = r->skipped_loops;
  d["replayed_queries"] = r->replayed_queries;
  d["fast_forward"] = r->fast_forward;
  d["read_seconds"] = r->read_seconds;
  d["replay_seconds"] = r->replay_seconds;
  return std::move(d);
}

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
  m.attr("FORMAT_VERSION") = resurgo::format::kFormatVersion;
  m.def("default_local_path", &resurgo::Config::default_local_path);
  m.attr("HAVE_MPI") = kHaveMpi;
  m.attr("MAX_MANIFEST_BYTES") = resurgo::format::kMaxManifestBytes;
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
      .def("protect", &PyStore::protect, "id"_a, "array"_a.noconvert(), "label"_a, "dtype"_a = "",
           "shape"_a = nb::none(), "global_shape"_a = std::vector<std::int64_t>{},
           "offset"_a = std::vector<std::int64_t>{})
      .def("protect_device", &PyStore::protect_cuda_array<resurgo::MemoryKind::kDevice>, "id"_a,
           "array"_a.noconvert(), "label"_a)
      .def("protect_device", &PyStore::protect_cuda_pointer<resurgo::MemoryKind::kDevice>, "id"_a, "pointer"_a,
           "bytes"_a, "label"_a, "dtype"_a, "shape"_a)
      .def("protect_managed", &PyStore::protect_cuda_array<resurgo::MemoryKind::kManaged>, "id"_a,
           "array"_a.noconvert(), "label"_a)
      .def("protect_managed", &PyStore::protect_cuda_pointer<resurgo::MemoryKind::kManaged>, "id"_a, "pointer"_a,
           "bytes"_a, "label"_a, "dtype"_a, "shape"_a)
      .def("unprotect", [](PyStore& s, int id) { s.store().unprotect(id); }, "id"_a)
      .def("set_metadata",
           [](PyStore& s, nb::bytes data) { s.store().set_metadata(data.c_str(), data.size()); },
           "data"_a)
      .def("metadata", [](PyStore& s) { return to_bytes(s.store().metadata()); })
      .def("checkpoint", [](PyStore& s, int v) { without_gil([&] { s.store().checkpoint(v); }); },
           "version"_a)
      .def("wait",
           [](PyStore& s, int v, int level) { without_gil([&] { s.store().wait(v, level); }); },
           "version"_a, "level"_a)
      .def("latest", [](PyStore& s) { return without_gil([&] { return s.store().latest(); }); })
      .def("describe",
           [](PyStore& s, int v) {
             return version_description_dict(without_gil([&] { return s.store().describe(v); }));
           },
           "version"_a)
      .def("restart",
           [](PyStore& s, int v) { return without_gil([&] { return s.store().restart(v); }); },
           "version"_a)
      .def("versions",
           [](PyStore& s) {
             std::vector<resurgo::VersionInfo> infos =
                 without_gil([&] { return s.store().versions(); });
             nb::list out;
             for (const auto& info : infos) {
               nb::list levels;
               for (int level : info.levels) levels.append(level);
               out.append(nb::make_tuple(info.version, nb::tuple(levels), info.pending));
             }
             return out;
           })
      .def("stats",
           [](PyStore& s) {
             std::vector<resurgo::VersionStats> all = without_gil([&] { return s.store().stats(); });
             nb::list out;
             for (const auto& st : all) out.append(version_stats_dict(st));
             return out;
           })
      .def("last_restart", [](PyStore& s) { return restart_report_dict(s.store().last_restart()); })
      .def("device_stats", [](PyStore& s) { return device_stats_dict(s.store().device_stats()); })
      .def("prefetch",
           [](PyStore& s, std::vector<int> versions) { without_gil([&] { s.store().prefetch(versions); }); },
           "versions"_a)
      .def("discard", [](PyStore& s, int v) { without_gil([&] { s.store().discard(v); }); }, "version"_a)
      .def("need_checkpoint", [](PyStore& s) { return s.store().need_checkpoint(); })
      .def("checkpoint_interval", [](PyStore& s) { return s.store().checkpoint_interval(); });

  m.def(
      "parse_container_file_name",
      [](const std::string& name) -> std::optional<std::pair<int, int>> {
        int version = 0;
        int rank = 0;
        if (!resurgo::format::parse_container_file_name(name, version, rank)) return std::nullopt;
        return std::pair{version, rank};
      },
      "name"_a, "(version, rank) of a container file name such as v0000000012.r000000.rsg, else None.");
  m.def(
      "remove_version",
      [](const std::string& store_dir, int version, bool with_dependents) {
        return without_gil([&] { return resurgo::remove_version(store_dir, version, nullptr, with_dependents); });
      },
      "store_dir"_a, "version"_a, "with_dependents"_a = false,
      "Removes every rank's file of `version` from a level's store directory, under the store's lock; "
      "refuses a version that other versions there stand on unless with_dependents. Returns the versions "
      "removed, newest first.");
  m.def(
      "_cuda_pointer_is_managed",
      [](std::uintptr_t pointer) {
        const auto info = resurgo::gpu::describe_if_cuda_is_loaded(reinterpret_cast<const void*>(pointer));
        return info && info->kind == resurgo::MemoryKind::kManaged;
      },
      "pointer"_a,
      "Whether the CUDA driver, when this process has loaded it, says `pointer` is CUDA managed memory "
      "(False when it is not loaded: then the process holds no CUDA memory).");
  m.def("inspect", &inspect, "path"_a,
        "Parses a container file's header and index (no chunk data) into a dict.");
  m.def("_write_container", &write_container, "path"_a, "header"_a, "chunks"_a,
        "Writes a container file from a header dict (as inspect returns) and uncompressed chunks "
        "[(region index, offset, bytes)]; for tests and tools.");
  m.def("_read_region", &read_region, "path"_a, "region_id"_a,
        "The bytes of one region of a full version's container file, every chunk checksum verified.");
  m.def("_read_manifest_json", &read_manifest_json, "store_dir"_a, "version"_a,
        "The JSON line of a job manifest (vNNNNNNNNNN.job in a level's store directory), after its "
        "checksum line and content are verified.");
  m.def("verify", &verify, "path"_a, "progress"_a = nb::none(),
        "Reads every chunk of a container file and checks its checksum; "
        "progress(done, total) is called about every 64 MiB and at the end.");

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
      .def("dataset", &PyRuntime::dataset, "name"_a, "data"_a.noconvert(), "dtype"_a, "shape"_a, "halo"_a)
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
      .def("last_checkpoint", [](PyRuntime& r) { return checkpoint_report_dict(r.runtime().last_checkpoint()); })
      .def("last_restore", [](PyRuntime& r) { return restore_report_dict(r.runtime().last_restore()); })
      .def_prop_ro("bookkeeping_bytes", [](PyRuntime& r) { return r.runtime().bookkeeping_bytes(); });
}
