// GlooPeerRanks (runtime/src/comm/gloo/gloo_peer_ranks.h): which rank a Gloo error's
// address names. The real context's addresses are read in comm_gloo_test (a killed peer
// named by rank); here the matching: whole addresses only, several ranks, none.
#include <gtest/gtest.h>

#include "runtime/src/comm/gloo/gloo_peer_ranks.h"

namespace zdp {
namespace {

TEST(GlooPeerRanks, NamesTheRankWhoseAddressTheErrorHolds) {
  const GlooPeerRanks peers({{"[127.0.0.1]:4123", 1}, {"[127.0.0.1]:41235", 2}, {"[10.0.0.7]:4123", 3}});
  EXPECT_EQ(peers.ranks_named_in("[../gloo/transport/tcp/pair.cc:598] Connection closed by peer [127.0.0.1]:41235"),
            "rank 2");
  // A port that is the start of another's is not that one's ("...:4123" in "...:41235").
  EXPECT_EQ(peers.ranks_named_in("Read error [127.0.0.1]:4123: Connection reset by peer"), "rank 1");
  EXPECT_EQ(peers.ranks_named_in("Connection closed by peer [10.0.0.7]:4123"), "rank 3");
  EXPECT_EQ(peers.ranks_named_in("peers [127.0.0.1]:4123 and [10.0.0.7]:4123"), "ranks 1 and 3");
  EXPECT_EQ(peers.ranks_named_in("Timed out waiting 1500ms for recv operation to complete"), "");
  EXPECT_EQ(peers.ranks_named_in("Connection closed by peer [127.0.0.1]:4124"), "");
  EXPECT_EQ(GlooPeerRanks().ranks_named_in("Connection closed by peer [127.0.0.1]:4123"), "");
  // A rank's two names (its connection's address, its listener's) name it once.
  const GlooPeerRanks twice({{"[127.0.0.1]:4123", 1}, {"[127.0.0.1]:4123", 1}, {"[127.0.0.1]:5000", 2}});
  EXPECT_EQ(twice.ranks_named_in("Connection closed by peer [127.0.0.1]:4123"), "rank 1");
}

}  // namespace
}  // namespace zdp
