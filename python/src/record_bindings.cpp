#include "record_bindings.h"

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/variant.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "records.h"
#include "resurgo/auto.hpp"
#include "resurgo/errors.hpp"
#include "resurgo/resurgo.hpp"
#include "resurgo/tools.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace {

// The region table entry the Python constructors of RegionDescription and
// ContainerRegion describe (kind: "host", "device" or "managed").
resurgo::RegionDescription described_region(int id, const std::string& label, std::uint64_t bytes,
                                            const std::string& kind, const std::string& dtype,
                                            const std::vector<std::int64_t>& shape) {
  return {id, label, bytes, {dtype, shape}, resurgo::tools::memory_kind_named(kind)};
}

// RegionDescription's fields, which ContainerRegion has too.
template <class Region>
Record<Region>& region_fields(Record<Region>& record) {
  using resurgo::RegionDescription;
  return record.field("id", &RegionDescription::id, "")
      .field("label", &RegionDescription::label, "")
      .converted("kind", [](const Region& r) { return resurgo::tools::memory_kind_name(r.kind); },
                 "\"host\", \"device\" (CUDA device memory) or \"managed\" (CUDA managed memory)")
      .field("bytes", &RegionDescription::bytes, "")
      .converted("dtype", [](const Region& r) { return r.type.dtype; },
                 "NumPy's dtype name (\"float32\"); \"\" when not known")
      .converted("shape", [](const Region& r) { return as_tuple(r.type.shape); }, "");
}

