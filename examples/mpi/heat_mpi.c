/* heat_mpi: heat2d (examples/heat2d) split across the ranks of an MPI job
 * and checkpointed through Resurgo's C API for MPI stores.
 *
 *   mpirun -np P heat_mpi --nx N --ny N --steps S --every K --store NAME
 *                         [--output FILE] [--stop-after T] [--config FILE]
 *
 * The global field (ny rows of nx, row-major, boundaries held at 0, a hot
 * disc in the middle) is cut into blocks of whole rows, one per rank. Each
 * step exchanges one halo row with each neighbour (MPI_Sendrecv) and updates
 * the block in place. Every K steps all ranks checkpoint together, the
 * version being the step. Each rank protects its block with
 * rsg_protect_global, so the store knows where the block lies in the global
 * field. Started again, the job restarts from the newest version that every
 * rank can restore. At the last step rank 0 gathers the field and writes it
 * raw (float64): the bytes heat2d writes for the same options.
 *
 * --stop-after T ends the run normally after T steps, without output. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "resurgo/resurgo_mpi.h"

static const double kAlpha = 0.2; /* diffusion number; explicit Euler is stable up to 0.25 */

struct options {
  int nx, ny, steps, every, stop_after;
  const char *store, *output, *config;
};

/* The global rows [first, first + rows) of one rank. */
struct block {
  int first, rows;
};

