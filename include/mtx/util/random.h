// A small, platform-independent PRNG (SplitMix64) and shuffle: std::shuffle and the std::
// distributions differ between standard libraries, and batch order must be reproducible anywhere.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace mtx {

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  // Seeds from several values (e.g. seed and epoch) without correlations between streams.
  static Rng from(std::initializer_list<uint64_t> parts);

  uint64_t next();
  // Uniform in [0, bound), bound > 0 (Lemire's method, unbiased).
  uint64_t below(uint64_t bound);

  template <class T>
  void shuffle(std::vector<T>& v) {
    for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[below(i)]);
  }

 private:
  uint64_t state_;
};

// A pseudo-random permutation of [0, n) that takes no memory: a balanced Feistel network over the smallest even
// power of two >= n, walked until it lands below n. The same (n, key) gives the same permutation anywhere.
class Permutation {
 public:
  Permutation(uint64_t n, uint64_t key);
  uint64_t operator()(uint64_t i) const;  // i < n
  uint64_t size() const { return n_; }

 private:
  uint64_t encrypt(uint64_t x) const;
  uint64_t n_;
  unsigned half_bits_;
  uint64_t half_mask_;
  uint64_t keys_[4];
};

}  // namespace mtx
