/* Automatic checkpointing from declared data accesses, for C (docs/auto.md;
 * the C++ API is resurgo/auto.hpp, whose comments hold the model the
 * application must respect).
 *
 *   rsg_auto *rt;
 *   rsg_auto_attach(store, NULL, &rt);               // restore mode if the store holds one
 *   rsg_auto_dataset(rt, "u", u, bytes, "float64", 2, shape, 1, &u_id);
 *   ...initialisation loops...
 *   rsg_auto_initphase_done(rt);
 *   for (step = 0; step < steps; ++step) {
 *     rsg_auto_arg args[] = {{u_id, RSG_AUTO_READ, RSG_AUTO_ALL}, {v_id, RSG_AUTO_WRITE, RSG_AUTO_INTERIOR}};
 *     rsg_auto_loop(rt, "stencil", args, 2, &execute);
 *     if (execute) stencil(u, v);                    // 0 while replaying
 *     rsg_auto_query(rt, &residual, sizeof residual); // every value the control flow reads
 *   }
 *   rsg_auto_detach(rt);                             // before rsg_close(store)
 *
 * Return codes and rsg_last_error() are those of resurgo.h. A runtime is
 * for one thread: the one that runs the loops.
 */
#ifndef RESURGO_AUTO_H
#define RESURGO_AUTO_H

#include <stddef.h>

#include "resurgo/resurgo.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rsg_auto rsg_auto;

/* How a loop accesses a dataset (rsg_auto_arg.access). RSG_AUTO_WRITE: every
 * element the loop covers is written before it is read; RSG_AUTO_INCREMENT
 * (a += into the dataset) reads the old value, as RSG_AUTO_READ_WRITE does. */
#define RSG_AUTO_READ 0
#define RSG_AUTO_WRITE 1
#define RSG_AUTO_READ_WRITE 2
#define RSG_AUTO_INCREMENT 3

/* The part of a dataset a loop covers (rsg_auto_arg.range): every element,
 * the interior only, or the halo ring only (a dataset declared with halo > 0). */
#define RSG_AUTO_ALL 0
#define RSG_AUTO_INTERIOR 1
#define RSG_AUTO_HALO 2

typedef struct rsg_auto_arg {
  int dataset; /* an id from rsg_auto_dataset */
  int access;  /* RSG_AUTO_READ .. RSG_AUTO_INCREMENT */
  int range;   /* RSG_AUTO_ALL, RSG_AUTO_INTERIOR or RSG_AUTO_HALO */
} rsg_auto_arg;

/* The fields of resurgo::autockpt::Options; rsg_auto_options_init sets its
 * defaults. A checkpoint is due every interval_loops loops when > 0, else
 * interval_seconds after the previous one when > 0, else when the store's
 * [interval] policy says so, else only after rsg_auto_trigger. */
typedef struct rsg_auto_options {
  unsigned long long interval_loops;
  double interval_seconds;
  unsigned long long region_timeout_loops; /* loops a checkpointing region may span */
  unsigned long long agreement_loops;      /* MPI jobs: loops between the ranks' exchanges of "due?" */
  int diagnostics;                         /* 0 silent .. 3 every dataset's decision */
  int check_access;                        /* 1: hash read-only datasets to catch lying access modes */
  int flush_on_termination;                /* 1: in-memory stores write the newest to L2 on SIGTERM/SIGINT */
  /* Where diagnostic lines go (NUL-terminated, no newline); standard error
   * when NULL. Called on the thread that calls the runtime. */
  void (*report)(const char *line, void *context);
  void *report_context;
} rsg_auto_options;

/* The newest automatic checkpoint of this process (rsg_auto_last_checkpoint);
 * version is -1 before the first one. */
typedef struct rsg_auto_checkpoint_report {
  int version;
  unsigned long long loop_index; /* the loop (1-based) before which it was taken */
  char location[64];             /* that loop's name (truncated), or "fastfw" / "datlist" */
  size_t saved_datasets;         /* datasets saved whole */
  size_t halo_datasets;          /* datasets of which only the halo ring was saved */
  unsigned long long dataset_bytes;   /* bytes of the datasets' state saved */
  unsigned long long query_log_bytes; /* bytes of the query log it holds */
  unsigned long long payload_bytes;
  unsigned long long staged_bytes; /* copied aside because a loop of the region was about to change them */
  unsigned long long region_loops; /* loops the region spanned */
  int timed_out;                   /* 1 when closed by region_timeout_loops */
  double blocking_seconds;         /* time the runtime held the application over the region */
} rsg_auto_checkpoint_report;

