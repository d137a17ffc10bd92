// The durable profile store (--data_dir): file format, atomic writes, reload, and that a
// damaged file is reported and skipped while the others load.
#include "server/profile_store.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/security/credentials.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/profile.h"
#include "core/profile_catalog.h"
#include "core/template_planner.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "oobleck/planner/v1/planner.grpc.pb.h"
#include "server/planner_server.h"
#include "server/planner_service.h"
#include "tests/service/temp_dir.h"
#include "tests/service/test_load_root.h"

namespace oobleck::server {
namespace {

namespace fs = std::filesystem;
namespace pb = ::oobleck::planner::v1;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

constexpr char kExampleDir[] = OOBLECK_SOURCE_DIR "/examples/profiles/gpt2-xl/rtx4090";

ModelProfile ExampleProfile(const std::string& model = "gpt2-xl",
                            const std::string& gpu_type = "rtx4090") {
  absl::StatusOr<ModelProfile> profile = LoadOobleckProfileDir(kExampleDir, model, gpu_type, 1);
  EXPECT_TRUE(profile.ok()) << profile.status();
  return *std::move(profile);
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void WriteFile(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

std::vector<std::string> Keys(const ProfileCatalog& catalog) {
  std::vector<std::string> keys;
  for (const auto& profile : catalog.List("")) keys.push_back(profile->key.ToString());
  std::sort(keys.begin(), keys.end());
  return keys;
}

TEST(StoredProfileFormatTest, RoundTripsExactly) {
  ModelProfile profile = ExampleProfile();
  // Values that print with many digits must read back bit for bit.
  profile.layers[0].forward_ms = 0.1 + 0.2;
  profile.layers[1].param_bytes = 1.0 / 3.0;
  absl::StatusOr<ModelProfile> read = ParseStoredProfile(SerializeStoredProfile(profile));
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->key, profile.key);
  EXPECT_EQ(read->Fingerprint(), profile.Fingerprint());
  EXPECT_EQ(read->layers[0].forward_ms, 0.1 + 0.2);
  EXPECT_EQ(read->layers[1].allreduce_in_node_ms, profile.layers[1].allreduce_in_node_ms);
}

TEST(StoredProfileFormatTest, DetectsDamage) {
  const std::string good = SerializeStoredProfile(ExampleProfile());
  // Truncated (a partial copy).
  EXPECT_EQ(ParseStoredProfile(good.substr(0, good.size() / 2)).status().code(),
            absl::StatusCode::kDataLoss);
  // One digit changed inside the payload: still valid JSON, but the checksum differs.
  std::string flipped = good;
  const size_t digit = flipped.find("\"forward_ms\": ") + 14;
  flipped[digit] = flipped[digit] == '1' ? '2' : '1';
  absl::Status status = ParseStoredProfile(flipped).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), HasSubstr("checksum"));
  // Another version.
  std::string other_version = good;
  other_version.replace(other_version.find("\"version\": 1"), 12, "\"version\": 7");
  EXPECT_THAT(ParseStoredProfile(other_version).status().message(),
              HasSubstr("file.version 7 is not supported"));
  EXPECT_THAT(ParseStoredProfile("[]").status().message(), HasSubstr("JSON object"));
  EXPECT_THAT(ParseStoredProfile("{\"format\": \"x\"}").status().message(),
              HasSubstr("file.format"));
}

TEST(StoredProfileFormatTest, FileNamesAreSafeAndDistinct) {
  EXPECT_EQ(StoredProfileFileName({"gpt2-xl", "rtx4090", 1}), "gpt2-xl+rtx4090+mb1.json");
  EXPECT_EQ(StoredProfileFileName({"../x", "a/b", 2}), "%2E%2E%2Fx+a%2Fb+mb2.json");
  EXPECT_NE(StoredProfileFileName({"a+b", "c", 1}), StoredProfileFileName({"a", "b+c", 1}));
}

TEST(ProfileStoreTest, PersistsAndReloads) {
  TempDir dir;
  {
    ProfileCatalog catalog;
    auto store = ProfileStore::Open(dir.path().string(), &catalog);
    ASSERT_TRUE(store.ok()) << store.status();
    ASSERT_TRUE((*store)->Put(ExampleProfile("gpt2-xl"), false).ok());
    ASSERT_TRUE((*store)->Put(ExampleProfile("a/b"), false).ok());
    EXPECT_THAT(Keys(catalog), ElementsAre("a/b/rtx4090/mb1", "gpt2-xl/rtx4090/mb1"));
  }
  // Only the two profiles, no temp files left behind.
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir.path())) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  EXPECT_THAT(names, ElementsAre("a%2Fb+rtx4090+mb1.json", "gpt2-xl+rtx4090+mb1.json"));

  ProfileCatalog reloaded;
  auto store = ProfileStore::Open(dir.path().string(), &reloaded);
  ASSERT_TRUE(store.ok());
  ProfileStoreReport report = (*store)->LoadAll();
  EXPECT_THAT(report.errors, IsEmpty());
  EXPECT_THAT(report.loaded, SizeIs(2));
  auto found = reloaded.Find("gpt2-xl", "rtx4090", 1);
  ASSERT_TRUE(found.ok());
  EXPECT_EQ((*found)->Fingerprint(), ExampleProfile().Fingerprint());
}

