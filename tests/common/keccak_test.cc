// Keccak-256 (Ethereum's, padding 0x01). Vectors for multi-block inputs were computed with an
// independent reference implementation that was first checked to reproduce SHA3-256 when given
// SHA3's 0x06 padding.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "common/keccak.h"
#include "common/sha256.h"

namespace consensor {
namespace {

std::string KeccakHex(std::string_view s) { return ToHex(Keccak256(s)); }

// Bytes 0, 1, 2, ... (mod 256).
std::vector<uint8_t> Counting(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i);
  return v;
}

TEST(KeccakTest, EmptyString) {
  EXPECT_EQ(KeccakHex(""), "c5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470");
  EXPECT_EQ(ToHex(Keccak256(std::span<const uint8_t>())),
            "c5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470");
}

TEST(KeccakTest, ShortStrings) {
  EXPECT_EQ(KeccakHex("abc"), "4e03657aea45a94fc7d47ba826c8d667c0d1e6e33a64a036ec44f58fa12d6c45");
  EXPECT_EQ(KeccakHex("The quick brown fox jumps over the lazy dog"),
            "4d741b6f1eb29cb2a9b9911c82f56fa8d73b04959d3d9d222895df6c0b28aa15");
  // The ERC-20 transfer selector is the first four bytes of this digest.
  EXPECT_EQ(KeccakHex("transfer(address,uint256)"), "a9059cbb2ab09eb219583f4a59a5d0623ade346d962bcd4e46b11da047c9049b");
}

TEST(KeccakTest, IsNotSha3) {
  // SHA3-256("") is a7ffc6f8...; Ethereum's digest must differ.
  EXPECT_NE(KeccakHex(""), "a7ffc6f8bf1ed76651c14756a061d662f580ff4de43b49fa82d80a4b80f8434a");
}

TEST(KeccakTest, BlockBoundaries) {
  struct Case {
    size_t len;
    const char* hex;
  };
  const Case cases[] = {
      {135, "cbdfd9dee5faad3818d6b06f95a219fd290b0e1706f6a82e5a595b9ce9faca62"},  // padding 0x81 in one byte
      {136, "7ce759f1ab7f9ce437719970c26b0a66ff11fe3e38e17df89cf5d29c7d7f807e"},  // exactly the rate
      {137, "ac73d4fae68b8453f764007c1a20ce95994187861f0c3227a3a8e99a73a3b1db"},
      {200, "bfb0aa97863e797943cf7c33bb7e880bb4543f3d2703c0923c6901c2af57b890"},
      {272, "fdf2ec49e749960d3c8521a0219af8d03e30e2b3bf19bd16150ee0eaf133d66e"},  // two full blocks
      {1000, "aca79e4146e30eb1c733f6d6060d72471c36ea4e01ebf45d7f4916249c2bbd82"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(ToHex(Keccak256(Counting(c.len))), c.hex) << "length " << c.len;
  }
  EXPECT_EQ(KeccakHex(std::string(136, 'a')), "a6c4d403279fe3e0af03729caada8374b5ca54d8065329a3ebcaeb4b60aa386e");
}

TEST(KeccakTest, IncrementalMatchesOneShot) {
  const std::vector<uint8_t> data = Counting(1000);
  const Hash256 expected = Keccak256(data);
  // Every chunk size, including ones that straddle and align with the 136-byte rate.
  for (size_t chunk : {1u, 7u, 8u, 64u, 135u, 136u, 137u, 500u, 999u}) {
    Keccak256Hasher h;
    for (size_t off = 0; off < data.size(); off += chunk) {
      size_t n = std::min(chunk, data.size() - off);
      h.Update(std::span<const uint8_t>(data.data() + off, n));
    }
    EXPECT_EQ(h.Finish(), expected) << "chunk " << chunk;
  }
  // A partial first block, then the rest of it, then whole blocks.
  Keccak256Hasher h;
  h.Update(std::span<const uint8_t>(data.data(), 3));
  h.Update(std::span<const uint8_t>(data.data() + 3, 133));
  h.Update(std::span<const uint8_t>(data.data() + 136, 864));
  EXPECT_EQ(h.Finish(), expected);
}

TEST(KeccakTest, FinishResets) {
  Keccak256Hasher h;
  h.Update("abc");
  EXPECT_EQ(ToHex(h.Finish()), "4e03657aea45a94fc7d47ba826c8d667c0d1e6e33a64a036ec44f58fa12d6c45");
  EXPECT_EQ(ToHex(h.Finish()), "c5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470");
  h.Update(std::span<const uint8_t>());
  h.Update("ab");
  h.Update("c");
  EXPECT_EQ(ToHex(h.Finish()), "4e03657aea45a94fc7d47ba826c8d667c0d1e6e33a64a036ec44f58fa12d6c45");
}

TEST(KeccakTest, CopyContinuesFromTheSameState) {
  Keccak256Hasher h;
  h.Update("ab");
  Keccak256Hasher copy(h);
  copy.Update("c");
  EXPECT_EQ(ToHex(copy.Finish()), "4e03657aea45a94fc7d47ba826c8d667c0d1e6e33a64a036ec44f58fa12d6c45");
  // The original is unaffected by the copy's input.
  h.Update("c");
  EXPECT_EQ(ToHex(h.Finish()), "4e03657aea45a94fc7d47ba826c8d667c0d1e6e33a64a036ec44f58fa12d6c45");
  Keccak256Hasher assigned;
  assigned.Update("xyz");
  assigned = copy;  // copy was reset by Finish
  EXPECT_EQ(ToHex(assigned.Finish()), "c5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470");
}

}  // namespace
}  // namespace consensor