/* The restore of this process (rsg_auto_last_restore); version is -1 when
 * it did not restart from an automatic checkpoint. */
typedef struct rsg_auto_restore_report {
  int version;
  unsigned long long loop_index;      /* where execution resumed */
  unsigned long long skipped_loops;   /* loops replayed without executing them */
  unsigned long long replayed_queries;
  int fast_forward;                   /* 1: resumed at fastfw/datlist from the payload */
  double read_seconds;   /* reading the version: its query log at attach, its datasets at the resume point */
  double replay_seconds; /* from the end of the first read (or of the initialisation phase) to the resume point */
  int ranks;             /* the rank count that wrote it (0: a version written before it was recorded) */
} rsg_auto_restore_report;

int rsg_auto_options_init(rsg_auto_options *options);

/* Attaches a runtime to `store`, which must stay open until rsg_auto_detach.
 * options may be NULL (the defaults). When the store holds an automatic
 * checkpoint, the runtime starts in restore mode (the newest intact one is
 * read now). */
int rsg_auto_attach(rsg_store *store, const rsg_auto_options *options, rsg_auto **out);
/* Frees the runtime in every case. */
int rsg_auto_detach(rsg_auto *a);

/* Declares the dataset `name` of `bytes` at data. dtype (a NumPy name such as
 * "float64") may be NULL; shape holds ndim extents, row-major, the halo
 * counted in them (NULL when ndim is 0). A halo > 0 needs the shape. *id
 * receives the id that rsg_auto_arg.dataset names. */
int rsg_auto_dataset(rsg_auto *a, const char *name, void *data, size_t bytes, const char *dtype, int ndim,
                     const long long *shape, int halo, int *id);
/* Declares the dataset `name` as this rank's block of a global array (MPI
 * jobs), as rsg_protect_global does: global_shape and offset hold ndim
 * entries, row-major, shape the block's own extents; dtype is required and
 * there is no halo. When every dataset is declared so, an automatic
 * checkpoint restarts on another rank count (docs/auto.md). */
int rsg_auto_dataset_global(rsg_auto *a, const char *name, void *data, size_t bytes, const char *dtype, int ndim,
                            const long long *global_shape, const long long *offset, const long long *shape, int *id);

/* Call before each parallel loop with the datasets it accesses. *execute
 * receives 1 when the loop must run, 0 while replaying towards the restore
 * point. */
int rsg_auto_loop(rsg_auto *a, const char *name, const rsg_auto_arg *args, size_t count, int *execute);

/* Every value computed by loops that reaches the control flow (a reduction,
 * a norm, a dt): logged, and while replaying overwritten with the value the
 * checkpointed run saw. RSG_EMISMATCH when the replay asks for another size
 * or at another loop than the checkpointed run did. */
int rsg_auto_query(rsg_auto *a, void *data, size_t bytes);

/* Ends the initialisation phase: datasets written so far are not saved, and
 * a restarted run executes the phase again instead of skipping it. */
int rsg_auto_initphase_done(rsg_auto *a);

/* A checkpoint location named by the application, with its own state
 * (payload, which may be NULL when bytes is 0). When restoring, the first
 * call restores the datasets and the payload and sets *restored to 1: the
 * application continues from the payload's step. */
int rsg_auto_fastfw(rsg_auto *a, void *payload, size_t bytes, int *restored);
/* As rsg_auto_fastfw, with the `count` datasets to save listed here. */
int rsg_auto_datlist(rsg_auto *a, const int *datasets, size_t count, void *payload, size_t bytes, int *restored);

/* A checkpoint is due now, whatever the interval says. */
int rsg_auto_trigger(rsg_auto *a);

int rsg_auto_restoring(rsg_auto *a, int *restoring);
/* Loops declared so far (the 1-based index of the last). */
int rsg_auto_loop_index(rsg_auto *a, unsigned long long *index);
/* Bytes the runtime holds for its bookkeeping (query log, statistics, staged copies). */
int rsg_auto_bookkeeping_bytes(rsg_auto *a, unsigned long long *bytes);
int rsg_auto_last_checkpoint(rsg_auto *a, rsg_auto_checkpoint_report *out);
int rsg_auto_last_restore(rsg_auto *a, rsg_auto_restore_report *out);

#ifdef __cplusplus
}
#endif

#endif /* RESURGO_AUTO_H */
