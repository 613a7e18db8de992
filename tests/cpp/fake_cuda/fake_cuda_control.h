/* The control API of the fake CUDA driver (fake_cuda_driver.cpp): what a
 * test uses to inject failures, set limits and read the driver's books.
 *
 * The library is loaded by resurgo (dlopen("libcuda.so.1")), never linked by
 * the tests: a test gets these functions with dlsym from
 * dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD), and finding them is how it
 * knows the driver is the fake. Every function may be called from any
 * thread, before or after cuInit. */
#ifndef RESURGO_FAKE_CUDA_CONTROL_H_
#define RESURGO_FAKE_CUDA_CONTROL_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What the driver holds now. Every count but the last two is of objects
 * created and not yet given back: after a test that cleaned up, all are 0. */
typedef struct FakeCudaCounters {
  uint64_t device_bytes;          /* cuMemAlloc and cuMemCreate bytes not yet freed, all devices */
  uint64_t device_allocations;    /* cuMemAlloc */
  uint64_t managed_allocations;   /* cuMemAllocManaged */
  uint64_t host_allocations;      /* cuMemHostAlloc */
  uint64_t physical_allocations;  /* cuMemCreate: freed once released and unmapped */
  uint64_t reservations;          /* cuMemAddressReserve */
  uint64_t mappings;              /* cuMemMap */
  uint64_t registered_bytes;      /* cuMemHostRegister */
  uint64_t registered_ranges;
  uint64_t streams;               /* cuStreamCreate; the null stream is not counted */
  uint64_t events;                /* cuEventCreate */
  uint64_t context_references;    /* cuDevicePrimaryCtxRetain not yet released, all devices */
  /* Since the last reset, not live objects: */
  uint64_t largest_registration;  /* the largest successful cuMemHostRegister */
  uint64_t async_failures;        /* stream operations that failed on the stream (see cuStreamSynchronize) */
} FakeCudaCounters;

/* Fills `counters` with what the driver holds now. */
void fake_cuda_counters(FakeCudaCounters* counters);

/* Puts every setting back to its default (failure rules, call counts, forked children's calls,
 * resolution counts, each device's copy count, one device, device memory
 * size, copy delay, registration limit and rate, copies across
 * registrations refused, held registrations released, driver version,
 * streams not held, kernel writes not run dropped), fills `leaked`
 * (may be null) with what the driver still holds, and returns the number of
 * objects leaked: the sum of the counts of live objects. Leaked objects stay
 * as they are (something may still use them). */
uint64_t fake_cuda_reset(FakeCudaCounters* leaked);

/* How many devices there are (1 to 8; default 1), each with its primary
 * context and its device memory. Returns 0, or -1 for a count out of range
 * or a change while a primary context is retained. */
int fake_cuda_set_device_count(int count);

/* One device's own books: what a test reads to see which device a store
 * used. */
typedef struct FakeCudaDeviceBooks {
  uint64_t device_bytes;        /* its cuMemAlloc and cuMemCreate bytes not yet freed */
  uint64_t copies;              /* copies and memsets run in its context (stream or synchronous) since the last reset */
  uint64_t context_references;  /* of its primary context */
} FakeCudaDeviceBooks;

/* Fills `books` with those of device `device` (0 to 7, counted or not).
 * Returns 0, or -1 for a device out of range or a null `books`. */
int fake_cuda_device_books(int device, FakeCudaDeviceBooks* books);

/* The device memory of each device, which its cuMemAlloc and cuMemCreate
 * share; beyond it they return CUDA_ERROR_OUT_OF_MEMORY. Default 16 GiB
 * (virtual: host memory is used only where written). */
void fake_cuda_set_device_memory(uint64_t bytes);

/* How long a stream operation waits after it was enqueued before it runs, so
 * that a caller that does not synchronise reads stale bytes. Default 200 us. */
void fake_cuda_set_copy_delay_us(uint32_t microseconds);

/* The most bytes one cuMemHostRegister call takes; larger calls return
 * CUDA_ERROR_OUT_OF_MEMORY (as r580 drivers do from 512 GiB). 0, the
 * default: no limit. */
void fake_cuda_set_host_register_limit(uint64_t bytes);

/* How fast cuMemHostRegister pins: the call sleeps bytes / rate (without
 * blocking other calls), and the range counts as registered only once it
 * returns. Default 8 GiB/s; 0: instant. */
void fake_cuda_set_host_register_rate(uint64_t bytes_per_second);

