// C++ consumer of resurgo/global_file.hpp compiled without MPI's headers or
// RESURGO_HAVE_MPI: the serial reader of ConvergentMatrix's global-layout
// files must serve a machine without MPI. A missing file and a file that is
// no global-layout file are refused by name, with the library's errors.
#include <resurgo/errors.hpp>
#include <resurgo/global_file.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace {

template <typename Error, typename Call>
bool refused(const char* what, const std::string& path, const Call& call) {
  try {
    call();
  } catch (const Error& e) {
    if (std::string(e.what()).find(path) != std::string::npos) return true;
    std::fprintf(stderr, "%s: the message does not name '%s': %s\n", what, path.c_str(), e.what());
    return false;
  }
  std::fprintf(stderr, "%s: no error\n", what);
  return false;
}

}  // namespace

int main() {
  const char* given = std::getenv("RESURGO_LOCAL_PATH");
  const std::string directory = given ? given : ".";
  std::filesystem::create_directories(directory);
  const std::string missing = directory + "/missing.rsgm";
  const std::string text = directory + "/text.rsgm";
  std::ofstream(text) << std::string(200, 'x');
  const bool ok =
      refused<resurgo::NotFoundError>("missing file", missing, [&] { resurgo::read_global_file_header(missing); }) &&
      refused<resurgo::FormatError>("text file", text, [&] {
        double element = 0;
        resurgo::read_global_file(text, &element, sizeof element);
      });
  return ok ? 0 : 1;
}
