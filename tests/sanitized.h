// Whether this test binary runs with AddressSanitizer or ThreadSanitizer:
// their allocators (GCC 12's libsanitizer) are not fork-safe, so a process
// forked while other threads allocate can deadlock in the child
// (tests/fault/campaign_main.h, docs/reliability.md section 5).
//
// Asked of the runtime in the process, not of the compiler's macros: `make
// test-asan` runs build/cpp's GoogleTest program, compiled without
// instrumentation and linked without the runtime, with the ASan runtime
// preloaded (Makefile). The weak references see a runtime linked in;
// dlsym sees a preloaded one.
#pragma once

#include <dlfcn.h>

extern "C" {
void __asan_init() __attribute__((weak));
void __tsan_init() __attribute__((weak));
}

namespace resurgo {

inline bool sanitizer_runtime_loaded(void (*linked_init)(), const char* init_name) {
  return linked_init != nullptr || ::dlsym(RTLD_DEFAULT, init_name) != nullptr;
}

inline const bool kAddressSanitized = sanitizer_runtime_loaded(&__asan_init, "__asan_init");
inline const bool kThreadSanitized = sanitizer_runtime_loaded(&__tsan_init, "__tsan_init");
inline const bool kSanitized = kAddressSanitized || kThreadSanitized;

}  // namespace resurgo
