#include "node/chain/eth_tx.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

#include "common/keccak.h"
#include "node/chain/rlp.h"

namespace consensor::node {
namespace {

constexpr uint8_t kType = 0x02;

RlpItem ToField(const std::optional<Address20>& to) { return to ? RlpItem::Bytes(*to) : RlpItem::Bytes({}); }

std::vector<RlpItem> UnsignedFields(const Eip1559Transaction& tx) {
  std::vector<RlpItem> f;
  f.reserve(12);
  f.push_back(RlpItem::Uint(tx.chain_id));
  f.push_back(RlpItem::Uint(tx.nonce));
  f.push_back(RlpItem::UintBigEndian(tx.max_priority_fee_per_gas));
  f.push_back(RlpItem::UintBigEndian(tx.max_fee_per_gas));
  f.push_back(RlpItem::Uint(tx.gas_limit));
  f.push_back(ToField(tx.to));
  f.push_back(RlpItem::UintBigEndian(tx.value));
  f.push_back(RlpItem::Bytes(tx.data));
  std::vector<RlpItem> access;
  access.reserve(tx.access_list.size());
  for (const AccessListEntry& e : tx.access_list) {
    std::vector<RlpItem> keys;
    keys.reserve(e.storage_keys.size());
    for (const Hash256& k : e.storage_keys) keys.push_back(RlpItem::Bytes(k));
    access.push_back(RlpItem::List({RlpItem::Bytes(e.address), RlpItem::List(std::move(keys))}));
  }
  f.push_back(RlpItem::List(std::move(access)));
  return f;
}

std::vector<uint8_t> Typed(const RlpItem& list) {
  std::vector<uint8_t> out{kType};
  std::vector<uint8_t> body = RlpEncode(list);
  out.insert(out.end(), body.begin(), body.end());
  return out;
}

Status FieldErr(const char* field, const Status& s) {
  return InvalidArgument(std::string("transaction field ") + field + ": " + s.message());
}

StatusOr<uint64_t> U64Field(const RlpItem& item, const char* field) {
  auto v = RlpToUint64(item);
  if (!v.ok()) return FieldErr(field, v.status());
  return *v;
}

StatusOr<Uint256> U256Field(const RlpItem& item, const char* field) {
  auto v = RlpToUint256(item);
  if (!v.ok()) return FieldErr(field, v.status());
  return *v;
}

template <size_t N>
StatusOr<std::array<uint8_t, N>> FixedField(const RlpItem& item, const char* field) {
  if (item.is_list || item.bytes.size() != N) {
    return InvalidArgument(std::string("transaction field ") + field + ": expected " + std::to_string(N) + " bytes");
  }
  std::array<uint8_t, N> out{};
  std::copy(item.bytes.begin(), item.bytes.end(), out.begin());
  return out;
}

Status ParseTo(const RlpItem& item, std::optional<Address20>& to) {
  if (item.is_list) return InvalidArgument("transaction field to: expected bytes");
  if (item.bytes.empty()) {
    to.reset();
    return OkStatus();
  }
  ASSIGN_OR_RETURN(Address20 a, FixedField<20>(item, "to"));
  to = a;
  return OkStatus();
}

constexpr uint64_t kMaxLegacyChainId = (UINT64_MAX - 36) / 2;

std::vector<RlpItem> LegacyFields(const LegacyTransaction& tx) {
  std::vector<RlpItem> f;
  f.reserve(9);
  f.push_back(RlpItem::Uint(tx.nonce));
  f.push_back(RlpItem::UintBigEndian(tx.gas_price));
  f.push_back(RlpItem::Uint(tx.gas_limit));
  f.push_back(ToField(tx.to));
  f.push_back(RlpItem::UintBigEndian(tx.value));
  f.push_back(RlpItem::Bytes(tx.data));
  return f;
}

}  // namespace

std::vector<uint8_t> LegacySigningPayload(const LegacyTransaction& tx) {
  std::vector<RlpItem> f = LegacyFields(tx);
  f.push_back(RlpItem::Uint(tx.chain_id));
  f.push_back(RlpItem::Uint(0));
  f.push_back(RlpItem::Uint(0));
  return RlpEncode(RlpItem::List(std::move(f)));
}

Hash256 LegacySigningHash(const LegacyTransaction& tx) { return Keccak256(LegacySigningPayload(tx)); }

StatusOr<std::vector<uint8_t>> SignLegacyTransaction(const Secp256k1Secret& secret, const LegacyTransaction& tx) {
  if (tx.chain_id == 0 || tx.chain_id > kMaxLegacyChainId) {
    return InvalidArgument("EIP-155 chain id must be between 1 and " + std::to_string(kMaxLegacyChainId));
  }
  ASSIGN_OR_RETURN(EcdsaSignature sig, SignDigest(secret, LegacySigningHash(tx)));
  std::vector<RlpItem> f = LegacyFields(tx);
  f.push_back(RlpItem::Uint(tx.chain_id * 2 + 35 + sig.recovery_id));
  f.push_back(RlpItem::UintBigEndian(sig.r));
  f.push_back(RlpItem::UintBigEndian(sig.s));
  return RlpEncode(RlpItem::List(std::move(f)));
}

StatusOr<DecodedLegacyTransaction> DecodeSignedLegacyTransaction(std::span<const uint8_t> raw) {
  if (raw.empty() || raw[0] < 0xc0) return InvalidArgument("not a legacy transaction (must start with an RLP list)");
  RlpLimits limits;
  limits.max_depth = 1;
  limits.max_input = 1u << 24;
  auto decoded = RlpDecode(raw, limits);
  if (!decoded.ok()) return InvalidArgument("legacy transaction: " + decoded.status().message());
  const RlpItem& root = *decoded;
  if (!root.is_list || root.list.size() != 9)
    return InvalidArgument("legacy transaction must be an RLP list of 9 fields");
  const std::vector<RlpItem>& f = root.list;
  DecodedLegacyTransaction out;
  LegacyTransaction& tx = out.tx;
  ASSIGN_OR_RETURN(tx.nonce, U64Field(f[0], "nonce"));
  ASSIGN_OR_RETURN(tx.gas_price, U256Field(f[1], "gasPrice"));
  ASSIGN_OR_RETURN(tx.gas_limit, U64Field(f[2], "gasLimit"));
  RETURN_IF_ERROR(ParseTo(f[3], tx.to));
  ASSIGN_OR_RETURN(tx.value, U256Field(f[4], "value"));
  if (f[5].is_list) return InvalidArgument("legacy transaction field data: expected bytes");
  tx.data = f[5].bytes;
  ASSIGN_OR_RETURN(uint64_t v, U64Field(f[6], "v"));
  if (v < 35) return InvalidArgument("legacy transaction v = " + std::to_string(v) + " has no EIP-155 chain id");
  tx.chain_id = (v - 35) / 2;
  if (tx.chain_id == 0) return InvalidArgument("legacy transaction has chain id 0");
  out.signature.recovery_id = static_cast<uint8_t>((v - 35) % 2);
  ASSIGN_OR_RETURN(out.signature.r, U256Field(f[7], "r"));
  ASSIGN_OR_RETURN(out.signature.s, U256Field(f[8], "s"));
  auto sender = RecoverAddress(LegacySigningHash(tx), out.signature);
  if (!sender.ok()) return InvalidArgument("legacy transaction signature: " + sender.status().message());
  out.sender = *sender;
  out.hash = TransactionHash(raw);
  return out;
}

std::vector<uint8_t> UnsignedTransactionBytes(const Eip1559Transaction& tx) {
  return Typed(RlpItem::List(UnsignedFields(tx)));
}

Hash256 SigningHash(const Eip1559Transaction& tx) { return Keccak256(UnsignedTransactionBytes(tx)); }

std::vector<uint8_t> EncodeSignedTransaction(const Eip1559Transaction& tx, const EcdsaSignature& sig) {
  std::vector<RlpItem> f = UnsignedFields(tx);
  f.push_back(RlpItem::Uint(sig.recovery_id));
  f.push_back(RlpItem::UintBigEndian(sig.r));
  f.push_back(RlpItem::UintBigEndian(sig.s));
  return Typed(RlpItem::List(std::move(f)));
}

StatusOr<std::vector<uint8_t>> SignTransaction(const Secp256k1Secret& secret, const Eip1559Transaction& tx) {
  ASSIGN_OR_RETURN(EcdsaSignature sig, SignDigest(secret, SigningHash(tx)));
  return EncodeSignedTransaction(tx, sig);
}

Hash256 TransactionHash(std::span<const uint8_t> raw) { return Keccak256(raw); }

StatusOr<DecodedTransaction> DecodeSignedTransaction(std::span<const uint8_t> raw) {
  if (raw.empty()) return InvalidArgument("empty transaction");
  if (raw[0] != kType) {
    return InvalidArgument("not an EIP-1559 transaction (type byte 0x" + ToHex(raw.first(1)) + ", want 0x02)");
  }
  RlpLimits limits;
  limits.max_depth = 4;  // [ ..., [ [addr, [keys]] ] ]
  limits.max_input = 1u << 24;
  auto decoded = RlpDecode(raw.subspan(1), limits);
  if (!decoded.ok()) return InvalidArgument("EIP-1559 transaction: " + decoded.status().message());
  const RlpItem& root = *decoded;
  if (!root.is_list || root.list.size() != 12) {
    return InvalidArgument("EIP-1559 transaction must be an RLP list of 12 fields");
  }
  const std::vector<RlpItem>& f = root.list;
  DecodedTransaction out;
  Eip1559Transaction& tx = out.tx;
  ASSIGN_OR_RETURN(tx.chain_id, U64Field(f[0], "chainId"));
  ASSIGN_OR_RETURN(tx.nonce, U64Field(f[1], "nonce"));
  ASSIGN_OR_RETURN(tx.max_priority_fee_per_gas, U256Field(f[2], "maxPriorityFeePerGas"));
  ASSIGN_OR_RETURN(tx.max_fee_per_gas, U256Field(f[3], "maxFeePerGas"));
  ASSIGN_OR_RETURN(tx.gas_limit, U64Field(f[4], "gasLimit"));
  RETURN_IF_ERROR(ParseTo(f[5], tx.to));
  ASSIGN_OR_RETURN(tx.value, U256Field(f[6], "value"));
  if (f[7].is_list) return InvalidArgument("EIP-1559 transaction field data: expected bytes");
  tx.data = f[7].bytes;
  if (!f[8].is_list) return InvalidArgument("EIP-1559 transaction field accessList: expected a list");
  for (const RlpItem& e : f[8].list) {
    if (!e.is_list || e.list.size() != 2 || !e.list[1].is_list) {
      return InvalidArgument("EIP-1559 transaction accessList entry must be [address, [storageKeys...]]");
    }
    AccessListEntry entry;
    ASSIGN_OR_RETURN(entry.address, FixedField<20>(e.list[0], "accessList address"));
    for (const RlpItem& k : e.list[1].list) {
      ASSIGN_OR_RETURN(Hash256 key, FixedField<32>(k, "accessList storage key"));
      entry.storage_keys.push_back(key);
    }
    tx.access_list.push_back(std::move(entry));
  }
  ASSIGN_OR_RETURN(uint64_t y_parity, U64Field(f[9], "yParity"));
  if (y_parity > 1) return InvalidArgument("EIP-1559 transaction yParity must be 0 or 1");
  out.signature.recovery_id = static_cast<uint8_t>(y_parity);
  ASSIGN_OR_RETURN(out.signature.r, U256Field(f[10], "r"));
  ASSIGN_OR_RETURN(out.signature.s, U256Field(f[11], "s"));
  auto sender = RecoverAddress(SigningHash(tx), out.signature);
  if (!sender.ok()) return InvalidArgument("EIP-1559 transaction signature: " + sender.status().message());
  out.sender = *sender;
  out.hash = TransactionHash(raw);
  return out;
}

}  // namespace consensor::node
