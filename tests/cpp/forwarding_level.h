// A Level that passes every call to another: tests derive from it and
// override the calls whose timing or outcome they change (a commit held at
// a gate, a commit that lets eviction win a race). commit_group is Level's
// own (one commit() after another), so that an overridden commit() applies
// to groups too; override it to reach the other level's groups.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tier/level.h"

namespace resurgo::testing {

class ForwardingLevel : public Level {
 public:
  explicit ForwardingLevel(Level& level) : level_(level) {}

  int number() const override { return level_.number(); }
  Features features() const override { return level_.features(); }
  std::string where() const override { return level_.where(); }
  void prepare() override { level_.prepare(); }
  void commit(int version, const std::function<void(WritableFile&)>& write) override { level_.commit(version, write); }
  void commit_copy(int version, const ReadableFile& source) override { level_.commit_copy(version, source); }
  std::vector<int> versions() override { return level_.versions(); }
  bool holds(int version) override { return level_.holds(version); }
  std::unique_ptr<ReadableFile> open(int version) override { return level_.open(version); }
  void quarantine(int version) override { level_.quarantine(version); }
  void remove(int version) override { level_.remove(version); }
  std::vector<int> evict(const std::function<bool(int)>& pinned, const KnownBases& known_bases) override {
    return level_.evict(pinned, known_bases);
  }

 protected:
  Level& level_;
};

}  // namespace resurgo::testing