/* Stops every rank (one rank's failure would leave the others waiting). */
static void fail(const char *what, const char *why) {
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  fprintf(stderr, "heat_mpi: rank %d: %s: %s\n", rank, what, why);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

static void check(int rc, const char *what) {
  if (rc != RSG_OK) fail(what, rsg_last_error());
}

static void usage(const char *why) {
  fail(why, "usage: heat_mpi --nx N --ny N --steps S --every K --store NAME "
            "[--output FILE] [--stop-after T] [--config FILE]");
}

static struct options parse(int argc, char **argv, int ranks) {
  struct options o = {1024, 1024, 100, 10, -1, "heat_mpi", NULL, NULL};
  for (int i = 1; i < argc; i += 2) {
    const char *name = argv[i], *value = i + 1 < argc ? argv[i + 1] : NULL;
    if (value == NULL) usage(name);
    else if (strcmp(name, "--nx") == 0) o.nx = atoi(value);
    else if (strcmp(name, "--ny") == 0) o.ny = atoi(value);
    else if (strcmp(name, "--steps") == 0) o.steps = atoi(value);
    else if (strcmp(name, "--every") == 0) o.every = atoi(value);
    else if (strcmp(name, "--stop-after") == 0) o.stop_after = atoi(value);
    else if (strcmp(name, "--store") == 0) o.store = value;
    else if (strcmp(name, "--output") == 0) o.output = value;
    else if (strcmp(name, "--config") == 0) o.config = value;
    else usage(name);
  }
  if (o.nx < 3 || o.ny < 3 || o.ny < ranks || o.steps < 0 || o.every < 1) usage("bad sizes (ny >= ranks)");
  return o;
}

/* Rows as even as the division allows: the first ny % ranks ranks get one more. */
static struct block block_of(int rank, int ranks, int ny) {
  const int base = ny / ranks, extra = ny % ranks;
  struct block b = {rank * base + (rank < extra ? rank : extra), base + (rank < extra ? 1 : 0)};
  return b;
}

/* Hot disc of radius min(nx, ny)/8 at the centre: heat2d's initial field.
 * `u` holds the block's rows after one halo row. */
static void initialize(double *u, int nx, int ny, struct block b) {
  const long r = (nx < ny ? nx : ny) / 8, cx = nx / 2, cy = ny / 2;
  for (long k = 0; k < b.rows; ++k) {
    const long j = b.first + k;
    for (long i = 0; i < nx; ++i)
      u[(k + 1) * nx + i] = (i - cx) * (i - cx) + (j - cy) * (j - cy) <= r * r ? 1.0 : 0.0;
  }
}

/* The halo rows (0 and rows + 1) receive the neighbours' edge rows; at the
 * global boundary the neighbour is MPI_PROC_NULL and the halo is unused. */
static void exchange_halos(double *u, int nx, struct block b, int up, int down) {
  double *top = u + nx, *bottom = u + (size_t)b.rows * (size_t)nx;
  MPI_Sendrecv(top, nx, MPI_DOUBLE, up, 0, bottom + nx, nx, MPI_DOUBLE, down, 0, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
  MPI_Sendrecv(bottom, nx, MPI_DOUBLE, down, 1, u, nx, MPI_DOUBLE, up, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

/* One step in place, so the protected block never moves: `above` keeps the
 * old row k-1 and `old` the old row k while row k is overwritten. The sum is
 * heat2d's, term for term, so the bytes are too. */
static void step(double *u, int nx, int ny, struct block b, double *above, double *old) {
  const size_t n = (size_t)nx;
  memcpy(above, u, n * sizeof *u);
  for (int k = 1; k <= b.rows; ++k) {
    double *row = u + (size_t)k * n, *swap;
    const double *below = row + n;
    const int j = b.first + k - 1;
    memcpy(old, row, n * sizeof *u);
    if (j >= 1 && j <= ny - 2) {
      for (size_t i = 1; i + 1 < n; ++i)
        row[i] = old[i] + kAlpha * (old[i - 1] + old[i + 1] + above[i] + below[i] - 4.0 * old[i]);
    }
    swap = above;
    above = old;
    old = swap;
  }
}

/* The block (without halos) is this rank's part of the global array "field". */
static void protect_block(rsg_store *store, double *u, int nx, int ny, struct block b) {
  const int64_t global_shape[2] = {ny, nx}, offset[2] = {b.first, 0}, shape[2] = {b.rows, nx};
  const size_t bytes = (size_t)b.rows * (size_t)nx * sizeof *u;
  check(rsg_protect_global(store, 0, u + nx, bytes, "field", "float64", 2, global_shape, offset, shape),
        "rsg_protect_global");
}

/* Rank 0 gathers the blocks and writes the global field. */
static void write_field(const char *path, const double *u, int nx, int ny, int rank, int ranks) {
  int *counts = malloc((size_t)ranks * sizeof *counts), *displs = malloc((size_t)ranks * sizeof *displs);
  double *field = rank == 0 ? malloc((size_t)nx * (size_t)ny * sizeof *field) : NULL;
  if (counts == NULL || displs == NULL || (rank == 0 && field == NULL)) fail(path, "out of memory");
  for (int r = 0; r < ranks; ++r) {
    const struct block b = block_of(r, ranks, ny);
    counts[r] = b.rows * nx;
    displs[r] = b.first * nx;
  }
  MPI_Gatherv(u + nx, counts[rank], MPI_DOUBLE, field, counts, displs, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    FILE *out = fopen(path, "wb");
    const size_t cells = (size_t)nx * (size_t)ny;
    if (out == NULL || fwrite(field, sizeof *field, cells, out) != cells || fclose(out) != 0)
      fail(path, "cannot write the output file");
  }
  free(field);
  free(displs);
  free(counts);
}

int main(int argc, char **argv) {
  int rank, ranks;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  const struct options o = parse(argc, argv, ranks);
  const struct block b = block_of(rank, ranks, o.ny);
  const int up = rank > 0 ? rank - 1 : MPI_PROC_NULL, down = rank + 1 < ranks ? rank + 1 : MPI_PROC_NULL;
  double *u = calloc((size_t)(b.rows + 2) * (size_t)o.nx, sizeof *u);
  double *above = malloc((size_t)o.nx * sizeof *u), *old = malloc((size_t)o.nx * sizeof *u);
  if (u == NULL || above == NULL || old == NULL) fail("the field", "out of memory");
  initialize(u, o.nx, o.ny, b);

  /* Collective: every rank opens, protects, restarts and closes together. */
  rsg_store *store = NULL;
  check(rsg_open_mpi(o.config, o.store, MPI_COMM_WORLD, &store), "rsg_open_mpi");
  protect_block(store, u, o.nx, o.ny, b);
  int step_no = 0, restarted_from = -1, latest = -1;
  double restart_seconds = 0;
  const int rc = rsg_latest(store, &latest);
  if (rc != RSG_ENOTFOUND) {
    check(rc, "rsg_latest");
    const double t0 = MPI_Wtime();
    check(rsg_restart(store, RSG_LATEST, &restarted_from), "rsg_restart");
    restart_seconds = MPI_Wtime() - t0;
    step_no = restarted_from; /* the version is the step: the block is the whole state */
  }

  int computed = 0, checkpoints = 0;
  const double t0 = MPI_Wtime();
  while (step_no < o.steps && computed != o.stop_after) {
    exchange_halos(u, o.nx, b, up, down);
    step(u, o.nx, o.ny, b, above, old);
    ++step_no;
    ++computed;
    if (step_no % o.every == 0) {
      check(rsg_checkpoint(store, step_no), "rsg_checkpoint");
      ++checkpoints;
      if (rank == 0) printf("checkpoint %d\n", step_no);
    }
  }
  check(rsg_close(store), "rsg_close"); /* waits until every version is durable */
  const double wall = MPI_Wtime() - t0;

  if (o.output != NULL && step_no == o.steps) write_field(o.output, u, o.nx, o.ny, rank, ranks);
  if (rank == 0) {
    printf("RESULT {\"steps\": %d, \"steps_run\": %d, \"checkpoints\": %d, \"restarted_from\": %d, "
           "\"ranks\": %d, \"wall_seconds\": %.6f, \"restart_seconds\": %.6f}\n",
           step_no, computed, checkpoints, restarted_from, ranks, wall, restart_seconds);
  }
  free(old);
  free(above);
  free(u);
  MPI_Finalize();
  return 0;
}
