/* Resurgo C API: asynchronous multi-level checkpoint/restart.
 *
 * Every call returns RSG_OK (0) or a negative RSG_E* code; rsg_last_error()
 * returns a thread-local message naming the cause (region label, version,
 * path) of the last failure on the calling thread.
 */
#ifndef RESURGO_RESURGO_H
#define RESURGO_RESURGO_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RSG_OK 0
#define RSG_EINVAL (-1)    /* bad argument: null pointer, zero size, bad name   */
#define RSG_ENOTFOUND (-2) /* no such version, region or file                  */
#define RSG_ECORRUPT (-3)  /* checksum mismatch or damaged file                */
#define RSG_EMISMATCH (-4) /* checkpoint does not fit the protected regions    */
#define RSG_ESTORAGE (-5)  /* file-system error (ENOSPC, EIO, permissions)     */
#define RSG_ECONFIG (-6)   /* unknown configuration key or bad value           */
#define RSG_EFORMAT (-7)   /* not a Resurgo container, or unsupported version  */
#define RSG_ESTATE (-8)    /* call not valid now (store closed, ...)           */
#define RSG_EINTERNAL (-9) /* unexpected failure; please report it             */

#define RSG_L0 0 /* device cache (GPU memory)                */
#define RSG_L1 1 /* memory level: whole versions in host RAM */
#define RSG_L2 2 /* node-local directory                     */
#define RSG_L3 3 /* partner copy on another node             */
#define RSG_L4 4 /* persistent (parallel) file system        */

#define RSG_ALL (-1)    /* rsg_wait: every pending version      */
#define RSG_LATEST (-1) /* rsg_restart: newest intact version   */

typedef struct rsg_store rsg_store;

#define RSG_LEVELS 5 /* arrays indexed by level: RSG_L0 .. RSG_L4 */

/* What one checkpoint cost (rsg_stats). Times are seconds; a
 * per-level entry is -1 where the version does not go or has not arrived. */
typedef struct rsg_version_stats {
  int version;
  char capture[16];               /* "copy", "synchronous", "fork" or "delta" */
  unsigned long long bytes;       /* protected bytes captured */
  double blocking_seconds;        /* time rsg_checkpoint blocked, in all */
  double backpressure_seconds;    /* ... waiting for buffer space, the previous forked writer or a level */
  double first_touch_seconds;     /* ... faulting in buffer pages */
  double copy_seconds;            /* ... copying (copy) or forking (fork) */
  unsigned long long copy_on_write_bytes; /* fork: pages written while the child wrote */
  double seconds_to_level[RSG_LEVELS];    /* from rsg_checkpoint until durable there */
  long long stored_bytes[RSG_LEVELS];     /* bytes of the file at each level; -1 = none */
  /* 1 when a background error hit this version. Its message (C++ VersionStats::error) is not
   * copied here: the next call on the store returned the error, with the message in rsg_last_error(). */
  int failed;
  /* capture.mode = "delta" (docs/tracking.md): */
  int base_version;                       /* the version a delta builds on; -1 = full */
  unsigned long long captured_bytes;      /* bytes captured: the state, or the delta's blocks */
  unsigned long long dirty_bytes;         /* bytes in the pages the tracker reported written */
  unsigned long long granularity_bytes;   /* largest management block in force */
  char tracker[16];                       /* "uffd", "soft-dirty", "mprotect", "hash"; "" otherwise */
  /* Device regions (docs/gpu.md): */
  unsigned long long device_bytes;        /* bytes of device and managed regions */
  char device_path[8];                    /* "l0" (into the L0 device cache), "host" (copied to host at once), "" */
  double device_wait_seconds;             /* part of copy_seconds waiting for L0 chunks to be mapped or flushed */
} rsg_version_stats;

/* The device regions' caches (rsg_device_stats; docs/gpu.md): the L0 device
 * cache and the host staging buffer they are copied into, which pins late.
 * Strings are "" where there is nothing to say. */
