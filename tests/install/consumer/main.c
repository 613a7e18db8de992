/* C consumer: checkpoint an array, restore it in a new store, compare.
 * Directories come from RESURGO_LOCAL_PATH / RESURGO_PERSISTENT_PATH. */
#include <resurgo/resurgo.h>

#include <stdio.h>
#include <string.h>

#define N 4096

static int check(int rc, const char *what) {
  if (rc != RSG_OK) fprintf(stderr, "%s failed (%d): %s\n", what, rc, rsg_last_error());
  return rc != RSG_OK;
}

int main(void) {
  static double a[N], b[N];
  rsg_store *s = NULL;
  int restored = -1;
  for (int i = 0; i < N; ++i) a[i] = 0.25 * i;

  if (check(rsg_open(NULL, "consumer-c", &s), "rsg_open")) return 1;
  if (check(rsg_protect(s, 0, a, sizeof a, "a"), "rsg_protect")) return 1;
  if (check(rsg_checkpoint(s, 3), "rsg_checkpoint")) return 1;
  if (check(rsg_wait(s, 3, RSG_L2), "rsg_wait")) return 1;
  if (check(rsg_close(s), "rsg_close")) return 1;

  if (check(rsg_open(NULL, "consumer-c", &s), "rsg_open")) return 1;
  if (check(rsg_protect(s, 0, b, sizeof b, "a"), "rsg_protect")) return 1;
  if (check(rsg_restart(s, RSG_LATEST, &restored), "rsg_restart")) return 1;
  if (check(rsg_close(s), "rsg_close")) return 1;
  if (restored != 3 || memcmp(a, b, sizeof a) != 0) {
    fprintf(stderr, "restored version %d, data %s\n", restored,
            memcmp(a, b, sizeof a) ? "different" : "equal");
    return 1;
  }
  return 0;
}
