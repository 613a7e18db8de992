/* examples/readme/readme.c: kill it at any moment and run it again */
#include <stdio.h>
#include <resurgo/resurgo.h>

enum { n = 1 << 20, steps = 1000 };
static double u[n];

static void solve(int step) { /* one time step of the application */
  for (int i = 0; i < n; ++i) u[i] += step;
}

static int fail(void) {
  fprintf(stderr, "heat: %s\n", rsg_last_error());
  return 1;
}

int main(void) {
  rsg_store *s;
  int step = 0, restored, rc;
  if (rsg_open(NULL, "heat", &s) != RSG_OK) return fail();  /* config file may be NULL */
  if (rsg_protect(s, 0, u, sizeof u, "field") != RSG_OK) return fail();
  rc = rsg_restart(s, RSG_LATEST, &restored);               /* the newest intact version */
  if (rc == RSG_OK) {
    step = restored;                                        /* the version is the steps done */
    printf("resumed after step %d\n", step);
  } else if (rc != RSG_ENOTFOUND) {                         /* RSG_ENOTFOUND: none yet */
    return fail();
  }
  while (step < steps) {
    solve(++step);
    if (step % 100 == 0 && rsg_checkpoint(s, step) != RSG_OK) return fail();
  }
  if (rsg_wait(s, RSG_ALL, RSG_L2) != RSG_OK) return fail(); /* durable on local disk */
  if (rsg_close(s) != RSG_OK) return fail();
  printf("%d steps: u[0] = %.0f\n", step, u[0]);
  return 0;
}
