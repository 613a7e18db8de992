// C++ consumer: checkpoint a vector, restore it in a new store, compare.
// Directories come from RESURGO_LOCAL_PATH / RESURGO_PERSISTENT_PATH.
#include <resurgo/resurgo.hpp>

#include <cstdio>
#include <exception>
#include <vector>

int main() {
  try {
    std::vector<double> a(4096);
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = 0.5 * static_cast<double>(i);
    {
      resurgo::Store store("consumer-cxx");
      store.protect(0, a.data(), a.size() * sizeof(double), "a");
      store.checkpoint(7);
      store.wait(7, 2);
    }
    std::vector<double> b(a.size(), -1.0);
    resurgo::Store store("consumer-cxx");
    store.protect(0, b.data(), b.size() * sizeof(double), "a");
    const int restored = store.restart();
    if (restored != 7 || b != a) {
      std::fprintf(stderr, "restored version %d, data %s\n", restored,
                   b == a ? "equal" : "different");
      return 1;
    }
    store.close();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
