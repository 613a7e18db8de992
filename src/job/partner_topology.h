// Where each rank's L3 protection lives (issue 12; SCR's PARTNER and XOR
// schemes). Ranks are ordered local index first, node second (the first
// rank of every node, then the second of every node, ...), so that
// neighbours in the order sit on different nodes whenever there are
// several. Partner: each rank's L2 file is copied to the next rank in that
// ring. XOR: consecutive runs of `set_size` ranks of the order form sets
// whose members sit on different nodes; each member keeps an XOR parity of
// the others' files, from which the set rebuilds any one lost member.
#pragma once

#include <string>
#include <vector>

namespace resurgo {

class PartnerTopology {
 public:
  // `nodes`: the node of each rank. `set_size` (XOR; >= 2) is clamped to the
  // job size; a last set smaller than 2 joins the one before it.
  PartnerTopology(const std::vector<int>& nodes, int set_size);

  // Partner scheme: the rank that keeps `rank`'s copy, and the rank whose
  // copy `rank` keeps.
  int holder_of(int rank) const;
  int source_of(int rank) const;

  // XOR scheme: the members of `rank`'s set, in set order, and `rank`'s index there.
  const std::vector<int>& set_of(int rank) const;
  int index_in_set(int rank) const;

  // Why the protection is weaker than it should be, for a warning at open
  // (empty when it is not): a partner on the same node, a set with two
  // members on one node.
  std::string partner_weakness() const;
  std::string xor_weakness() const;

 private:
  std::vector<int> nodes_;
  std::vector<int> order_;     // the ring
  std::vector<int> position_;  // rank -> index in order_
  std::vector<std::vector<int>> sets_;
  std::vector<int> set_index_;  // rank -> its set
};

}  // namespace resurgo
