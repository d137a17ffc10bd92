// The pieces of the etcd backends that need no etcd: endpoint parsing, prefix ranges,
// the shared template value format, and a store whose etcd is unreachable. The real
// cluster is exercised by tests/e2e/replication_test.py.
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/etcd_client.h"
#include "server/etcd_profile_store.h"
#include "server/etcd_template_store.h"

namespace oobleck::server {
namespace {

MixResult ExampleResult() {
  MixResult r;
  r.mix = {1, 2};
  r.feasible = true;
  r.best.mix = {1, 2};
  r.best.node_order = {1, 0, 1};
  r.best.iteration_time_ms = 1234.5678901234567;
  r.best.stages = {Stage{0, 10, 0, 1, 2, 1.25, 2.5, 0.1 + 0.2, 3e9},
                   Stage{10, 24, 2, 1, 1, 7, 8, 9, 1.5e10}};
  return r;
}

TEST(EtcdEndpointsTest, ParsesListsAndNamesTheBadPart) {
  auto parsed = ParseEtcdEndpoints("127.0.0.1:2379,etcd-1.etcd:2379", "--etcd_endpoints");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, (std::vector<std::string>{"127.0.0.1:2379", "etcd-1.etcd:2379"}));
  for (const char* bad : {"", "127.0.0.1", "a:0", "a:70000", "a:2379,", ":2379", "a:x"}) {
    auto status = ParseEtcdEndpoints(bad, "--etcd_endpoints").status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(status.message().find("--etcd_endpoints"), std::string::npos) << status;
  }
}

TEST(EtcdEndpointsTest, PrefixRangeEndIsTheNextKeyAfterThePrefix) {
  EXPECT_EQ(PrefixRangeEnd("/a/"), "/a0");
  EXPECT_EQ(PrefixRangeEnd(std::string("a\xff", 2)), "b");
  EXPECT_EQ(PrefixRangeEnd(""), std::string(1, '\0'));
}

TEST(SharedTemplateTest, RoundTripsExactly) {
  const MixResult r = ExampleResult();
  auto back = ParseSharedTemplate(SerializeSharedTemplate("k|mix=1,2", r), "k|mix=1,2");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->mix, r.mix);
  EXPECT_EQ(back->best.node_order, r.best.node_order);
  EXPECT_EQ(back->best.iteration_time_ms, r.best.iteration_time_ms);
  ASSERT_EQ(back->best.stages.size(), 2u);
  EXPECT_EQ(back->best.stages[0].cost_ms, 0.1 + 0.2);
  EXPECT_EQ(back->best.stages[1].layer_end, 24);

  MixResult infeasible;
  infeasible.mix = {3};
  infeasible.infeasible_reason = "no stage fits in 16 GiB";
  auto reason = ParseSharedTemplate(SerializeSharedTemplate("k", infeasible), "k");
  ASSERT_TRUE(reason.ok());
  EXPECT_FALSE(reason->feasible);
  EXPECT_EQ(reason->infeasible_reason, infeasible.infeasible_reason);
}

TEST(SharedTemplateTest, RejectsAnotherKeyAndDamagedValuesNamingTheField) {
  const std::string text = SerializeSharedTemplate("k1", ExampleResult());
  EXPECT_NE(ParseSharedTemplate(text, "k2").status().message().find("value.key"),
            std::string::npos);
  EXPECT_EQ(ParseSharedTemplate("{not json", "k1").status().code(),
            absl::StatusCode::kInvalidArgument);
  std::string damaged = text;
  damaged.replace(damaged.find("\"gpus\":2"), 8, "\"gpus\":\"2\"");
  auto status = ParseSharedTemplate(damaged, "k1").status();
  EXPECT_NE(status.message().find("value.result.best.stages[0].gpus"), std::string::npos) << status;
}

TEST(EtcdStoresTest, UnreachableEtcdFailsFastWithUnavailableNamingEtcd) {
  // Port 1 on loopback: nothing listens, connections are refused at once.
  EtcdClient client({"127.0.0.1:1"}, absl::Milliseconds(500));
  ProfileCatalog catalog;
  std::vector<std::string> lines;
  EtcdProfileStore store(&client, "/t/", &catalog,
                         [&lines](const std::string& line) { lines.push_back(line); });
  ModelProfile profile;
  profile.key = ProfileKey{"m", "g", 1};
  profile.layers.push_back(LayerProfile{1, 2, 3, 4, {{1, 0}}, {{1, 0}}});
  auto put = store.Put(profile, /*replace=*/false);
  EXPECT_EQ(put.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(put.status().message().find("etcd at 127.0.0.1:1"), std::string::npos) << put.status();
  EXPECT_EQ(catalog.size(), 0);
  EXPECT_FALSE(store.synced());

  EtcdTemplateStore shared(&client, "/t/", SharedCacheOptions{});
  auto found = shared.FindAll({"a", "b"});
  EXPECT_EQ(found, (std::vector<std::shared_ptr<const MixResult>>{nullptr, nullptr}));
  EXPECT_EQ(shared.stats().misses, 2);
  EXPECT_EQ(shared.stats().errors, 1);
}

}  // namespace
}  // namespace oobleck::server