void bind_store_records(nb::module_& m) {
  using resurgo::LevelStats;
  using resurgo::RegionDescription;
  using resurgo::RestartReport;
  using resurgo::VersionDescription;
  using resurgo::VersionInfo;
  using resurgo::VersionStats;

  Record<VersionInfo>(m, "VersionInfo",
                      "One version of a store: where complete copies live and whether the pipeline still has "
                      "work to do for it.")
      .field("version", &VersionInfo::version, "")
      .converted("levels", [](const VersionInfo& v) { return as_tuple(v.levels); },
                 "levels holding a complete copy, ascending")
      .field("pending", &VersionInfo::pending, "captured, not yet durable everywhere it goes");

  Record<LevelStats> level(m, "LevelStats", "One level of a version's route.");
  level.field("level", &LevelStats::level, "")
      .converted("seconds_to_level", [](const LevelStats& l) { return none_if_negative(l.seconds_to_level); },
                 "from checkpoint() until durable there; None: not (yet)")
      .field("stored_bytes", &LevelStats::stored_bytes, "bytes of the version's file at this level")
      .field("write_seconds", &LevelStats::write_seconds, "the write (or the copy from the level before) itself");
  level.cls().def_prop_ro(
      "throughput",
      [](const LevelStats& l) { return l.write_seconds > 0 ? std::optional(l.throughput()) : std::nullopt; },
      "Bytes stored per second of the write, or None before it.");

  Record<VersionStats> version(m, "VersionStats", "What one checkpoint cost, and where it went.");
  version.field("version", &VersionStats::version, "")
      .field("capture", &VersionStats::capture,
             "\"copy\", \"synchronous\" (larger than the buffer), \"fork\", \"copy+fork\" (auto) or \"delta\"")
      .field("bytes", &VersionStats::bytes, "protected bytes (the state)")
      .field("blocking_seconds", &VersionStats::blocking_seconds, "time checkpoint() blocked the caller, in all")
      .field("backpressure_seconds", &VersionStats::backpressure_seconds,
             "... waiting for buffer space or the previous forked writer")
      .field("first_touch_seconds", &VersionStats::first_touch_seconds,
             "... faulting in buffer pages the prefault had not reached")
      .field("copy_seconds", &VersionStats::copy_seconds, "... copying into the buffer (copy) or forking (fork)")
      .field("copy_on_write_bytes", &VersionStats::copy_on_write_bytes,
             "fork: pages the application wrote while the child wrote")
      .converted("base_version", [](const VersionStats& s) { return none_if_negative(s.base_version); },
                 "the version a delta builds on; None for a full version")
      .field("captured_bytes", &VersionStats::captured_bytes, "bytes captured: the state, or a delta's blocks")
      .field("dirty_bytes", &VersionStats::dirty_bytes,
             "delta and auto modes: bytes in the pages the tracker reported written")
      .field("granularity_bytes", &VersionStats::granularity_bytes, "delta mode: largest management block in force")
      .converted("tracker", [](const VersionStats& s) { return none_if_empty(s.tracker); },
                 "delta and auto modes: \"uffd\", \"soft-dirty\", \"mprotect\" or \"hash\"")
      .converted("levels", [](const VersionStats& s) { return as_tuple(s.levels); }, "the version's route, in order")
      .converted("error", [](const VersionStats& s) { return none_if_empty(s.error); },
                 "background error of this version")
      .field("device_bytes", &VersionStats::device_bytes, "bytes of device regions")
      .converted("device_path", [](const VersionStats& s) { return none_if_empty(s.device_path); },
                 "\"l0\": copied device to device into the L0 device cache; \"host\": copied to host memory "
                 "before checkpoint() returned; None: no device regions")
      .field("device_wait_seconds", &VersionStats::device_wait_seconds,
             "part of copy_seconds waiting for L0 chunks to be mapped or flushed");
  version.cls()
      .def("at", [](const VersionStats& s, int l) { return s.at(l); }, "level"_a, nb::rv_policy::reference_internal,
           "The record of `level`, or None when the version does not go there.")
      .def(
          "seconds_to",
          [](const VersionStats& s, int l) {
            const LevelStats* entry = s.at(l);
            return entry ? none_if_negative(entry->seconds_to_level) : std::nullopt;
          },
          "level"_a, "Seconds from checkpoint() until durable at `level`, or None.");

  Record<RestartReport>(m, "RestartReport", "What the last restart restored, from where, and what it skipped.")
      .converted("version", [](const RestartReport& r) { return none_if_negative(r.version); },
                 "None before any restart succeeded")
      .converted("level", [](const RestartReport& r) { return none_if_negative(r.level); },
                 "the level its newest link (the version itself) was read from")
      .field("seconds", &RestartReport::seconds, "")
      .field("bytes", &RestartReport::bytes, "bytes of the regions restored")
      .converted("skipped", [](const RestartReport& r) { return as_tuple(r.skipped); },
                 "one line per damaged copy skipped or repaired, and per broken newer chain")
      .converted("chain", [](const RestartReport& r) { return as_tuple(r.chain); },
                 "versions read, newest first, down to a full version")
      .field("bytes_from_device_cache", &RestartReport::bytes_from_device_cache,
             "of `bytes`, device regions copied from the L0 device cache")
      .field("bytes_read", &RestartReport::bytes_read,
             "restart on another number of ranks: stored bytes of the chunks read from the old ranks' files")
      .field("written_by_ranks", &RestartReport::written_by_ranks,
             "the rank count of the job that wrote the version; 0: this job's")
      .converted("rebuilt", [](const RestartReport& r) { return as_tuple(r.rebuilt); },
                 "MPI stores with L3: one line per lost rank rebuilt from partner copies (or why not)")
      .field("rebuild_seconds", &RestartReport::rebuild_seconds, "");

  Record<RegionDescription> region(m, "RegionDescription", "A region as a version's region table records it.");
  region_fields(region).cls().def(
      "__init__",
      [](RegionDescription* self, int id, const std::string& label, std::uint64_t bytes, const std::string& kind,
         const std::string& dtype, const std::vector<std::int64_t>& shape) {
        new (self) RegionDescription{described_region(id, label, bytes, kind, dtype, shape)};
      },
      "id"_a, "label"_a, "bytes"_a, "kind"_a = "host", "dtype"_a = "", "shape"_a = std::vector<std::int64_t>{},
      "A region table entry, for ContainerHeader (write_container: tests).");

  Record<VersionDescription>(m, "VersionDescription",
                             "What a committed version holds, read from its header (not its data).")
      .field("version", &VersionDescription::version, "")
      .converted("regions", [](const VersionDescription& d) { return as_tuple(d.regions); }, "")
      .converted("metadata", [](const VersionDescription& d) { return as_bytes(d.metadata); }, "");
}

