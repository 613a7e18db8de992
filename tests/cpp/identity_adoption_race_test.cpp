// Two ranks of one store adopting an identity into the same directory at
// once: a rank that read no identity file, and then found one another rank
// wrote in the meantime, must take that one, not rename its own over it
// (the ASan stress campaign once ended with two identities in a store's
// directories so: tier/directory_level.cpp, adopt_identity).
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "format/file_names.h"
#include "format/store_id.h"
#include "forwarding_env.h"
#include "resurgo/errors.hpp"
#include "test_util.h"
#include "tier/directory_level.h"

namespace resurgo {
namespace {

// Writes `theirs` as the store identity right after a read finds none, as
// another rank of the store would at that moment.
class IdentityWrittenMeanwhileEnv final : public ForwardingEnv {
 public:
  explicit IdentityWrittenMeanwhileEnv(format::StoreId theirs) : theirs_(theirs) {}

  std::unique_ptr<ReadableFile> open(const std::string& path) override {
    try {
      return base_->open(path);
    } catch (const NotFoundError&) {
      const std::string suffix = std::string("/") + format::kStoreIdFileName;
      if (armed_ && path.size() > suffix.size() && path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0) {
        armed_ = false;
        std::ofstream(path) << theirs_.hex() << "\n";
      }
      throw;
    }
  }
  void arm() { armed_ = true; }

 private:
  format::StoreId theirs_;
  bool armed_ = false;
};

TEST(IdentityAdoptionRaceTest, AnIdentityWrittenAfterTheReadFoundNoneIsTakenNotReplaced) {
  const TempDir dir;
  const format::StoreId theirs = format::StoreId::random();
  const format::StoreId ours = format::StoreId::random();
  auto env = std::make_shared<IdentityWrittenMeanwhileEnv>(theirs);
  DirectoryLevel level(2, dir.path() + "/l2", "s", 0, 0600, 0, env);
  level.prepare();
  env->arm();
  EXPECT_EQ(level.adopt_identity(ours), theirs);
  EXPECT_EQ(level.identity(), theirs) << "this store's drawn identity replaced the one another rank wrote";
}

}  // namespace
}  // namespace resurgo
