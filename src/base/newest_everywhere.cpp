#include "base/newest_everywhere.h"

#include <algorithm>

namespace resurgo {

long newest_everywhere(Comm& comm, std::vector<long> held, long bound) {
  std::sort(held.begin(), held.end());
  const auto newest_up_to = [&](long limit) -> long {
    const auto above = std::upper_bound(held.begin(), held.end(), limit);
    return above == held.begin() ? -1 : *(above - 1);
  };
  long agreed = comm.allreduce_min(newest_up_to(bound));
  for (;;) {
    const long lowered = comm.allreduce_min(newest_up_to(agreed));
    if (lowered == agreed) return agreed;
    agreed = lowered;
  }
}

}  // namespace resurgo