void bind_device_records(nb::module_& m) {
  using resurgo::DeviceCacheStats;
  using resurgo::DeviceStats;
  using resurgo::LatePinStats;
  using resurgo::TouchDecision;
  using resurgo::TouchEstimate;
  using resurgo::TouchModelInputs;
  using resurgo::TouchRates;

  Record<DeviceCacheStats>(m, "DeviceCacheStats",
                           "The L0 device cache: its mapping, the versions it holds, what it cost.")
      .field("device", &DeviceCacheStats::device, "the ordinal of the device it is on (device.ordinal)")
      .field("capacity", &DeviceCacheStats::capacity, "reserved bytes")
      .field("mapped", &DeviceCacheStats::mapped, "bytes usable now")
      .field("used", &DeviceCacheStats::used, "bytes held by cached versions")
      .field("versions", &DeviceCacheStats::versions, "cached versions")
      .field("evicted", &DeviceCacheStats::evicted, "versions evicted so far")
      .field("bypassed", &DeviceCacheStats::bypassed,
             "captures too large for the cache, copied to host memory at once")
      .field("growth_done", &DeviceCacheStats::growth_done, "fully mapped, or stopped growing")
      .converted("growth_stopped", [](const DeviceCacheStats& s) { return none_if_empty(s.growth_stopped); },
                 "why mapping stopped early")
      .field("mapping_seconds", &DeviceCacheStats::mapping_seconds,
             "from open to the end of mapping (once growth_done)")
      .field("map_wait_seconds", &DeviceCacheStats::map_wait_seconds,
             "captures waiting for chunks to be mapped, in all")
      .field("flush_wait_seconds", &DeviceCacheStats::flush_wait_seconds,
             "captures waiting for the oldest version to be flushed, in all")
      .field("prefetched", &DeviceCacheStats::prefetched, "versions prefetch() staged into the cache")
      .field("prefetch_too_large", &DeviceCacheStats::prefetch_too_large,
             "versions too large for the cache: restored from host memory instead")
      .field("prefetch_failed", &DeviceCacheStats::prefetch_failed,
             "stagings that failed: those versions were restored from the next level")
      .field("restored_from_prefetch", &DeviceCacheStats::restored_from_prefetch,
             "restarts that copied a staged version device to device");

  Record<TouchRates>(m, "TouchRates", "Bandwidths in bytes per second; 0 where there was no sample.")
      .field("touch_alone", &TouchRates::touch_alone, "T: touching, no flush running")
      .field("touch_concurrent", &TouchRates::touch_concurrent, "Tc: touching while a flush runs")
      .field("flush_touched", &TouchRates::flush_touched, "Ft: a flush into touched pages, no touching meanwhile")
      .field("flush_untouched", &TouchRates::flush_untouched, "Fu: a flush into untouched pages")
      .field("flush_concurrent", &TouchRates::flush_concurrent, "Fc: a flush into touched pages while touching runs");

  Record<TouchModelInputs>(m, "TouchModelInputs", "What the touch model decided from.")
      .field("rates", &TouchModelInputs::rates, "measured (0: no sample yet)")
      .field("checkpoint_bytes", &TouchModelInputs::checkpoint_bytes, "S: bytes each upcoming flush writes")
      .field("compute_seconds", &TouchModelInputs::compute_seconds, "C: compute between two checkpoints")
      .field("untouched_bytes", &TouchModelInputs::untouched_bytes, "U: bytes of the buffer not touched yet")
      .field("touched_ahead_bytes", &TouchModelInputs::touched_ahead_bytes,
             "L: touched bytes right after where the next flush starts")
      .field("flushes_overlap_compute", &TouchModelInputs::flushes_overlap_compute,
             "a flush runs while the application computes the next iteration");

  Record<TouchEstimate>(m, "TouchEstimate", "One strategy's estimate over the model's horizon.")
      .field("flush_seconds", &TouchEstimate::flush_seconds, "flush time over the horizon")
      .field("iterations_to_touch_all", &TouchEstimate::iterations_to_touch_all, "");

  Record<TouchDecision>(m, "TouchDecision", "The touch model's latest choice, with its inputs and both estimates.")
      .converted("strategy", [](const TouchDecision& t) { return resurgo::to_string(t.strategy); },
                 "\"concurrent\" or \"sequential\"")
      .converted("measured", [](const TouchDecision& t) { return t.inputs.rates; }, "the rates it was given")
      .field("rates", &TouchDecision::rates, "completed: measured, or derived as `derived` says")
      .field("derived", &TouchDecision::derived, "the rates derived, e.g. \"Tc, Fc\"; \"\" when all were measured")
      .field("inputs", &TouchDecision::inputs, "")
      .field("horizon_iterations", &TouchDecision::horizon_iterations, "both estimates cover this many flushes")
      .converted("concurrent_flush_seconds", [](const TouchDecision& t) { return t.concurrent.flush_seconds; }, "")
      .converted("sequential_flush_seconds", [](const TouchDecision& t) { return t.sequential.flush_seconds; }, "")
      .converted("description", [](const TouchDecision& t) { return t.describe(); }, "the line the log shows")
      .field("concurrent", &TouchDecision::concurrent, "")
      .field("sequential", &TouchDecision::sequential, "");

  Record<LatePinStats>(m, "StagingBufferStats",
                       "The staging buffer device regions pass through on their way to host memory; it pins late.")
      .field("capacity", &LatePinStats::capacity, "")
      .converted("pin", [](const LatePinStats& s) { return resurgo::to_string(s.pin); },
                 "\"lazy\", \"eager\" or \"off\"")
      .converted("touch", [](const LatePinStats& s) { return resurgo::to_string(s.touch); },
                 "\"auto\", \"concurrent\" or \"sequential\" (the setting)")
      .converted("state", [](const LatePinStats& s) { return resurgo::to_string(s.state); },
                 "\"touching\", \"pinning\", \"pinned\", \"pin failed\", ...")
      .converted("strategy", [](const LatePinStats& s) { return resurgo::to_string(s.strategy); },
                 "the touch strategy in force")
      .field("touched_bytes", &LatePinStats::touched_bytes, "")
      .field("touch_seconds", &LatePinStats::touch_seconds, "")
      .converted("touch_stopped", [](const LatePinStats& s) { return none_if_empty(s.touch_stopped); },
                 "why touching stopped early")
      .field("pinned", &LatePinStats::pinned, "")
      .field("pin_pieces", &LatePinStats::pin_pieces, "")
      .field("pin_seconds", &LatePinStats::pin_seconds, "")
      .field("token_wait_seconds", &LatePinStats::token_wait_seconds, "")
      .converted("pin_failure", [](const LatePinStats& s) { return none_if_empty(s.pin_failure); },
                 "the driver's error when pinning failed")
      .field("flushes", &LatePinStats::flushes, "")
      .field("flushes_to_untouched", &LatePinStats::flushes_to_untouched, "")
      .field("bytes_flushed_to_untouched", &LatePinStats::bytes_flushed_to_untouched, "")
      .field("checkpoints", &LatePinStats::checkpoints, "")
      .field("measured", &LatePinStats::measured, "")
      .field("decision", &LatePinStats::decision, "");

  Record<DeviceStats>(m, "DeviceStats", "Store.device_stats(): each part is None until the store has it.")
      .field("cache", &DeviceStats::cache, "with device.capacity > 0 and a usable backend")
      .field("staging", &DeviceStats::staging, "from the first checkpoint of a device region");
}

