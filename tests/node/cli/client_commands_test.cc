// What the CLI checks before it trusts a node's outputs (issue 16, hole 6): the record belongs
// to the task asked about, and the outputs form the root the certificate's signers signed.
#include "node/cli/client_commands.h"

#include <gtest/gtest.h>

#include "common/sha256.h"
#include "executor/merkle.h"
#include "node/api/task_spec.h"

namespace consensor::node {
namespace {

Hash256 H(uint8_t v) {
  Hash256 h{};
  h[0] = 0x3c;
  h[31] = v;
  return h;
}

class CheckTaskTest : public ::testing::Test {
 protected:
  void SetUp() override {
    v1::SubmitTaskRequest* spec = task_.mutable_spec();
    spec->set_graph_sha256(ToHex(H(1)));
    (*spec->mutable_inputs())["x"] = ToHex(H(2));
    spec->mutable_options()->set_replicas(3);
    spec->mutable_options()->set_quorum(2);
    id_ = TaskIdOfRequest(*spec)->Hex();
    task_.set_task_id(id_);
    AddOutput("y", H(3));
    AddOutput("logits", H(4));
    SetRoots(Root());
  }

  void AddOutput(const std::string& name, const Hash256& tensor_hash) {
    v1::TaskOutput* o = task_.mutable_result()->add_outputs();
    o->set_name(name);
    o->set_tensor_hash(ToHex(tensor_hash));
  }
  std::string Root() const {
    std::vector<std::pair<std::string, Hash256>> outputs;
    for (const auto& o : task_.result().outputs()) outputs.emplace_back(o.name(), *Hash256FromHex(o.tensor_hash()));
    return ToHex(executor::ResultRoot(outputs));
  }
  void SetRoots(const std::string& root) {
    task_.mutable_result()->set_result_root(root);
    v1::Certificate* c = task_.mutable_consensus()->mutable_certificate();
    c->set_task_id(id_);
    c->set_result_root(root);
  }
  std::string Error() const {
    Status s = CheckTaskAgainstCertificate(task_, id_);
    EXPECT_EQ(s.code(), StatusCode::kDataLoss) << s.ToString();
    return s.message();
  }

  v1::Task task_;
  std::string id_;
};

TEST_F(CheckTaskTest, ConsistentTaskPasses) {
  EXPECT_TRUE(CheckTaskAgainstCertificate(task_, id_).ok());
  // A standalone node's task has no certificate: the reported root must still match.
  task_.clear_consensus();
  EXPECT_TRUE(CheckTaskAgainstCertificate(task_, id_).ok());
}

// The attack: after a dispute, a node keeps serving the outputs the dispute overruled, under the
// new certificate. Its own report may be consistent; the certificate is what counts.
TEST_F(CheckTaskTest, OutputsOtherThanTheCertifiedOnesAreRefused) {
  task_.mutable_consensus()->mutable_certificate()->set_result_root(ToHex(H(9)));
  std::string e = Error();
  EXPECT_NE(e.find("but the certificate certifies " + ToHex(H(9))), std::string::npos) << e;
  EXPECT_NE(e.find("not the certified outputs"), std::string::npos) << e;
}

TEST_F(CheckTaskTest, OutputsThatDoNotFormTheReportedRootAreRefused) {
  task_.mutable_result()->mutable_outputs(0)->set_tensor_hash(ToHex(H(7)));
  std::string e = Error();
  EXPECT_NE(e.find("but the node reports " + Root().substr(0, 0)), std::string::npos) << e;
  EXPECT_NE(e.find("the outputs hash to result root " + Root()), std::string::npos) << e;
}

TEST_F(CheckTaskTest, RecordOfAnotherTaskIsRefused) {
  // A downgraded request under the client's id, or a certificate for another task.
  task_.mutable_spec()->mutable_options()->set_replicas(1);
  std::string e = Error();
  EXPECT_NE(e.find("its record does not belong to the task"), std::string::npos) << e;
  task_.mutable_spec()->mutable_options()->set_replicas(3);
  task_.mutable_consensus()->mutable_certificate()->set_task_id(ToHex(H(5)));
  e = Error();
  EXPECT_NE(e.find("the node's certificate is for task " + ToHex(H(5))), std::string::npos) << e;
}

}  // namespace
}  // namespace consensor::node