TEST(ProfileStoreTest, CorruptAndPartialFilesAreReportedAndSkipped) {
  TempDir dir;
  {
    ProfileCatalog catalog;
    auto store = ProfileStore::Open(dir.path().string(), &catalog);
    ASSERT_TRUE(store.ok());
    for (const char* model : {"good", "truncated", "flipped"}) {
      ASSERT_TRUE((*store)->Put(ExampleProfile(model), false).ok());
    }
  }
  const fs::path truncated = dir.path() / "truncated+rtx4090+mb1.json";
  WriteFile(truncated, ReadFile(truncated).substr(0, 300));
  const fs::path flipped = dir.path() / "flipped+rtx4090+mb1.json";
  std::string text = ReadFile(flipped);
  const size_t digit = text.find("\"backward_ms\": ") + 15;
  text[digit] = text[digit] == '1' ? '2' : '1';  // a digit becomes another digit
  WriteFile(flipped, text);
  WriteFile(dir.path() / "empty+rtx4090+mb1.json", "");
  // A copy under another key's name, and a temp file of a write cut short by a crash.
  WriteFile(dir.path() / "renamed+rtx4090+mb1.json",
            ReadFile(dir.path() / "good+rtx4090+mb1.json"));
  const fs::path temp = dir.path() / ".good+rtx4090+mb1.json.tmp.123.0";
  WriteFile(temp, "{\"format\": \"oobleck-pl");

  ProfileCatalog catalog;
  auto store = ProfileStore::Open(dir.path().string(), &catalog);
  ASSERT_TRUE(store.ok());
  ProfileStoreReport report = (*store)->LoadAll();
  EXPECT_THAT(report.loaded, ElementsAre("good/rtx4090/mb1"));
  EXPECT_THAT(Keys(catalog), ElementsAre("good/rtx4090/mb1"));
  ASSERT_THAT(report.errors, SizeIs(5));
  std::sort(report.errors.begin(), report.errors.end());
  EXPECT_THAT(report.errors[0],
              AllOf(HasSubstr(".good+rtx4090+mb1.json.tmp.123.0"), HasSubstr("unfinished write")));
  EXPECT_THAT(report.errors[1], AllOf(HasSubstr("empty+rtx4090+mb1.json"), HasSubstr("JSON")));
  EXPECT_THAT(report.errors[2], AllOf(HasSubstr("flipped+rtx4090+mb1.json"), HasSubstr("DATA_LOSS"),
                                      HasSubstr("checksum")));
  EXPECT_THAT(report.errors[3], AllOf(HasSubstr("renamed+rtx4090+mb1.json"),
                                      HasSubstr("holds profile good/rtx4090/mb1")));
  EXPECT_THAT(report.errors[4],
              AllOf(HasSubstr("truncated+rtx4090+mb1.json"), HasSubstr("DATA_LOSS")));
  EXPECT_FALSE(fs::exists(temp)) << "leftover temp files are cleaned up";
}

