#include "job/partner_topology.h"

#include <algorithm>
#include <map>

namespace resurgo {

PartnerTopology::PartnerTopology(const std::vector<int>& nodes, int set_size) : nodes_(nodes) {
  const int ranks = static_cast<int>(nodes.size());
  std::map<int, std::vector<int>> ranks_of_node;
  for (int rank = 0; rank < ranks; ++rank) ranks_of_node[nodes[static_cast<std::size_t>(rank)]].push_back(rank);
  std::size_t most = 0;
  for (const auto& [node, members] : ranks_of_node) most = std::max(most, members.size());
  for (std::size_t local = 0; local < most; ++local) {
    for (const auto& [node, members] : ranks_of_node) {
      if (local < members.size()) order_.push_back(members[local]);
    }
  }
  position_.assign(static_cast<std::size_t>(ranks), 0);
  for (std::size_t index = 0; index < order_.size(); ++index) position_[static_cast<std::size_t>(order_[index])] = static_cast<int>(index);

  const int size = std::clamp(set_size, 2, std::max(2, ranks));
  for (std::size_t first = 0; first < order_.size(); first += static_cast<std::size_t>(size)) {
    const auto last = std::min(order_.size(), first + static_cast<std::size_t>(size));
    sets_.emplace_back(order_.begin() + static_cast<std::ptrdiff_t>(first), order_.begin() + static_cast<std::ptrdiff_t>(last));
  }
  if (sets_.size() > 1 && sets_.back().size() < 2) {
    sets_[sets_.size() - 2].push_back(sets_.back().front());
    sets_.pop_back();
  }
  set_index_.assign(static_cast<std::size_t>(ranks), 0);
  for (std::size_t set = 0; set < sets_.size(); ++set) {
    for (int rank : sets_[set]) set_index_[static_cast<std::size_t>(rank)] = static_cast<int>(set);
  }
}

int PartnerTopology::holder_of(int rank) const {
  const std::size_t next = (static_cast<std::size_t>(position_[static_cast<std::size_t>(rank)]) + 1) % order_.size();
  return order_[next];
}

int PartnerTopology::source_of(int rank) const {
  const std::size_t size = order_.size();
  const std::size_t previous = (static_cast<std::size_t>(position_[static_cast<std::size_t>(rank)]) + size - 1) % size;
  return order_[previous];
}

const std::vector<int>& PartnerTopology::set_of(int rank) const {
  return sets_[static_cast<std::size_t>(set_index_[static_cast<std::size_t>(rank)])];
}

int PartnerTopology::index_in_set(int rank) const {
  const std::vector<int>& set = set_of(rank);
  return static_cast<int>(std::find(set.begin(), set.end(), rank) - set.begin());
}

std::string PartnerTopology::partner_weakness() const {
  if (order_.size() < 2) return "a job of one rank has no partner: L3 protects nothing";
  for (int rank : order_) {
    const int holder = holder_of(rank);
    if (nodes_[static_cast<std::size_t>(holder)] == nodes_[static_cast<std::size_t>(rank)]) {
      return "rank " + std::to_string(holder) + " keeps the partner copy of rank " + std::to_string(rank) +
             " on the same node " + std::to_string(nodes_[static_cast<std::size_t>(rank)]) +
             ": losing that node loses both (run on more nodes)";
    }
  }
  return "";
}

std::string PartnerTopology::xor_weakness() const {
  if (order_.size() < 2) return "a job of one rank has no XOR set: L3 protects nothing";
  for (const std::vector<int>& set : sets_) {
    for (std::size_t a = 0; a < set.size(); ++a) {
      for (std::size_t b = a + 1; b < set.size(); ++b) {
        const int node = nodes_[static_cast<std::size_t>(set[a])];
        if (node != nodes_[static_cast<std::size_t>(set[b])]) continue;
        return "ranks " + std::to_string(set[a]) + " and " + std::to_string(set[b]) + " of one XOR set run on node " +
               std::to_string(node) + ": losing it loses two members, which a set cannot rebuild (partner.set_size "
               "larger than the node count?)";
      }
    }
  }
  return "";
}

}  // namespace resurgo