typedef struct rsg_device_caches {
  int has_cache;                          /* 1 with device.capacity > 0 and a usable backend */
  unsigned long long cache_capacity;      /* reserved bytes */
  unsigned long long cache_mapped;        /* bytes usable now */
  unsigned long long cache_used;          /* bytes held by cached versions */
  unsigned long long cache_versions;      /* cached versions */
  unsigned long long cache_evicted;       /* versions evicted so far */
  unsigned long long cache_bypassed;      /* versions too large for L0, copied to host at once */
  int cache_growth_done;                  /* fully mapped, or stopped growing */
  char cache_growth_stopped[256];         /* why mapping stopped early */
  double cache_mapping_seconds;           /* from open to the end of mapping */
  double cache_map_wait_seconds;          /* captures waiting for chunks to be mapped, in all */
  double cache_flush_wait_seconds;        /* captures waiting for the oldest version's flush, in all */
  int cache_device;                       /* the ordinal of the device it is on (device.ordinal) */
  unsigned long long cache_prefetched;    /* versions rsg_prefetch staged into the cache */
  unsigned long long cache_prefetch_too_large;      /* too large for it: restored from host memory */
  unsigned long long cache_prefetch_failed;         /* stagings that failed: restored from the next level */
  unsigned long long cache_restored_from_prefetch;  /* restarts copying a staged version device to device */
  int has_staging;                        /* 1 once a device region was checkpointed */
  unsigned long long staging_capacity;
  char pin[8];                            /* "lazy", "eager", "off" */
  char touch[16];                         /* the setting: "auto", "concurrent", "sequential" */
  char state[40];                         /* "touching", "pinning", "pinned", "pin failed", ... */
  char strategy[16];                      /* the touch strategy in force */
  unsigned long long touched_bytes;
  double touch_seconds;
  int pinned;
  unsigned long long pin_pieces;
  double pin_seconds;
  double token_wait_seconds;
  char pin_failure[256];                  /* the driver's error when pinning failed */
  unsigned long long flushes;
  unsigned long long flushes_to_untouched;
  unsigned long long checkpoints;
  /* The touch model's measured rates, bytes per second (0: no sample yet). */
  double touch_alone, touch_concurrent, flush_touched, flush_untouched, flush_concurrent;
  char decision[512];                     /* its latest choice with every input, one line */
} rsg_device_caches;

/* The last restart (rsg_last_restart). */
typedef struct rsg_restart_report {
  int version;                    /* restored; -1 before any restart succeeded */
  int level;                      /* read from; -1 likewise */
  double seconds;
  unsigned long long bytes;
  int skipped;                    /* damaged copies skipped or repaired (their lines are logged) */
} rsg_restart_report;

/* Region kinds (rsg_region_description.kind): where a region's memory
 * lives, as rsg_protect, rsg_protect_device and rsg_protect_managed say. */
#define RSG_KIND_HOST 0
#define RSG_KIND_DEVICE 1
#define RSG_KIND_MANAGED 2

/* Bounds of what a region table holds, so that rsg_describe never truncates:
 * labels have at most 255 bytes and dtype names at most 64 (both plus the
 * terminating NUL here), shapes at most 32 axes. */
#define RSG_LABEL_CAPACITY 256
#define RSG_DTYPE_CAPACITY 65
#define RSG_MAX_DIMS 32

/* A region as a committed version's region table records it (rsg_describe). */
typedef struct rsg_region_description {
  int id;
  int kind;                         /* RSG_KIND_HOST, RSG_KIND_DEVICE or RSG_KIND_MANAGED */
  unsigned long long bytes;
  char label[RSG_LABEL_CAPACITY];
  char dtype[RSG_DTYPE_CAPACITY];   /* NumPy's name ("float64"); "" when the region was protected without one */
  int ndims;                        /* entries of shape in use; 0 without a shape */
  long long shape[RSG_MAX_DIMS];    /* row-major: the slowest axis first */
} rsg_region_description;

/* One version the store holds (rsg_versions). */
typedef struct rsg_version_info {
  int version;
  int pending;                      /* 1: captured, not yet durable everywhere it goes */
  int levels[RSG_LEVELS];           /* indexed by level: 1 where a complete copy is held, else 0 */
} rsg_version_info;

/* Opens the store `name`. config_path may be NULL (defaults, then
 * RESURGO_<SECTION>_<KEY> environment overrides). */
int rsg_open(const char *config_path, const char *name, rsg_store **out);
/* Waits for pending work, reports a background error if one happened, and
 * frees the store in every case. In a child forked while the store was
 * open, the store is the parent's: rsg_close only frees the handle (no
 * wait, no file written or removed, no lock released), and every other
 * call returns RSG_ESTATE.
 * The handle itself stays allocated, marked closed (a few bytes until the
 * process ends): a call through it after rsg_close, rsg_close again
 * included, returns RSG_ESTATE and rsg_last_error() says the store was
 * closed, instead of touching freed memory. Set your copy to NULL anyway. */
int rsg_close(rsg_store *s);
/* label may be NULL: it then defaults to "region-<id>". */
int rsg_protect(rsg_store *s, int id, void *ptr, size_t bytes, const char *label);
/* A region in CUDA device memory (docs/gpu.md): checkpoints copy it into the
 * L0 device cache ([device] capacity) and return; restart writes it back to
 * device memory. RSG_EINVAL when ptr is host or managed memory (where the
 * CUDA driver can tell), RSG_ESTORAGE when no GPU can be used (the message
 * says why). */
int rsg_protect_device(rsg_store *s, int id, void *device_ptr, size_t bytes, const char *label);
/* A region in CUDA managed memory (cuMemAllocManaged; docs/gpu.md, "Managed
 * memory"): checkpoints synchronise the device's context, then copy it as a
 * device region. RSG_EINVAL when ptr is host or device memory, RSG_ESTORAGE
 * when no GPU can be used (the message says why). rsg_protect of managed
 * memory protects it so too. */
