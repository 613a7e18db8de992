// Turns one captured version into a container file: splits every region into
// chunks, checksums (and compresses) them on the pipeline threads, and
// writes them in order.
#pragma once

#include <cstddef>
#include <vector>

#include "format/container.h"
#include "pipeline/thread_pool.h"
#include "resurgo/config.hpp"

namespace resurgo {

// sources[i] holds header.regions[i].bytes bytes. Returns the file's size.
std::uint64_t write_version(WritableFile& file, const format::Header& header, const std::vector<const std::byte*>& sources,
                   const Config::Pipeline& pipeline, ThreadPool& pool);

}  // namespace resurgo
