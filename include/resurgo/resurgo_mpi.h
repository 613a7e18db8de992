/* Resurgo C API for MPI jobs (docs/mpi.md). Every rank of `comm` opens the
 * store, protects its regions and calls rsg_checkpoint, rsg_wait,
 * rsg_latest, rsg_restart and rsg_close together: a version exists for
 * restart only once every rank has committed it and the job's manifest says
 * so, and restart restores the newest version every rank can restore.
 * Available when libresurgo was built with MPI (RESURGO_HAVE_MPI). */
#ifndef RESURGO_RESURGO_MPI_H
#define RESURGO_RESURGO_MPI_H

#include <mpi.h>
#include <stdint.h>

#include "resurgo/resurgo.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Opens the store `name` on every rank of `comm` (collective; MPI must be
 * initialized). `config_path` may be NULL. */
int rsg_open_mpi(const char *config_path, const char *name, MPI_Comm comm, rsg_store **out);
/* The same with a Fortran communicator handle (MPI_Comm_c2f); the Fortran
 * module and the Python binding (mpi4py's comm.py2f()) call this one. */
int rsg_open_mpi_fortran(const char *config_path, const char *name, MPI_Fint comm, rsg_store **out);

/* Protects a region that is this rank's block of a global array of `ndims`
 * axes (row-major): `global_shape`, the block's element `offset` in it and
 * its `shape`, elements of NumPy type `dtype` ("float64", "int32", ...).
 * Restart on another number of ranks reads each new block from the blocks
 * of the old ranks it overlaps. */
int rsg_protect_global(rsg_store *s, int id, void *ptr, size_t bytes, const char *label, const char *dtype,
                       int ndims, const int64_t *global_shape, const int64_t *offset, const int64_t *shape);

#ifdef __cplusplus
}
#endif

#endif
