// The API server's connection and request limits (supervisor/api/admission.h), without sockets:
// clients are names here, as the server derives them from a uid or a TCP address.
#include "supervisor/api/admission.h"

#include <gtest/gtest.h>

namespace airlock::api {
namespace {

AdmissionLimits limits(size_t connections, size_t per_client, size_t requests,
                       size_t requests_per_client) {
  return {connections, per_client, requests, requests_per_client};
}

TEST(Admission, UnderTheLimitsEveryoneIsAdmitted) {
  Admission a(limits(4, 4, 4, 4));
  for (uint64_t id = 1; id <= 4; ++id) {
    auto v = a.openConnection(id, "uid 1");
    EXPECT_TRUE(v.admitted);
    EXPECT_EQ(v.evict, 0u);
  }
  EXPECT_EQ(a.connections(), 4u);
  EXPECT_EQ(a.connectionsOf("uid 1"), 4u);
}

TEST(Admission, AFullServerTakesTheBiggestHoldersOldestWaitingConnection) {
  Admission a(limits(4, 100, 100, 100));
  ASSERT_TRUE(a.openConnection(1, "uid 1000").admitted);  // the quiet client, oldest of all
  for (uint64_t id = 2; id <= 4; ++id) ASSERT_TRUE(a.openConnection(id, "uid 66").admitted);
  auto v = a.openConnection(5, "uid 1000");
  EXPECT_TRUE(v.admitted);
  EXPECT_EQ(v.evict, 2u) << "the flood's oldest goes, not the quiet client's";
  EXPECT_EQ(a.connectionsOf("uid 66"), 2u);
  EXPECT_EQ(a.connectionsOf("uid 1000"), 2u);
  EXPECT_EQ(a.connections(), 4u);
  a.closeConnection(2);  // the server closes the evicted one later: a no-op here
  EXPECT_EQ(a.connections(), 4u);
}

TEST(Admission, EvictionTakesTheLeastRecentlyUsed) {
  Admission a(limits(3, 100, 100, 100));
  for (uint64_t id = 1; id <= 3; ++id) ASSERT_TRUE(a.openConnection(id, "uid 1").admitted);
  a.used(1);
  ASSERT_TRUE(a.beginRequest(2).admitted);
  a.endRequest(2);
  EXPECT_EQ(a.openConnection(4, "uid 1").evict, 3u);
  EXPECT_EQ(a.openConnection(5, "uid 1").evict, 1u);
}

TEST(Admission, ConnectionsAnsweringARequestAreNeverEvicted) {
  Admission a(limits(2, 100, 100, 100));
  ASSERT_TRUE(a.openConnection(1, "uid 1").admitted);
  ASSERT_TRUE(a.openConnection(2, "uid 1").admitted);
  ASSERT_TRUE(a.beginRequest(1).admitted);
  EXPECT_EQ(a.openConnection(3, "uid 2").evict, 2u);
  ASSERT_TRUE(a.beginRequest(3).admitted);
  auto v = a.openConnection(4, "uid 2");
  EXPECT_FALSE(v.admitted);
  EXPECT_EQ(v.status, 503);
  EXPECT_NE(v.refusal.find("server.max_connections"), std::string::npos) << v.refusal;
  EXPECT_EQ(a.connectionsOf("uid 2"), 1u);  // the refused one left no trace
  a.endRequest(1);
  EXPECT_EQ(a.openConnection(5, "uid 2").evict, 1u);
}

TEST(Admission, AClientOverItsOwnLimitGivesUpItsOwnOldestOrGets429) {
  Admission a(limits(100, 2, 100, 100));
  ASSERT_TRUE(a.openConnection(1, "uid 7").admitted);
  ASSERT_TRUE(a.openConnection(2, "uid 7").admitted);
  ASSERT_TRUE(a.openConnection(3, "uid 8").admitted);
  EXPECT_EQ(a.openConnection(4, "uid 7").evict, 1u);
  ASSERT_TRUE(a.beginRequest(2).admitted);
  ASSERT_TRUE(a.beginRequest(4).admitted);
  auto v = a.openConnection(5, "uid 7");
  EXPECT_FALSE(v.admitted);
  EXPECT_EQ(v.status, 429);
  EXPECT_NE(v.refusal.find("uid 7"), std::string::npos);
  EXPECT_NE(v.refusal.find("server.max_connections_per_client"), std::string::npos);
  EXPECT_TRUE(a.openConnection(6, "uid 8").admitted) << "another client is not held back";
}

TEST(Admission, RequestSlotsArePerClientAndInTotal) {
  Admission a(limits(100, 100, 3, 2));
  for (uint64_t id = 1; id <= 5; ++id)
    ASSERT_TRUE(a.openConnection(id, id <= 3 ? "uid 1" : "uid 2").admitted);
  ASSERT_TRUE(a.beginRequest(1).admitted);
  ASSERT_TRUE(a.beginRequest(2).admitted);
  auto per_client = a.beginRequest(3);
  EXPECT_FALSE(per_client.admitted);
  EXPECT_EQ(per_client.status, 429);
  EXPECT_NE(per_client.refusal.find("server.max_requests_per_client"), std::string::npos);
  ASSERT_TRUE(a.beginRequest(4).admitted);
  auto total = a.beginRequest(5);
  EXPECT_FALSE(total.admitted);
  EXPECT_EQ(total.status, 503);
  EXPECT_NE(total.refusal.find("server.max_requests"), std::string::npos);
  EXPECT_EQ(a.requests(), 3u);
  a.endRequest(1);
  EXPECT_TRUE(a.beginRequest(5).admitted);
  // A connection closed with its request unfinished gives its slot back.
  a.closeConnection(2);
  EXPECT_EQ(a.requests(), 2u);
  EXPECT_TRUE(a.beginRequest(3).admitted);
}

TEST(Admission, AnEvictedConnectionGetsNoRequestSlot) {
  Admission a(limits(1, 100, 100, 100));
  ASSERT_TRUE(a.openConnection(1, "uid 1").admitted);
  EXPECT_EQ(a.openConnection(2, "uid 1").evict, 1u);
  auto v = a.beginRequest(1);  // its header completed just as it was evicted
  EXPECT_FALSE(v.admitted);
  EXPECT_EQ(v.status, 0) << "not refused with an answer: the server just closes it";
  EXPECT_EQ(a.requests(), 0u);
}

TEST(Admission, ClientsWithoutConnectionsAreForgotten) {
  Admission a(limits(100, 100, 100, 100));
  for (uint64_t id = 1; id <= 1000; ++id) {
    ASSERT_TRUE(a.openConnection(id, "tcp 127.0.0." + std::to_string(id % 250)).admitted);
    a.closeConnection(id);
  }
  EXPECT_EQ(a.connections(), 0u);
  EXPECT_EQ(a.clients(), 0u);
  // Refused newcomers leave no entry either.
  Admission full(limits(1, 100, 100, 100));
  ASSERT_TRUE(full.openConnection(1, "uid 1").admitted);
  ASSERT_TRUE(full.beginRequest(1).admitted);
  EXPECT_FALSE(full.openConnection(2, "uid 2").admitted);
  EXPECT_EQ(full.clients(), 1u);
}

}  // namespace
}  // namespace airlock::api