int rsg_protect_managed(rsg_store *s, int id, void *ptr, size_t bytes, const char *label);
int rsg_unprotect(rsg_store *s, int id);
int rsg_set_metadata(rsg_store *s, const void *data, size_t bytes);
/* Metadata of the version last restored (or last set). *bytes receives the
 * full size even when it exceeds capacity (then nothing is copied and
 * RSG_EINVAL is returned). */
int rsg_get_metadata(rsg_store *s, void *data, size_t capacity, size_t *bytes);
int rsg_checkpoint(rsg_store *s, int version); /* blocks only for capture */
int rsg_wait(rsg_store *s, int version, int level); /* until durable at level */
/* The version rsg_restart(RSG_LATEST) restores (judged without reading the
   data: Store::latest in resurgo.hpp), or RSG_ENOTFOUND when none is held. */
int rsg_latest(rsg_store *s, int *version);
/* Restores `version` (RSG_LATEST: the newest intact one, falling back past
 * damaged versions) into the protected regions; *restored receives the
 * version read. The header and index of every version in the chain are
 * checked before a byte is written, then each chunk as it is read into its
 * region. A copy that fails is read again from another level (and
 * RSG_LATEST falls back to an older version): the regions then hold that
 * version whole. When restart fails, rsg_last_error() names the regions it
 * may have partly overwritten, with which version's data, and those it left
 * unchanged ("regions 'u', 'v' may have been partly overwritten with
 * version 7's data before the failure; 'w' is unchanged"); device regions
 * change only once the whole version was read. A restart on another number
 * of ranks (docs/mpi.md) cannot tell how far it came: its errors say that
 * any region may have been partly overwritten. */
int rsg_restart(rsg_store *s, int version, int *restored);

/* Adjoint staging (docs/adjoint.md). rsg_prefetch: the `count` versions in
 * the order they will be restored; background threads copy the next ones
 * into the L1 memory level ([memory] capacity) as room allows (versions not
 * written yet once written). Replaces the previous order; count 0 clears it.
 * rsg_discard: the version was consumed; it leaves memory at once and its
 * files are removed in the background (RSG_ENOTFOUND for an unknown
 * version, RSG_ESTATE for one already discarded). */
int rsg_prefetch(rsg_store *s, const int *versions, size_t count);
int rsg_discard(rsg_store *s, int version);

/* *need = 1 when a checkpoint is due by the [interval] policy
 * (docs/interval.md), else 0; RSG_ESTATE when interval.policy is none. */
int rsg_need_checkpoint(rsg_store *s, int *need);
/* Statistics of `version` (RSG_ENOTFOUND when the store keeps none for it:
 * only recent versions of this process are kept). */
int rsg_stats(rsg_store *s, int version, rsg_version_stats *out);
int rsg_last_restart(rsg_store *s, rsg_restart_report *out);
/* The device regions' caches now (zeros and has_* = 0 where the store has none).
 * The struct cannot take the call's name (C++ DeviceStats): in C a type
 * and a function share one name space. */
int rsg_device_stats(rsg_store *s, rsg_device_caches *out);
/* The `count` CUDA streams (CUstream / cudaStream_t) later checkpoints wait
 * for before they copy managed regions, instead of the whole context
 * (Store::set_capture_streams in resurgo.hpp; docs/gpu.md); count 0: the
 * whole context again. */
int rsg_set_capture_streams(rsg_store *s, void *const *streams, size_t count);

/* Lists of variable length (rsg_versions, rsg_describe) go into an array
 * the caller provides, as rsg_get_metadata's bytes do: `capacity` entries
 * at `out` (which may be NULL when capacity is 0). *count receives the
 * full number of entries; when it exceeds capacity nothing is copied and
 * RSG_EINVAL is returned, so a first call with capacity 0 asks for the
 * size. The caller owns the memory (no rsg_free to pair, and Fortran passes
 * its own allocated array); the price is a second call. */

/* The versions the store holds, committed or pending, ascending, with the
 * levels holding each (Store::versions). New checkpoints can make the list
 * grow between the size query and the copy: call again with the new count. */
int rsg_versions(rsg_store *s, rsg_version_info *out, size_t capacity, size_t *count);
/* The regions of the committed `version`, in its region table's order, read
 * from the header of its fastest intact copy without reading its data
 * (Store::describe). RSG_ENOTFOUND when no level holds the version,
 * RSG_ECORRUPT when every copy is damaged. The version's metadata, which
 * Store::describe also returns, is left out: two lists in one call would
 * make a too-small answer ambiguous; rsg_get_metadata gives it after
 * rsg_restart. */
int rsg_describe(rsg_store *s, int version, rsg_region_description *out, size_t capacity, size_t *count);
/* Copies the committed `version` (with the bases a delta needs) to `level`
 * (RSG_L2 or RSG_L4), verifying each chunk; returns once it is durable
 * there (Store::persist). For versions kept only in memory. Unlike the
 * other calls it may run on another thread while the application's thread
 * is inside rsg_checkpoint or rsg_wait (not rsg_close or rsg_discard). */
int rsg_persist(rsg_store *s, int version, int level);
const char *rsg_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* RESURGO_RESURGO_H */
