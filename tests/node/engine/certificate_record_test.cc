#include "node/engine/certificate_record.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

namespace consensor::node {
namespace {

v1::Certificate Cert(const std::string& root, std::vector<std::string> signers, bool dispute = false) {
  v1::Certificate c;
  c.set_result_root(root);
  for (const auto& s : signers) c.add_signers(s);
  c.set_dispute(dispute);
  return c;
}

v1::Task Fresh() {
  v1::Task t;
  t.mutable_spec()->set_graph_sha256("g");
  return t;
}

// The first certificate (with an equivocator) and its refresh (without) are written by
// different threads, so in either order: the record must end with the refreshed one.
TEST(CertificateRecordTest, RefreshWinsInEitherOrder) {
  const v1::Certificate first = Cert("r1", {"a", "b", "e"});
  const v1::Certificate refreshed = Cert("r1", {"a", "b", "c"});
  v1::Task in_order = Fresh();
  StoreFirstCertificate(first, 10, &in_order);
  StoreRefreshedCertificate(refreshed, 10, &in_order);
  v1::Task reversed = Fresh();
  StoreRefreshedCertificate(refreshed, 10, &reversed);
  StoreFirstCertificate(first, 10, &reversed);
  for (const v1::Task* t : {&in_order, &reversed}) {
    ASSERT_TRUE(t->consensus().has_certificate());
    EXPECT_EQ(t->consensus().certificate().signers(2), "c");
    EXPECT_EQ(t->consensus().certificate().request().graph_sha256(), "g");  // travels with its request
    EXPECT_EQ(t->consensus().final_block(), 10u);
  }
}

TEST(CertificateRecordTest, RefreshNeverReplacesADisputeCertificateOrAnotherResult) {
  v1::Task disputed = Fresh();
  StoreCertificate(Cert("r2", {"a", "b", "c", "d"}, /*dispute=*/true), 12, &disputed);
  StoreRefreshedCertificate(Cert("r2", {"a", "b"}), 10, &disputed);
  EXPECT_TRUE(disputed.consensus().certificate().dispute());
  EXPECT_EQ(disputed.consensus().final_block(), 12u);
  v1::Task other = Fresh();
  StoreFirstCertificate(Cert("r2", {"a", "b"}), 10, &other);
  StoreRefreshedCertificate(Cert("r1", {"c", "d"}), 10, &other);
  EXPECT_EQ(other.consensus().certificate().result_root(), "r2");
}

}  // namespace
}  // namespace consensor::node
