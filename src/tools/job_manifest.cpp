// read_manifest(): a job manifest read and checked without a store, and
// the names of manifest files.
#include "format/file_names.h"
#include "format/manifest.h"
#include "resurgo/errors.hpp"
#include "resurgo/tools.hpp"

namespace resurgo::tools {

Manifest read_manifest(const std::string& store_dir, int version) {
  const std::string path = store_dir + "/" + format::manifest_file_name(version);
  std::unique_ptr<ReadableFile> file;
  try {
    file = Env::posix()->open(path);
  } catch (const NotFoundError&) {
    throw NotFoundError("no job manifest '" + path + "': version " + std::to_string(version) +
                        " of an MPI store is not committed in " + store_dir + " (`resurgo ls " + store_dir +
                        "` lists the versions there)");
  }
  return format::decode_manifest(format::read_manifest_file(*file), path);
}

std::optional<int> parse_manifest_file_name(const std::string& name) {
  int version = 0;
  if (!format::parse_manifest_file_name(name, version)) return std::nullopt;
  return version;
}

}  // namespace resurgo::tools
