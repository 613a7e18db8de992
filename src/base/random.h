// Random bytes from the kernel (getrandom(2)), for what must not be
// guessed or repeated: temporary file names another user could otherwise
// plant first, and store identities (format/store_id.h).
#pragma once

#include <cstddef>
#include <string>

namespace resurgo {

// Fills `bytes` bytes at `data`; StorageError when the kernel gives none.
void fill_random(void* data, std::size_t bytes);
// `bytes` random bytes as 2 * `bytes` lowercase hex digits.
std::string random_hex(std::size_t bytes);

}  // namespace resurgo