TEST(ProfileStoreTest, KeepsTheFileWhenNotReplacing) {
  TempDir dir;
  ProfileCatalog catalog;
  auto store = ProfileStore::Open(dir.path().string(), &catalog);
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->Put(ExampleProfile(), false).ok());
  const fs::path file = dir.path() / "gpt2-xl+rtx4090+mb1.json";
  const std::string before = ReadFile(file);

  ModelProfile changed = ExampleProfile();
  changed.layers[0].forward_ms += 1;
  absl::StatusOr<bool> again = (*store)->Put(changed, false);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(ReadFile(file), before);

  absl::StatusOr<bool> replaced = (*store)->Put(changed, true);
  ASSERT_TRUE(replaced.ok());
  EXPECT_TRUE(*replaced);
  absl::StatusOr<ModelProfile> on_disk = ParseStoredProfile(ReadFile(file));
  ASSERT_TRUE(on_disk.ok());
  EXPECT_EQ(on_disk->Fingerprint(), changed.Fingerprint());
}

TEST(ProfileStoreTest, InvalidProfileIsNotWritten) {
  TempDir dir;
  ProfileCatalog catalog;
  auto store = ProfileStore::Open(dir.path().string(), &catalog);
  ASSERT_TRUE(store.ok());
  ModelProfile bad = ExampleProfile();
  bad.layers[3].backward_ms = -1;
  EXPECT_EQ((*store)->Put(bad, false).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(fs::is_empty(dir.path()));
  EXPECT_EQ(catalog.size(), 0);
}

TEST(ProfileStoreTest, OpenRefusesAFile) {
  TempDir dir;
  WriteFile(dir.path() / "file", "x");
  ProfileCatalog catalog;
  EXPECT_EQ(ProfileStore::Open((dir.path() / "file").string(), &catalog).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

// --- through the service: LoadProfile acknowledges only what is on disk ---------------

class StoredLoadProfileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = ProfileStore::Open(dir_.path().string(), &catalog_);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    ServiceOptions options = WithTestLoadRoot();
    options.profile_store = store_.get();
    service_ = std::make_unique<PlannerService>(&catalog_, &cache_, 1, options);
    auto running = StartPlannerServer("127.0.0.1:0", service_.get());
    ASSERT_TRUE(running.ok()) << running.status();
    running_ = *std::move(running);
    stub_ = pb::Planner::NewStub(
        grpc::CreateChannel(running_.address, grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    if (running_.server) running_.server->Shutdown();
  }

  grpc::Status Load(const std::string& model, pb::LoadProfileResponse* response) {
    pb::LoadProfileRequest request;
    request.set_model(model);
    request.set_gpu_type("rtx4090");
    request.set_microbatch_size(1);
    request.set_directory(kExampleDir);
    grpc::ClientContext context;
    return stub_->LoadProfile(&context, request, response);
  }

  TempDir dir_;
  ProfileCatalog catalog_;
  TemplateCache cache_{1 << 20};
  std::unique_ptr<ProfileStore> store_;
  std::unique_ptr<PlannerService> service_;
  RunningServer running_;
  std::unique_ptr<pb::Planner::Stub> stub_;
};

TEST_F(StoredLoadProfileTest, AcknowledgedProfileIsOnDisk) {
  pb::LoadProfileResponse response;
  grpc::Status status = Load("gpt2-xl", &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  absl::StatusOr<ModelProfile> on_disk =
      ParseStoredProfile(ReadFile(dir_.path() / "gpt2-xl+rtx4090+mb1.json"));
  ASSERT_TRUE(on_disk.ok()) << on_disk.status();
  EXPECT_EQ(on_disk->Fingerprint(), response.profile().fingerprint());
}

TEST_F(StoredLoadProfileTest, FailedWriteIsAnErrorAndNothingIsStored) {
  // The directory disappears under the server (a lost volume): writing must fail loudly.
  fs::remove_all(dir_.path());
  pb::LoadProfileResponse response;
  grpc::Status status = Load("gpt2-xl", &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_THAT(status.error_message(),
              AllOf(HasSubstr("cannot store profile"), HasSubstr("gpt2-xl+rtx4090+mb1.json")));
  EXPECT_EQ(catalog_.size(), 0);
}

}  // namespace
}  // namespace oobleck::server
