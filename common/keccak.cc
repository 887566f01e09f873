#include "common/keccak.h"

namespace consensor {
namespace {

constexpr int kRounds = 24;

// Round constants, derived at compile time from the spec's LFSR rc(t) (x^8+x^6+x^5+x^4+1)
// rather than typed in, so a typo cannot hide in a table.
constexpr std::array<uint64_t, kRounds> MakeRoundConstants() {
  std::array<uint64_t, kRounds> rc{};
  uint8_t r = 1;  // LFSR state; rc(0) = 1
  for (int round = 0; round < kRounds; ++round) {
    uint64_t c = 0;
    for (int j = 0; j < 7; ++j) {
      if (r & 1) c |= uint64_t{1} << ((1 << j) - 1);
      r = static_cast<uint8_t>((r << 1) ^ ((r & 0x80) ? 0x71 : 0));
    }
    rc[round] = c;
  }
  return rc;
}

// Rho offsets r[x + 5y]: walk (x,y) from (1,0) by (x,y) -> (y, 2x+3y); step t rotates by
// (t+1)(t+2)/2 mod 64.
constexpr std::array<int, 25> MakeRhoOffsets() {
  std::array<int, 25> r{};
  int x = 1, y = 0;
  for (int t = 0; t < 24; ++t) {
    r[x + 5 * y] = ((t + 1) * (t + 2) / 2) % 64;
    int nx = y;
    int ny = (2 * x + 3 * y) % 5;
    x = nx;
    y = ny;
  }
  return r;
}

constexpr std::array<uint64_t, kRounds> kRoundConstants = MakeRoundConstants();
constexpr std::array<int, 25> kRho = MakeRhoOffsets();
static_assert(kRoundConstants[0] == 1 && kRoundConstants[1] == 0x8082 &&
              kRoundConstants[23] == 0x8000000080008008ULL);

inline uint64_t Rotl(uint64_t v, int n) { return n == 0 ? v : (v << n) | (v >> (64 - n)); }

// Keccak-f[1600] on lanes a[x + 5y].
void KeccakF1600(std::array<uint64_t, 25>& a) {
  for (int round = 0; round < kRounds; ++round) {
    // theta: mix each column's parity into its neighbours.
    uint64_t c[5];
    for (int x = 0; x < 5; ++x) c[x] = a[x] ^ a[x + 5] ^ a[x + 10] ^ a[x + 15] ^ a[x + 20];
    for (int x = 0; x < 5; ++x) {
      uint64_t d = c[(x + 4) % 5] ^ Rotl(c[(x + 1) % 5], 1);
      for (int y = 0; y < 25; y += 5) a[x + y] ^= d;
    }
    // rho and pi: B[y, 2x+3y] = rot(A[x,y], r[x,y]).
    uint64_t b[25];
    for (int x = 0; x < 5; ++x) {
      for (int y = 0; y < 5; ++y) b[y + 5 * ((2 * x + 3 * y) % 5)] = Rotl(a[x + 5 * y], kRho[x + 5 * y]);
    }
    // chi: the only non-linear step, along rows.
    for (int y = 0; y < 25; y += 5) {
      for (int x = 0; x < 5; ++x) a[x + y] = b[x + y] ^ (~b[(x + 1) % 5 + y] & b[(x + 2) % 5 + y]);
    }
    // iota
    a[0] ^= kRoundConstants[round];
  }
}

inline uint64_t LoadLe64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

void Keccak256Hasher::Reset() {
  state_.fill(0);
  pos_ = 0;
}

void Keccak256Hasher::Update(std::span<const uint8_t> data) {
  const uint8_t* p = data.data();
  size_t n = data.size();
  // Whole blocks at a block boundary are absorbed lane by lane; everything else byte by byte.
  while (n > 0) {
    if (pos_ == 0 && n >= kRate) {
      for (size_t i = 0; i < kRate / 8; ++i) state_[i] ^= LoadLe64(p + 8 * i);
      KeccakF1600(state_);
      p += kRate;
      n -= kRate;
      continue;
    }
    state_[pos_ / 8] ^= uint64_t{*p} << (8 * (pos_ % 8));
    ++p;
    --n;
    if (++pos_ == kRate) {
      KeccakF1600(state_);
      pos_ = 0;
    }
  }
}

Hash256 Keccak256Hasher::Finish() {
  // pad10*1 with Keccak's domain bit: 0x01 after the message, 0x80 in the block's last byte
  // (the same byte when only one is left, giving 0x81).
  state_[pos_ / 8] ^= uint64_t{0x01} << (8 * (pos_ % 8));
  state_[(kRate - 1) / 8] ^= uint64_t{0x80} << (8 * ((kRate - 1) % 8));
  KeccakF1600(state_);
  Hash256 out{};
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint8_t>(state_[i / 8] >> (8 * (i % 8)));
  Reset();
  return out;
}

Hash256 Keccak256(std::span<const uint8_t> data) {
  Keccak256Hasher h;
  h.Update(data);
  return h.Finish();
}

}  // namespace consensor
