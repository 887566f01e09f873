#include "consensus/attestation.h"
#include "tests/test_hex.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/keccak.h"
#include "common/secp256k1_sign.h"

namespace consensor::consensus {
namespace {

using testing_support::Arr;
using testing_support::Hex;

// The example from EIP-712 itself (https://eips.ethereum.org/EIPS/eip-712, Example.js):
//   Person(string name,address wallet), Mail(Person from,Person to,string contents)
// encodeType(Mail) lists referenced types after the primary one, alphabetically.
struct Person {
  std::string name;
  Address20 wallet;
};

Hash256 HashPerson(const Person& p) {
  const Hash256 words[] = {Eip712WordString(p.name), Eip712WordAddress(p.wallet)};
  return Eip712HashStruct(Keccak256("Person(string name,address wallet)"), words);
}

Hash256 HashMail(const Person& from, const Person& to, std::string_view contents) {
  const Hash256 words[] = {HashPerson(from), HashPerson(to), Eip712WordString(contents)};
  return Eip712HashStruct(Keccak256("Mail(Person from,Person to,string contents)Person(string name,address wallet)"),
                          words);
}

TEST(Eip712, OfficialMailExample) {
  Address20 contract = Arr<20>("CcCCccccCCCCcCCCCCCcCcCccCcCCCcCcccccccC");
  Hash256 domain = Eip712DomainSeparator("Ether Mail", "1", 1, contract);
  EXPECT_EQ(ToHex(domain), "f2cee375fa42b42143804025fc449deafd50cc031ca257e0b194a650a912090f");

  Person cow{"Cow", Arr<20>("CD2a3d9F938E13CD947Ec05AbC7FE734Df8DD826")};
  Person bob{"Bob", Arr<20>("bBbBBBBbbBBBbbbBbbBbbbbBBbBbbbbBbBbbBBbB")};
  Hash256 mail = HashMail(cow, bob, "Hello, Bob!");
  EXPECT_EQ(ToHex(mail), "c52c0ee5d84264471806290a3f2c4cecfc5490626bf912d01f240d7a274b371e");

  Hash256 digest = Eip712Digest(domain, mail);
  EXPECT_EQ(ToHex(digest), "be609aee343fb3c4b28e1df9e632fca64fcfaede20f02e86244efddf30957bd2");

  Secp256k1Secret cow_key = Keccak256("cow");
  auto cow_addr = AddressFromSecretKey(cow_key);
  ASSERT_TRUE(cow_addr.ok());
  EXPECT_EQ(*cow_addr, cow.wallet);

  auto sig = SignDigest(cow_key, digest);
  ASSERT_TRUE(sig.ok()) << sig.status().ToString();
  std::array<uint8_t, 65> b = ToBytes65(*sig);
  EXPECT_EQ(b[64], 28);
  EXPECT_EQ(ToHex(sig->r), "4355c47d63924e8a72e509b65029052eb6c299d53a04e167c5775fd466751c9d");
  EXPECT_EQ(ToHex(sig->s), "07299936d304c153f6443dfa05f40ff007d72911b6f72307f996231605b91562");
  auto signer = RecoverAddress(digest, *sig);
  ASSERT_TRUE(signer.ok());
  EXPECT_EQ(*signer, cow.wallet);
}

TEST(Eip712, TypeStringsArePinned) {
  // These strings are the on-chain protocol; the contract hashes the same bytes.
  EXPECT_EQ(kEip712DomainType, "EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)");
  EXPECT_EQ(kAttestationType, "Attestation(bytes32 taskId,bytes32 resultRoot,bytes32 traceRoot,uint64 referenceBlock)");
  // Well-known hash of the EIP712Domain type string (same as OpenZeppelin's EIP712 TYPE_HASH).
  EXPECT_EQ(ToHex(Keccak256(kEip712DomainType)), "8b73c3c69bb8fe3d512ecc4cf759cc79239f7b179b0ffacaa9a75d522b39400f");
}

Attestation SampleAttestation() {
  Attestation a;
  a.task_id = Keccak256("task");
  a.result_root = Keccak256("result");
  a.trace_root = Keccak256("trace");
  a.reference_block = 19'000'000;
  return a;
}

TEST(Attestation, StructHashAndDigestLayout) {
  Attestation a = SampleAttestation();
  // hashStruct = keccak256(typeHash || taskId || resultRoot || traceRoot || uint64 word).
  std::vector<uint8_t> enc;
  enc.reserve(5 * 32);  // also keeps g++ 12 from a false -Wstringop-overflow on the first insert
  Hash256 th = Keccak256(kAttestationType);
  enc.insert(enc.end(), th.begin(), th.end());
  enc.insert(enc.end(), a.task_id.begin(), a.task_id.end());
  enc.insert(enc.end(), a.result_root.begin(), a.result_root.end());
  enc.insert(enc.end(), a.trace_root.begin(), a.trace_root.end());
  std::vector<uint8_t> word = Hex("000000000000000000000000000000000000000000000000000000000121eac0");  // 19000000
  enc.insert(enc.end(), word.begin(), word.end());
  EXPECT_EQ(AttestationStructHash(a), Keccak256(enc));

  Eip712Domain d{31337, Arr<20>("5FbDB2315678afecb367f032d93F642f64180aa3")};
  std::vector<uint8_t> dom;
  Hash256 dth = Keccak256(kEip712DomainType), n = Keccak256("Consensor"), v = Keccak256("1");
  for (const Hash256* h : {&dth, &n, &v}) dom.insert(dom.end(), h->begin(), h->end());
  std::vector<uint8_t> chain = Hex("0000000000000000000000000000000000000000000000000000000000007a69");
  dom.insert(dom.end(), chain.begin(), chain.end());
  dom.insert(dom.end(), 12, 0);
  dom.insert(dom.end(), d.verifying_contract.begin(), d.verifying_contract.end());
  EXPECT_EQ(DomainSeparator(d), Keccak256(dom));

  std::vector<uint8_t> pre = {0x19, 0x01};
  Hash256 ds = DomainSeparator(d), sh = AttestationStructHash(a);
  pre.insert(pre.end(), ds.begin(), ds.end());
  pre.insert(pre.end(), sh.begin(), sh.end());
  EXPECT_EQ(AttestationDigest(d, a), Keccak256(pre));
}

TEST(Attestation, SignRecoverRoundTrip) {
  Secp256k1Secret key = Arr<32>("ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80");
  Eip712Domain d{31337, Arr<20>("5FbDB2315678afecb367f032d93F642f64180aa3")};
  Attestation a = SampleAttestation();
  auto sig = SignAttestation(key, d, a);
  ASSERT_TRUE(sig.ok()) << sig.status().ToString();
  EXPECT_TRUE((*sig)[64] == 27 || (*sig)[64] == 28);
  auto signer = RecoverAttestationSigner(d, a, *sig);
  ASSERT_TRUE(signer.ok()) << signer.status().ToString();
  EXPECT_EQ(ToHex(*signer), "f39fd6e51aad88f6f4ce6ab8827279cfffb92266");

  // Any change to the attestation or domain changes the recovered signer.
  Attestation a2 = a;
  a2.reference_block += 1;
  auto s2 = RecoverAttestationSigner(d, a2, *sig);
  if (s2.ok()) {
    EXPECT_NE(*s2, *signer);
  }
  Eip712Domain d2 = d;
  d2.chain_id = 1;
  auto s3 = RecoverAttestationSigner(d2, a, *sig);
  if (s3.ok()) {
    EXPECT_NE(*s3, *signer);
  }

  // Malformed signatures are refused with an error.
  std::array<uint8_t, 65> bad = *sig;
  bad[64] = 29;
  EXPECT_EQ(RecoverAttestationSigner(d, a, bad).status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(RecoverAttestationSigner(d, a, std::span<const uint8_t>(sig->data(), 64)).ok());
  EXPECT_FALSE(SignAttestation(Secp256k1Secret{}, d, a).ok());
}

}  // namespace
}  // namespace consensor::consensus

namespace consensor::consensus {
namespace {

// The conformance vector of docs/CONTRACTS.md: the contract computes this digest (checked by
// contracts/test/ConformanceVector.t.sol and, on a live anvil, by contracts/e2e-anvil.sh), so
// node and contract agree byte for byte.
TEST(Attestation, MatchesTheContractsConformanceVector) {
  Eip712Domain domain{31337, Arr<20>("e7f1725E7734CE288F8367e1Bb143E90bb3F0512")};
  EXPECT_EQ(ToHex(DomainSeparator(domain)), "6e9e086d90984847784b819feb735f7b238f5b999ec87e48667cd7ab842fb501");
  Attestation a{};
  a.task_id[31] = 1;
  a.result_root[31] = 2;
  a.trace_root[31] = 4;
  a.reference_block = 1;
  EXPECT_EQ(ToHex(AttestationDigest(domain, a)), "1c89b74d190cdf46a3874487e1b04a33e534988065cc43ebd1114923d03ee48f");
  auto sig = SignAttestation(Arr<32>("59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d"), domain, a);
  ASSERT_TRUE(sig.ok());
  EXPECT_EQ(
      ToHex(*sig),
      "67ec98d9d730e40e8dff7a0f8e892d6408b602c91f85d8dbac009bc2191998e26a894b098219cf92cd47b7173cd0a4154b16ad1fbc6adf11b455bac86eb1fb801c");
  auto signer = RecoverAttestationSigner(domain, a, *sig);
  ASSERT_TRUE(signer.ok());
  EXPECT_EQ(ToHex(*signer), "70997970c51812dc3a010c7d01b50e0d17dc79c8");
}

}  // namespace
}  // namespace consensor::consensus
