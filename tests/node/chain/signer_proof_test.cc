// The signer's proof of possession (docs/CONTRACTS.md, "Proof of possession"): only the signer's
// own signature over the digest naming this owner, chain and registry is accepted. The digest
// is checked against the registry's own on anvil in OperatorTest.SquatterCannotBindAnotherNodesKey.
#include <gtest/gtest.h>

#include "common/sha256.h"
#include "node/chain/chain_client.h"

namespace consensor::node {
namespace {

Secp256k1Secret SecretOf(uint8_t v) {
  Secp256k1Secret k{};
  k[31] = v;
  return k;
}
Address20 AddressOf(uint8_t v) { return *AddressFromSecretKey(SecretOf(v)); }

Deployment TestDeployment(uint64_t chain_id) {
  Deployment d;
  d.chain_id = chain_id;
  d.registry[19] = 0x42;
  return d;
}

TEST(SignerProofTest, OnlyTheSignersProofForThisOwnerChainAndRegistryIsAccepted) {
  const Deployment here = TestDeployment(31337);
  const Address20 owner = AddressOf(1), signer = AddressOf(2), squatter = AddressOf(3);
  auto proof = MakeSignerProof(SecretOf(2), here, owner);
  ASSERT_TRUE(proof.ok()) << proof.status().ToString();
  EXPECT_TRUE(CheckSignerProof(*proof, here, owner, signer).ok());

  // Copied by a squatter for itself, or claimed for another key.
  EXPECT_EQ(CheckSignerProof(*proof, here, squatter, signer).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckSignerProof(*proof, here, owner, squatter).code(), StatusCode::kInvalidArgument);
  // Made for another chain or another registry.
  EXPECT_EQ(CheckSignerProof(*proof, TestDeployment(1), owner, signer).code(), StatusCode::kInvalidArgument);
  Deployment other_registry = here;
  other_registry.registry[0] = 1;
  EXPECT_EQ(CheckSignerProof(*proof, other_registry, owner, signer).code(), StatusCode::kInvalidArgument);
  // Made by the squatter's key.
  auto forged = MakeSignerProof(SecretOf(3), here, owner);
  ASSERT_TRUE(forged.ok());
  Status s = CheckSignerProof(*forged, here, owner, signer);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("signer-proof --owner"), std::string::npos) << s.ToString();
  // Malformed: truncated, a bad v, all zero.
  std::vector<uint8_t> bytes(proof->begin(), proof->end());
  EXPECT_FALSE(CheckSignerProof(std::span(bytes).first(64), here, owner, signer).ok());
  bytes[64] = 29;
  EXPECT_FALSE(CheckSignerProof(bytes, here, owner, signer).ok());
  EXPECT_FALSE(CheckSignerProof(std::vector<uint8_t>(65, 0), here, owner, signer).ok());
}

TEST(SignerProofTest, DigestSeparatesEveryField) {
  const Address20 a = AddressOf(1), b = AddressOf(2);
  const Address20 registry = TestDeployment(1).registry;
  const Hash256 base = SignerBindingDigest(1, registry, a, b);
  EXPECT_NE(base, SignerBindingDigest(2, registry, a, b));
  EXPECT_NE(base, SignerBindingDigest(1, a, a, b));
  EXPECT_NE(base, SignerBindingDigest(1, registry, b, a));
  EXPECT_EQ(base, SignerBindingDigest(1, registry, a, b));
}

}  // namespace
}  // namespace consensor::node