void bind_auto_records(nb::module_& m) {
  using resurgo::autockpt::CheckpointReport;
  using resurgo::autockpt::RestoreReport;

  Record<CheckpointReport>(m, "CheckpointReport", "The newest automatic checkpoint taken by this process.")
      .field("version", &CheckpointReport::version, "")
      .field("loop_index", &CheckpointReport::loop_index, "the loop (1-based) before which it was taken")
      .field("location", &CheckpointReport::location, "that loop's name, or \"fastfw\" / \"datlist\"")
      .converted("saved", [](const CheckpointReport& r) { return as_tuple(r.saved); }, "datasets saved whole")
      .converted("halos", [](const CheckpointReport& r) { return as_tuple(r.halos); },
                 "datasets of which only the halo ring was saved")
      .field("dataset_bytes", &CheckpointReport::dataset_bytes, "")
      .field("query_log_bytes", &CheckpointReport::query_log_bytes, "")
      .field("payload_bytes", &CheckpointReport::payload_bytes, "")
      .field("staged_bytes", &CheckpointReport::staged_bytes,
             "copied aside because a loop of the region was about to change them")
      .field("region_loops", &CheckpointReport::region_loops, "loops the checkpointing region spanned")
      .field("timed_out", &CheckpointReport::timed_out, "closed by region_timeout_loops")
      .field("blocking_seconds", &CheckpointReport::blocking_seconds,
             "time the runtime held the application over the region");

  Record<RestoreReport>(m, "RestoreReport", "The restore of this process, when it restarted from a checkpoint.")
      .field("version", &RestoreReport::version, "")
      .field("loop_index", &RestoreReport::loop_index, "where execution resumed")
      .field("skipped_loops", &RestoreReport::skipped_loops, "loops replayed without executing them")
      .field("replayed_queries", &RestoreReport::replayed_queries, "")
      .field("fast_forward", &RestoreReport::fast_forward, "resumed at fastfw()/datlist() from the payload")
      .field("read_seconds", &RestoreReport::read_seconds,
             "the query log at attach, the datasets at the resume point")
      .field("replay_seconds", &RestoreReport::replay_seconds,
             "from the end of the first read (or of the initialisation phase) to the resume point")
      .field("ranks", &RestoreReport::ranks,
             "the rank count that wrote it (0: a version written before it was recorded)");
}