/* Whether a copy whose host side spans several registrations (or pinned
 * allocations) that lie back to back is accepted. The driver's
 * documentation does not say; the default refuses it
 * (CUDA_ERROR_INVALID_VALUE), as it refuses a span partly registered. */
void fake_cuda_set_copies_across_registrations(int allowed);

/* The cuMemHostRegister calls after the first `after_calls` ones from now
 * (counting those past the argument checks) block before they register,
 * their range not registered yet, until fake_cuda_release_host_register or
 * fake_cuda_reset. */
void fake_cuda_hold_host_register(uint64_t after_calls);
void fake_cuda_release_host_register(void);
/* cuMemHostRegister calls blocked by the hold now. */
uint64_t fake_cuda_host_register_waiting(void);
/* Waits until at least `count` calls are blocked by the hold, at most 10
 * seconds; returns how many are. */
uint64_t fake_cuda_wait_host_register_waiting(uint64_t count);

/* What cuDriverGetVersion reports, and the highest cudaVersion
 * cuGetProcAddress accepts; default CUDA_VERSION of the cuda.h the fake was
 * built with. */
void fake_cuda_set_driver_version(int version);

/* While `held` is not 0, no stream starts an operation (what is enqueued
 * waits): a test frees or unmaps memory under a copy in flight. Reset lets
 * the streams go. What the caller did before letting them go (0) happens
 * before every operation that starts after (for ThreadSanitizer). */
void fake_cuda_hold_streams(int held);

/* A GPU kernel's write to managed memory: `bytes` bytes, copied from
 * `source` now, to `target` (all of it in one cuMemAllocManaged
 * allocation), queued on `stream` (a CUstream of the current context; null:
 * its legacy null stream). Host loads see the old bytes until the write
 * ran: it joins the stream's queue when the stream is synchronised
 * (cuStreamSynchronize, a synchronous copy's wait on its null stream),
 * when its context is (cuCtxSynchronize), ahead of the next operation
 * enqueued on that stream, or when the stream is destroyed (its work still
 * runs); reset drops the writes not run. Returns a
 * CUresult: CUDA_ERROR_INVALID_VALUE for memory that is not managed,
 * CUDA_ERROR_INVALID_HANDLE for an unknown stream, CUDA_ERROR_INVALID_CONTEXT
 * without a current context. */
int fake_cuda_kernel_write(void* stream, void* target, const void* source, size_t bytes);

/* Injects `result` (a CUresult) into `entry_point` (a base name such as
 * "cuMemCreate", or "cuGetProcAddress"): the first `after_calls` calls from
 * now on run as usual, the `times` calls after them return `result` without
 * doing anything; times < 0: every call after them. Replaces an earlier rule
 * of the same entry point. Returns 0, or -1 for a name the fake does not
 * implement. */
int fake_cuda_fail(const char* entry_point, uint64_t after_calls, int result, int times);

/* Where the last cuMemPrefetchAsync of the managed allocation holding
 * `pointer` went: a device ordinal or CU_DEVICE_CPU (-1); CU_DEVICE_INVALID
 * (-2) before any, or for memory that is not managed. */
int fake_cuda_prefetch_location(const void* pointer);

/* Calls of any entry point made since the last reset by a forked child of
 * the process that called cuInit first (each refused with
 * CUDA_ERROR_NOT_PERMITTED and said on stderr): a forked checkpoint writer
 * must make none. Counted in memory shared with every child. */
uint64_t fake_cuda_forked_child_calls(void);

/* Calls of `entry_point` since the last reset, failed ones included. */
uint64_t fake_cuda_calls(const char* entry_point);

/* Host-to-device copies (cuMemcpyHtoD and cuMemcpyHtoDAsync) accepted since
 * the last reset whose host side lay wholly in memory CUDA knows (registered
 * or pinned: `registered` not 0) or wholly in pageable memory (0): a test
 * sees which memory a restore copied from. */
uint64_t fake_cuda_host_to_device_copies(int registered);

/* How many times since the last reset cuGetProcAddress handed out
 * `entry_point` (a base name) when asked with exactly `flags`
 * (CU_GET_PROC_ADDRESS_DEFAULT, _LEGACY_STREAM or
 * _PER_THREAD_DEFAULT_STREAM). */
uint64_t fake_cuda_resolved_with(const char* entry_point, uint64_t flags);

#ifdef __cplusplus
}
#endif

#endif /* RESURGO_FAKE_CUDA_CONTROL_H_ */
