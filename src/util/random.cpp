#include "mtx/util/random.h"

namespace mtx {

Rng Rng::from(std::initializer_list<uint64_t> parts) {
  Rng mixer(0x6d7478u);  // "mtx"
  uint64_t seed = mixer.next();
  for (uint64_t p : parts) {
    Rng r(seed ^ p);
    seed = r.next() ^ (p * 0x9e3779b97f4a7c15ull);
  }
  return Rng(seed);
}

uint64_t Rng::next() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t Rng::below(uint64_t bound) {
  // 128-bit multiply-shift with rejection of the biased low region.
  uint64_t x = next();
  __uint128_t m = static_cast<__uint128_t>(x) * bound;
  uint64_t low = static_cast<uint64_t>(m);
  if (low < bound) {
    const uint64_t threshold = -bound % bound;
    while (low < threshold) {
      x = next();
      m = static_cast<__uint128_t>(x) * bound;
      low = static_cast<uint64_t>(m);
    }
  }
  return static_cast<uint64_t>(m >> 64);
}

Permutation::Permutation(uint64_t n, uint64_t key) : n_(n), half_bits_(1) {
  while (half_bits_ < 32 && (uint64_t(1) << (2 * half_bits_)) < n) ++half_bits_;
  half_mask_ = (uint64_t(1) << half_bits_) - 1;
  Rng rng = Rng::from({key, 0x7065726dull});
  for (uint64_t& k : keys_) k = rng.next();
}

uint64_t Permutation::encrypt(uint64_t x) const {
  uint64_t left = x >> half_bits_, right = x & half_mask_;
  for (uint64_t k : keys_) {
    uint64_t z = (right ^ k) * 0xbf58476d1ce4e5b9ull;  // a SplitMix64 finaliser as the round function
    z = (z ^ (z >> 31)) * 0x94d049bb133111ebull;
    const uint64_t next = left ^ ((z ^ (z >> 29)) & half_mask_);
    left = right;
    right = next;
  }
  return (left << half_bits_) | right;
}

uint64_t Permutation::operator()(uint64_t i) const {
  // A bijection on [0, 4^half_bits); walking it from i until it lands below n stays a bijection on [0, n).
  uint64_t x = encrypt(i);
  while (x >= n_) x = encrypt(x);
  return x;
}

}  // namespace mtx