// ContainerHeader's fields, which ContainerInfo has too.
template <class Header>
Record<Header>& header_fields(Record<Header>& record) {
  using resurgo::tools::ContainerHeader;
  return record.field("store", &ContainerHeader::store, "")
      .field("version", &ContainerHeader::version, "")
      .field("rank", &ContainerHeader::rank, "")
      .field("base_version", &ContainerHeader::base_version, "the version a delta builds on; -1 for a full version")
      .field("created_unix_ns", &ContainerHeader::created_unix_ns, "")
      .field("chunk_size", &ContainerHeader::chunk_size, "")
      .converted("metadata", [](const Header& h) { return as_bytes(h.metadata); }, "")
      .converted("regions", [](const Header& h) { return as_tuple(h.regions); }, "the region table");
}

// A recorded device as Python sees it (ContainerRegion.device): the
// ordinal, "host" or "unknown"; None where nothing is recorded.
using PythonDevice = std::variant<int, std::string>;

std::optional<PythonDevice> python_device(const std::optional<int>& device) {
  if (!device) return std::nullopt;
  if (*device == resurgo::tools::kRecordedHost) return "host";
  if (*device == resurgo::tools::kRecordedUnknown) return "unknown";
  return *device;
}

// The inverse, for a region to write (tests): an int is written as given,
// so that a test may write a value the readers refuse.
std::optional<int> recorded_device(const std::optional<PythonDevice>& device) {
  if (!device) return std::nullopt;
  if (const int* ordinal = std::get_if<int>(&*device)) return *ordinal;
  const std::string& name = std::get<std::string>(*device);
  if (name == "host") return resurgo::tools::kRecordedHost;
  if (name == "unknown") return resurgo::tools::kRecordedUnknown;
  throw resurgo::InvalidArgumentError("device '" + name +
                                      "' names no recorded device: give an ordinal, \"host\", \"unknown\" or None");
}

void bind_container_region(nb::module_& m) {
  using resurgo::RegionDescription;
  using resurgo::tools::ContainerRegion;

  Record<ContainerRegion> region(m, "ContainerRegion",
                                 "An entry of a container file's region table, as inspect() reads it.");
  region_fields(region).converted(
      "device", [](const ContainerRegion& r) { return python_device(r.device); },
      "where a managed region was when its version was taken, as container format 3 records it: the device "
      "ordinal, \"host\", or \"unknown\" (the driver could not say); restart prefetches the region back there. "
      "None where nothing is recorded: host and device regions, and every region of a format 1 or 2 file");
  region.cls()
      .def(
          "__init__",
          [](ContainerRegion* self, int id, const std::string& label, std::uint64_t bytes, const std::string& kind,
             const std::string& dtype, const std::vector<std::int64_t>& shape,
             const std::optional<PythonDevice>& device) {
            new (self) ContainerRegion{described_region(id, label, bytes, kind, dtype, shape), recorded_device(device)};
          },
          "id"_a, "label"_a, "bytes"_a, "kind"_a = "host", "dtype"_a = "", "shape"_a = std::vector<std::int64_t>{},
          "device"_a = nb::none(),
          "A region table entry, for ContainerHeader (write_container: tests); a device makes the file format 3.")
      .def(
          "__init__", [](ContainerRegion* self, const RegionDescription& r) { new (self) ContainerRegion{r, {}}; },
          "region"_a, "The entry of `region`, recording no device.");
  nb::implicitly_convertible<RegionDescription, ContainerRegion>();
}

