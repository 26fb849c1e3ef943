// How many int8 multiply-adds per second AVX2 (no VNNI) gets from three ways of summing u8 x s8 pairs, on the
// tile shape of mtx's int8 kernel (src/model/cpu/int8_gemm_avx2.cpp: 3 rows x 16 outputs, weights packed in
// groups of 4 inputs). Each variant's int32 sums are checked against a plain loop before it is timed.
//   exact8   mtx's kernel today: |q| x (w * sign q), one vpmaddubsw and one vpmaddwd per group (|q| <= 127)
//   u8       oneDNN's u8 x s8 order without the sign: same two multiplies per group (needs q >= 0)
//   pairs7   |q| <= 63: two groups' vpmaddubsw pair sums added in int16 (2 x 2 x 63 x 127 < 2^15), then one
//            vpmaddwd: three multiplies per two groups, exact for 7-bit activations
//   onednn   (built with -DWITH_ONEDNN -ldnnl) oneDNN's JIT dnnl_gemm_u8s8s32 on u = q + 64 with |q| <= 63 and
//            the offset 64 given to it: what mtx's int8 path calls from 32 rows on (src/model/cpu/int8_gemm_onednn.cpp)
// Standalone (no LibTorch, no CMake target; apt-get install libdnnl-dev for the oneDNN column):
//   g++ -O2 -mavx2 -mfma -DWITH_ONEDNN -o /tmp/int8_avx2_pairs scripts/bench/int8_avx2_pairs.cpp -ldnnl
//   OMP_NUM_THREADS=1 /tmp/int8_avx2_pairs [out] [in] [rows]
#include <immintrin.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#if defined(WITH_ONEDNN)
#include <oneapi/dnnl/dnnl.h>
#endif

namespace {

enum Variant { exact8, u8, pairs7 };
constexpr int kRows = 3;

__m256i broadcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// kRows rows of q (row stride in) against one half panel (16 outputs) -> int32 sums y[r][0..16).
template <Variant V>
void tile(const int8_t* q, int64_t in, const uint8_t* half, int32_t* y, int64_t out) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i acc[kRows][2];
  for (auto& a : acc) a[0] = a[1] = _mm256_setzero_si256();
  const int64_t groups = in / 4;
  const int64_t step = V == pairs7 ? 2 : 1;
  for (int64_t g = 0; g < groups; g += step) {
    const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(half + g * 128));
    const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(half + g * 128 + 32));
    for (int r = 0; r < kRows; ++r) {
      const __m256i a = broadcast4(q + r * in + g * 4);
      if (V == u8) {
        acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(_mm256_maddubs_epi16(a, w0), ones));
        acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(_mm256_maddubs_epi16(a, w1), ones));
        continue;
      }
      const __m256i m = _mm256_abs_epi8(a);
      __m256i s0 = _mm256_maddubs_epi16(m, _mm256_sign_epi8(w0, a));  // [16 x int16] pair sums
      __m256i s1 = _mm256_maddubs_epi16(m, _mm256_sign_epi8(w1, a));
      if (V == pairs7) {
        const __m256i b = broadcast4(q + r * in + (g + 1) * 4);
        const __m256i mb = _mm256_abs_epi8(b);
        const __m256i v0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(half + (g + 1) * 128));
        const __m256i v1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(half + (g + 1) * 128 + 32));
        s0 = _mm256_add_epi16(s0, _mm256_maddubs_epi16(mb, _mm256_sign_epi8(v0, b)));
        s1 = _mm256_add_epi16(s1, _mm256_maddubs_epi16(mb, _mm256_sign_epi8(v1, b)));
      }
      acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(s0, ones));
      acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(s1, ones));
    }
  }
  for (int r = 0; r < kRows; ++r) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + r * out), acc[r][0]);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + r * out + 8), acc[r][1]);
  }
}

