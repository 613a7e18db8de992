/* Appicpr's calls for legacy codes: incremental checkpoints written like a
 * Fortran OPEN / WRITE / CLOSE of arrays to a file (docs/appic.md).
 *
 *   rsg_appic_open("run/state");               // one cycle = one version
 *   rsg_appic_register(p, sizeof p);           // once; again is a no-op
 *   rsg_appic_write(p);                        // p is part of this version
 *   rsg_appic_close();                         // durable at L2 on return
 *
 * A restarted program opens, registers the same arrays and calls
 * rsg_appic_read: the first read of a cycle restores the newest intact
 * version into every registered array.
 *
 * `path` names a store: its directory is dirname(path) (the L2 directory)
 * and its name is basename(path). The store stays open between cycles of
 * one process, so that each version after the first writes only what
 * changed; rsg_appic_finalize (or the end of the process) closes it.
 *
 * Return codes and rsg_last_error() are those of resurgo.h. The calls are
 * for one thread: the legacy code's.
 */
#ifndef RESURGO_APPIC_H
#define RESURGO_APPIC_H

#include <stddef.h>

#include "resurgo/resurgo.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Begins a cycle on the store `path`; RSG_ESTATE while another is open. */
int rsg_appic_open(const char *path);
/* Adds `bytes` bytes at ptr to the arrays of the open path, as "array<k>"
 * (k = 1, 2, ... in registration order). The same ptr and size again is a
 * no-op; the same ptr with another size is RSG_EINVAL. */
int rsg_appic_register(void *ptr, size_t bytes);
/* Makes the cycle one that writes a version; ptr must be registered. The
 * version holds every registered array, written or not (rsg_appic_close). */
int rsg_appic_write(const void *ptr);
/* First call of a cycle: restores the newest intact version into every
 * registered array (RSG_ENOTFOUND when the path holds none). Later calls of
 * the cycle only check that ptr is registered. */
int rsg_appic_read(void *ptr);
/* The version this cycle read, else the newest one the path holds on disk
 * (RSG_ENOTFOUND when none); needs an open cycle. */
int rsg_appic_version(int *version);
/* Ends the cycle. After writes: checkpoints the next version (the newest on
 * disk + 1) and waits until it is durable at L2. The version holds every
 * registered array: one the cycle did not write adds to a delta only what
 * changed in it since the previous version (nothing, if it did not change).
 * A cycle that wrote nothing takes no version. The cycle ends even when the
 * call fails. */
int rsg_appic_close(void);
/* Closes every store the calls opened (also done at exit). RSG_ESTATE when
 * a cycle is still open; then nothing is closed. */
int rsg_appic_finalize(void);

#ifdef __cplusplus
}
#endif

#endif /* RESURGO_APPIC_H */
