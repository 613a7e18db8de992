// Texts sent between the ranks of a job (manifest parts, a manifest, the
// name of a shared file's temporary): the size first, bounded by the
// largest manifest before the receiver allocates, then the bytes.
#pragma once

#include <cstdint>
#include <string>

#include "format/manifest.h"
#include "resurgo/comm.hpp"
#include "resurgo/errors.hpp"

namespace resurgo {

inline void send_text(Comm& job, int to, const std::string& text) {
  const std::uint64_t bytes = text.size();
  job.send(to, &bytes, sizeof bytes);
  if (bytes > 0) job.send(to, text.data(), text.size());
}

// `what` names the text in the error for an oversized announcement.
inline std::string receive_text(Comm& job, int from, const char* what) {
  std::uint64_t bytes = 0;
  job.receive(from, &bytes, sizeof bytes);
  if (bytes > format::kMaxManifestBytes) {
    throw StateError("rank " + std::to_string(from) + " announced " + what + " of " + std::to_string(bytes) + " bytes");
  }
  std::string text(bytes, '\0');
  if (bytes > 0) job.receive(from, text.data(), text.size());
  return text;
}

}  // namespace resurgo