void bind_tool_records(nb::module_& m) {
  using resurgo::Manifest;
  using resurgo::ManifestFile;
  using resurgo::ManifestRegion;
  using resurgo::tools::ChunkInfo;
  using resurgo::tools::ContainerHeader;
  using resurgo::tools::ContainerInfo;
  using resurgo::tools::ContainerRegion;
  using resurgo::tools::VerifyReport;

  bind_container_region(m);
  Record<ContainerHeader> header(m, "ContainerHeader", "The header of a container file: one version of one rank.");
  header_fields(header).cls().def(
      "__init__",
      [](ContainerHeader* self, const std::string& store, std::int64_t version, std::uint64_t chunk_size,
         const std::vector<ContainerRegion>& regions, std::uint32_t rank, std::int64_t base_version,
         nb::bytes metadata) {
        const auto* bytes = reinterpret_cast<const std::byte*>(metadata.c_str());
        new (self) ContainerHeader{store, version, rank, base_version, 0, chunk_size,
                                   {bytes, bytes + metadata.size()}, regions};
      },
      "store"_a, "version"_a, "chunk_size"_a, "regions"_a, "rank"_a = 0, "base_version"_a = -1,
      "metadata"_a = nb::bytes("", 0), "A header to write (write_container: tests).");

  Record<ChunkInfo>(m, "ChunkInfo", "One entry of a container's index.")
      .field("region", &ChunkInfo::region, "index into regions")
      .field("offset", &ChunkInfo::offset, "byte offset inside the region")
      .field("raw_length", &ChunkInfo::raw_length, "")
      .field("stored_length", &ChunkInfo::stored_length, "")
      .field("codec", &ChunkInfo::codec, "\"none\", \"lz4\", \"zstd\", \"blosc-lz4\", \"blosc-zstd\"")
      .field("checksum", &ChunkInfo::checksum, "XXH3-64 of the stored bytes")
      .field("file_offset", &ChunkInfo::file_offset, "where the stored bytes start in the file");

  Record<ContainerInfo> info(m, "ContainerInfo", "A container's header and index, as inspect() reads them.");
  info.field("format_version", &ContainerInfo::format_version,
             "1 to 3: 3 where a managed region records its device, 2 otherwise, 1 before the store identity");
  header_fields(info)
      .converted("chunks", [](const ContainerInfo& c) { return as_tuple(c.chunks); }, "in file order")
      .field("file_size", &ContainerInfo::file_size, "")
      .field("index_offset", &ContainerInfo::index_offset, "")
      .field("checksum", &ContainerInfo::checksum,
             "of header and index, from the footer: identifies the file's content");

  Record<VerifyReport>(m, "VerifyReport", "What verify() read.")
      .field("chunks", &VerifyReport::chunks, "")
      .field("bytes", &VerifyReport::bytes, "raw bytes of every chunk");

  Record<ManifestFile>(m, "ManifestFile", "One rank's container file of a job manifest's version.")
      .field("rank", &ManifestFile::rank, "")
      .field("node", &ManifestFile::node, "")
      .field("file", &ManifestFile::file, "container file name, in the level's store directory")
      .field("bytes", &ManifestFile::bytes, "")
      .field("checksum", &ManifestFile::checksum, "the container's header+index checksum (ContainerInfo.checksum)");

  Record<ManifestRegion>(m, "ManifestRegion",
                         "One region of one rank; a block of a global array when global_shape is not empty.")
      .field("rank", &ManifestRegion::rank, "")
      .field("id", &ManifestRegion::id, "")
      .field("label", &ManifestRegion::label, "")
      .field("dtype", &ManifestRegion::dtype, "")
      .field("bytes", &ManifestRegion::bytes, "")
      .converted("shape", [](const ManifestRegion& r) { return as_tuple(r.shape); }, "")
      .converted("global_shape", [](const ManifestRegion& r) { return as_tuple(r.global_shape); }, "")
      .converted("offset", [](const ManifestRegion& r) { return as_tuple(r.offset); },
                 "element index of the block's first element in the global array");

  Record<Manifest>(m, "Manifest", "The job manifest of a version of an MPI store.")
      .field("store", &Manifest::store, "")
      .field("version", &Manifest::version, "")
      .field("ranks", &Manifest::ranks, "")
      .converted("files", [](const Manifest& j) { return as_tuple(j.files); }, "one per rank, by rank")
      .converted("regions", [](const Manifest& j) { return as_tuple(j.regions); }, "by rank, then region id");
}

}  // namespace

void bind_records(nb::module_& m) {
  bind_store_records(m);
  bind_device_records(m);
  bind_auto_records(m);
  bind_tool_records(m);
}
