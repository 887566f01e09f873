// Solidity contract ABI encoding and decoding (https://docs.soliditylang.org/en/latest/abi-spec.html)
// for what the node's chain client needs: uintN, bool, address, bytesN, bytes, string, dynamic
// arrays T[], fixed arrays T[k] and tuples, nested in any combination; function selectors,
// custom-error (revert data) decoding and event-log decoding. Signed intN and fixed-point types
// are not supported (rejected by the type parser).
//
// Type strings are parsed strictly (no whitespace, depth and size caps). The decoder treats its
// input as hostile: every offset and length is bounds-checked without overflow, smaller integer
// types, bool, address and bytesN must have clean padding, bytes/string padding must be zero and
// present, array lengths are checked against the bytes that remain, and the total decoded size
// is capped by the input size (so aliased offsets cannot blow up the output).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/secp256k1_sign.h"  // Address20
#include "common/sha256.h"          // Hash256
#include "common/status.h"
#include "common/uint256.h"

namespace consensor::node {

// ---------------------------------------------------------------------------------------------
// Types

struct AbiType {
  enum class Kind { kUint, kBool, kAddress, kFixedBytes, kBytes, kString, kArray, kFixedArray, kTuple };
  Kind kind = Kind::kUint;
  // kUint: bit width (8..256). kFixedBytes: N (1..32). kFixedArray: element count (>= 1).
  size_t size = 256;
  // kArray / kFixedArray: exactly one element type. kTuple: the fields (at least one).
  std::vector<AbiType> components;

  bool IsDynamic() const;
  // Bytes this type takes in the head of an enclosing tuple: 32 when dynamic, else its full size.
  size_t HeadSize() const;
  std::string Canonical() const;  // "uint256", "(bytes32,uint64)[]", ...

  bool operator==(const AbiType&) const = default;
};

// Caps applied by the parser.
inline constexpr size_t kAbiMaxTypeDepth = 16;   // tuple/array nesting
inline constexpr size_t kAbiMaxTypeNodes = 512;  // types in one signature
inline constexpr size_t kAbiMaxSignatureLength = 4096;
inline constexpr size_t kAbiMaxStaticSize = 1u << 20;  // bytes of a static type's encoding

// One type: "uint256", "bytes32[]", "(bytes32,uint64)", "uint8[3][]". "uint" means "uint256".
StatusOr<AbiType> ParseAbiType(std::string_view s);
// A parenthesised list, "(uint256,bool)" or "()".
StatusOr<std::vector<AbiType>> ParseAbiTypeList(std::string_view s);

// "name(type,...)"; for events each parameter may be followed by " indexed".
struct AbiSignature {
  std::string name;
  std::vector<AbiType> params;
  std::vector<bool> indexed;  // same length as params; all false for functions and errors

  std::string Canonical() const;            // "name(t1,t2)" with canonical types, no "indexed"
  std::array<uint8_t, 4> Selector() const;  // first 4 bytes of keccak256(Canonical())
  Hash256 Topic() const;                    // keccak256(Canonical()), an event's topics[0]
};
StatusOr<AbiSignature> ParseAbiSignature(std::string_view s, bool allow_indexed = false);

// First 4 bytes of keccak256 of the canonical form of `signature`.
StatusOr<std::array<uint8_t, 4>> FunctionSelector(std::string_view signature);
StatusOr<Hash256> EventTopic(std::string_view signature);

// ---------------------------------------------------------------------------------------------
// Values

struct AbiValue {
  enum class Kind { kUint, kBool, kAddress, kFixedBytes, kBytes, kString, kArray, kTuple };
  Kind kind = Kind::kUint;
  Uint256 uint{};               // kUint
  bool boolean = false;         // kBool
  Address20 address{};          // kAddress
  std::vector<uint8_t> bytes;   // kFixedBytes (exactly N bytes), kBytes, kString (raw UTF-8)
  std::vector<AbiValue> items;  // kArray (T[] and T[k]), kTuple

  static AbiValue Uint(const Uint256& v);
  static AbiValue Uint(uint64_t v);
  static AbiValue Bool(bool b);
  static AbiValue Address(const Address20& a);
  static AbiValue FixedBytes(std::span<const uint8_t> b);
  static AbiValue Bytes32(const Hash256& h);
  static AbiValue Bytes(std::span<const uint8_t> b);
  static AbiValue String(std::string_view s);
  static AbiValue Array(std::vector<AbiValue> items);
  static AbiValue Tuple(std::vector<AbiValue> items);

  // Checked views; INVALID_ARGUMENT on a kind mismatch, OUT_OF_RANGE when too wide.
  StatusOr<uint64_t> AsUint64() const;
  StatusOr<Hash256> AsBytes32() const;     // kFixedBytes of 32 bytes
  StatusOr<std::string> AsString() const;  // kString or kBytes

  bool operator==(const AbiValue&) const = default;
};

// Encodes values as the tuple (types...). INVALID_ARGUMENT when a value does not match its type
// (wrong kind, integer too wide for uintN, wrong bytesN length, wrong fixed-array length).
StatusOr<std::vector<uint8_t>> AbiEncode(std::span<const AbiType> types, std::span<const AbiValue> values);
// selector(signature) || AbiEncode(params, args).
StatusOr<std::vector<uint8_t>> EncodeCall(std::string_view signature, std::span<const AbiValue> args);

struct AbiDecodeLimits {
  size_t max_input = 16u << 20;  // bytes
};

// Decodes the tuple (types...) from `data`. Trailing bytes beyond what the encoding references
// are allowed (as in Solidity). INVALID_ARGUMENT for anything malformed.
StatusOr<std::vector<AbiValue>> AbiDecode(std::span<const AbiType> types, std::span<const uint8_t> data,
                                          const AbiDecodeLimits& limits = {});
// Same with a type-list string, e.g. "(uint256,bytes32[])" for a function's return data.
StatusOr<std::vector<AbiValue>> AbiDecode(std::string_view type_list, std::span<const uint8_t> data,
                                          const AbiDecodeLimits& limits = {});

// For call data and revert data: checks the 4-byte selector of `signature` and decodes the rest.
// NOT_FOUND when the selector differs (so callers can try several error signatures),
// INVALID_ARGUMENT when the data is shorter than 4 bytes or malformed.
StatusOr<std::vector<AbiValue>> DecodeWithSelector(std::string_view signature, std::span<const uint8_t> data);
inline StatusOr<std::vector<AbiValue>> DecodeError(std::string_view error_signature,
                                                   std::span<const uint8_t> revert_data) {
  return DecodeWithSelector(error_signature, revert_data);
}
// The message of a standard Error(string) revert.
StatusOr<std::string> DecodeRevertReason(std::span<const uint8_t> revert_data);

// Decodes an event log. `signature` marks indexed parameters, e.g.
// "Transfer(address indexed,address indexed,uint256)". topics[0] must be the event topic and
// there must be exactly one more topic per indexed parameter. Returns values in declaration
// order; an indexed parameter of dynamic type (bytes, string, arrays, dynamic tuples) cannot be
// recovered from the log and is returned as the 32-byte topic (kFixedBytes, the keccak hash).
// Indexed static tuples and fixed arrays are not supported (UNIMPLEMENTED).
StatusOr<std::vector<AbiValue>> DecodeEventLog(std::string_view signature, std::span<const Hash256> topics,
                                               std::span<const uint8_t> data);

}  // namespace consensor::node
