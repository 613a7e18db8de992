#include "tools_bindings.h"

#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "resurgo/global_file.hpp"
#include "resurgo/resurgo.hpp"
#include "resurgo/tools.hpp"
#include "without_gil.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace {

resurgo::tools::VerifyReport verify(const std::string& path, nb::object progress) {
  resurgo::tools::VerifyProgress report;
  if (!progress.is_none()) {
    report = [&progress](std::uint64_t done, std::uint64_t total) {
      nb::gil_scoped_acquire gil;
      progress(done, total);
    };
  }
  return without_gil([&] { return resurgo::tools::verify(path, report); });
}

// The region is read into a bytes object allocated at its size, without the
// GIL: a region may be most of the memory.
nb::bytes read_region(const std::string& path, int region_id) {
  nb::object region;
  without_gil([&] {
    resurgo::tools::read_region(path, region_id, [&region](std::uint64_t bytes) -> void* {
      nb::gil_scoped_acquire gil;
      region = nb::steal(PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(bytes)));
      if (!region.is_valid()) throw nb::python_error();
      return PyBytes_AS_STRING(region.ptr());
    });
  });
  return nb::borrow<nb::bytes>(region);
}

// (rank, offset, bytes, ContainerInfo) per part: the CLI's shape of a
// SharedPartInfo, without a record type of its own.
using SharedPartTuple = std::tuple<int, std::uint64_t, std::uint64_t, resurgo::tools::ContainerInfo>;

std::tuple<std::int64_t, std::uint64_t, std::vector<SharedPartTuple>> inspect_shared(const std::string& path) {
  const resurgo::tools::SharedFileInfo info = without_gil([&] { return resurgo::tools::inspect_shared(path); });
  std::vector<SharedPartTuple> parts;
  for (const resurgo::tools::SharedPartInfo& part : info.parts) {
    parts.emplace_back(part.rank, part.offset, part.bytes, part.container);
  }
  return {info.version, info.file_size, std::move(parts)};
}

using ChunkArgument = std::tuple<std::uint32_t, std::uint64_t, nb::bytes>;  // (region index, offset, bytes)

void write_container(const std::string& path, const resurgo::tools::ContainerHeader& header,
                     const std::vector<ChunkArgument>& chunks) {
  std::vector<resurgo::tools::ChunkBytes> parts;
  for (const auto& [region, offset, bytes] : chunks) {
    parts.push_back({region, offset, {reinterpret_cast<const std::byte*>(bytes.c_str()), bytes.size()}});
  }
  without_gil([&] { resurgo::tools::write_container(path, header, parts); });
}

// A global-layout file of ConvergentMatrix read or verified by this process
// alone (no MPI needed): its header as (rows, cols, element bytes,
// row-major, epoch), and its elements into the bytes of an array the
// Python layer shaped from it (resurgo/matrix.py: global_file_info,
// load_global; the CLI's inspect and verify).
using Bytes = nb::ndarray<std::uint8_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using HeaderTuple = std::tuple<std::int64_t, std::int64_t, std::size_t, bool, std::uint64_t>;

HeaderTuple header_tuple(const resurgo::GlobalFileHeader& h) {
  return {h.rows, h.cols, h.element_bytes, h.order == resurgo::MatrixOrder::kRowMajor, h.epoch};
}

HeaderTuple read_global_file_header(const std::string& path) {
  return header_tuple(without_gil([&] { return resurgo::read_global_file_header(path); }));
}

HeaderTuple verify_global_file(const std::string& path) {
  return header_tuple(without_gil([&] { return resurgo::verify_global_file(path); }));
}

void read_global_file(const std::string& path, Bytes into) {
  without_gil([&] { resurgo::read_global_file(path, into.data(), into.size()); });
}

}  // namespace

void bind_tools(nb::module_& m) {
  m.def(
      "inspect", [](const std::string& path) { return without_gil([&] { return resurgo::tools::inspect(path); }); },
      "path"_a, "A container file's header and index (no chunk data), checked: ContainerInfo.");
  m.def("inspect_shared", &inspect_shared, "path"_a,
        "A shared file's part index and each part's header and index (no chunk data), checked: "
        "(version, file size, [(rank, offset, bytes, ContainerInfo)]).");
  m.def("verify", &verify, "path"_a, "progress"_a = nb::none(),
        "Reads every chunk of a container file and checks its checksum; progress(done, total) is called "
        "about every 64 MiB and at the end. Returns a VerifyReport.");
  m.def("read_region", &read_region, "path"_a, "region_id"_a,
        "The bytes of one region of a full version's container file, every chunk checksum verified.");
  m.def(
      "read_manifest",
      [](const std::string& store_dir, int version) {
        return without_gil([&] { return resurgo::tools::read_manifest(store_dir, version); });
      },
      "store_dir"_a, "version"_a,
      "The job manifest of `version` in a level's store directory, its checksum and content checked.");
  m.def("parse_container_file_name", &resurgo::tools::parse_container_file_name, "name"_a,
        "(version, rank) of a container file name such as v0000000012.r000000.rsg, else None.");
  m.def("parse_shared_file_name", &resurgo::tools::parse_shared_file_name, "name"_a,
        "The version of a shared file's name such as v0000000012.shared.rsg, else None.");
  m.def("parse_manifest_file_name", &resurgo::tools::parse_manifest_file_name, "name"_a,
        "The version of a job manifest's file name such as v0000000012.job, else None.");
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
      "cuda_memory_kind",
      [](std::uintptr_t pointer) -> std::optional<std::string> {
        const auto kind = resurgo::tools::cuda_memory_kind(reinterpret_cast<const void*>(pointer));
        if (!kind) return std::nullopt;
        return resurgo::tools::memory_kind_name(*kind);
      },
      "pointer"_a,
      "\"host\", \"device\" or \"managed\": what the CUDA driver, when this process has loaded it, says "
      "`pointer` is; None when it is not loaded (then the process holds no CUDA memory).");
  m.def("read_global_file_header", &read_global_file_header, "path"_a);
  m.def("read_global_file", &read_global_file, "path"_a, "into"_a);
  m.def("verify_global_file", &verify_global_file, "path"_a);
  m.attr("GLOBAL_FILE_MAGIC") = nb::bytes(resurgo::kGlobalFileMagic, sizeof(resurgo::kGlobalFileMagic));
  m.def("_write_container", &write_container, "path"_a, "header"_a, "chunks"_a,
        "For tests: writes a container file from a ContainerHeader and uncompressed chunks "
        "[(region index, offset, bytes)]; the readers' checks apply when it is read back.");
}
