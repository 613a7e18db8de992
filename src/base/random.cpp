#include "base/random.h"

#include <sys/random.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "resurgo/errors.hpp"

namespace resurgo {

void fill_random(void* data, std::size_t bytes) {
  auto* out = static_cast<unsigned char*>(data);
  std::size_t filled = 0;
  while (filled < bytes) {
    const ssize_t got = ::getrandom(out + filled, bytes - filled, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw StorageError(std::string("cannot draw random bytes: getrandom failed: ") + std::strerror(errno));
    filled += static_cast<std::size_t>(got);
  }
}

std::string random_hex(std::size_t bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::vector<unsigned char> drawn(bytes);
  fill_random(drawn.data(), drawn.size());
  std::string text;
  for (const unsigned char byte : drawn) {
    text += kDigits[byte >> 4];
    text += kDigits[byte & 15];
  }
  return text;
}

}  // namespace resurgo
