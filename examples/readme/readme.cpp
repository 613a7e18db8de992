// examples/readme/readme.cpp: kill it at any moment and run it again
#include <cstdio>
#include <vector>
#include <resurgo/resurgo.hpp>

void solve(std::vector<double>& u, int step) {  // one time step of the application
  for (double& x : u) x += step;
}

int main() try {
  const int steps = 1000;
  std::vector<double> u(1 << 20);
  resurgo::Store store("heat");                   // Config::load(): defaults + env
  store.protect(0, u.data(), u.size() * sizeof(double), "field");
  int step = 0;
  try {
    step = store.restart();                       // the newest intact version: the steps done
    std::printf("resumed after step %d\n", step);
  } catch (const resurgo::NotFoundError&) {       // none yet: start at step 0
  }
  while (step < steps) {
    solve(u, ++step);
    if (step % 100 == 0) store.checkpoint(step);  // blocks only for the copy
  }
  store.wait(resurgo::kAllVersions, 2);           // durable on local disk
  store.close();
  std::printf("%d steps: u[0] = %.0f\n", step, u[0]);
} catch (const resurgo::Error& e) {
  std::fprintf(stderr, "heat: %s\n", e.what());
  return 1;
}
