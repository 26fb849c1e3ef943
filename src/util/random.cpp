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

}  // namespace mtx