template <Variant V>
void gemm(const int8_t* q, int64_t rows, int64_t in, const uint8_t* packed, int64_t out, int32_t* y) {
  const int64_t groups = in / 4;
  for (int64_t p = 0; p < out / 32; ++p) {
    for (int64_t h = 0; h < 2; ++h) {
      for (int64_t m = 0; m + kRows <= rows; m += kRows) {
        tile<V>(q + m * in, in, packed + p * groups * 128 + 64 * h, y + m * out + p * 32 + 16 * h, out);
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t out = argc > 1 ? std::atoll(argv[1]) : 1024, in = argc > 2 ? std::atoll(argv[2]) : 256;
  const int64_t rows = argc > 3 ? std::atoll(argv[3]) : 120;
  if (out % 32 || in % 8) {
    std::fprintf(stderr, "out must be a multiple of 32 and in of 8\n");
    return 2;
  }
  std::srand(1);
  std::vector<int8_t> w(size_t(out * in)), q8(size_t(rows * in)), q7(q8.size()), qu(q8.size());
  for (auto& v : w) v = int8_t(std::rand() % 255 - 127);
  for (size_t i = 0; i < q8.size(); ++i) {
    q8[i] = int8_t(std::rand() % 255 - 127);
    q7[i] = int8_t(q8[i] / 2);        // within +-63
    qu[i] = int8_t(std::abs(q7[i]));  // 0..63: an unsigned byte for the u8 variant
  }
  // Packed as mtx packs: p * groups * 128 + g * 128 + half * 64 + lane * 4 + k % 4.
  std::vector<uint8_t> packed(w.size());
  const int64_t groups = in / 4;
  for (int64_t n = 0; n < out; ++n) {
    for (int64_t k = 0; k < in; ++k) {
      packed[size_t((n / 32) * groups * 128 + (k / 4) * 128 + ((n % 32) / 16) * 64 + (n % 16) * 4 + k % 4)] =
          uint8_t(w[size_t(n * in + k)]);
    }
  }
  std::vector<int32_t> y(size_t(rows * out));
  const auto check = [&](const std::vector<int8_t>& q, const char* name) {
    for (int64_t r = 0; r < rows / kRows * kRows; ++r) {
      for (int64_t n = 0; n < out; ++n) {
        int32_t s = 0;
        for (int64_t k = 0; k < in; ++k) s += int32_t(q[size_t(r * in + k)]) * w[size_t(n * in + k)];
        if (s != y[size_t(r * out + n)]) {
          std::fprintf(stderr, "%s: row %ld output %ld: %d, not %d\n", name, long(r), long(n), y[size_t(r * out + n)],
                       s);
          std::exit(1);
        }
      }
    }
  };
  const auto rate = [&](auto fn) {
    double best = 1e30;
    for (int round = 0; round < 7; ++round) {
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < 50; ++i) fn();
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / 50);
    }
    return 2.0 * double(rows / kRows * kRows) * double(in) * double(out) / best / 1e9;
  };
  gemm<exact8>(q8.data(), rows, in, packed.data(), out, y.data());
  check(q8, "exact8");
  gemm<u8>(qu.data(), rows, in, packed.data(), out, y.data());
  check(qu, "u8");
  gemm<pairs7>(q7.data(), rows, in, packed.data(), out, y.data());
  check(q7, "pairs7");
#if defined(WITH_ONEDNN)
  std::vector<uint8_t> u7(q7.size());
  for (size_t i = 0; i < q7.size(); ++i) u7[i] = uint8_t(q7[i] + 64);
  const int64_t whole = rows / kRows * kRows;  // the rows the other variants compute and check
  const int32_t no_offset = 0;
  const auto onednn = [&] {
    if (dnnl_gemm_u8s8s32('N', 'T', 'F', whole, out, in, 1.0f, u7.data(), in, 64, w.data(), in, 0, 0.0f, y.data(), out,
                          &no_offset) != dnnl_success) {
      std::fprintf(stderr, "onednn: dnnl_gemm_u8s8s32 failed\n");
      std::exit(1);
    }
  };
  onednn();
  check(q7, "onednn");
#endif
  std::printf("out %ld, in %ld, %ld rows, one thread, GOP/s (two per multiply-add), best of 7:\n", long(out), long(in),
              long(rows));
  for (int round = 0; round < 2; ++round) {
    std::printf("  exact8 %.1f   u8 %.1f   pairs7 %.1f",
                rate([&] { gemm<exact8>(q8.data(), rows, in, packed.data(), out, y.data()); }),
                rate([&] { gemm<u8>(qu.data(), rows, in, packed.data(), out, y.data()); }),
                rate([&] { gemm<pairs7>(q7.data(), rows, in, packed.data(), out, y.data()); }));
#if defined(WITH_ONEDNN)
    std::printf("   onednn %.1f", rate(onednn));
#endif
    std::printf("\n");
  }
}
