#include <gtest/gtest.h>
#include <sched.h>

#include <fstream>
#include <thread>
#include <vector>

#include "mtx/util/atomic_file.h"
#include "mtx/util/cpu_isa.h"
#include "mtx/util/cpus.h"
#include "mtx/util/errors.h"
#include "mtx/util/hash.h"
#include "mtx/util/random.h"
#include "mtx/util/strings.h"
#include "mtx/util/system.h"
#include "mtx/util/utf8.h"
#include "test_utils.h"

namespace fs = std::filesystem;

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(mtx::sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(mtx::sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(mtx::sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  // Incremental updates across block boundaries equal the one-shot hash.
  const std::string text(1000, 'a');
  mtx::Sha256 h;
  for (size_t i = 0; i < text.size(); i += 7) h.update(text.substr(i, 7));
  EXPECT_EQ(h.hex(), mtx::sha256_hex(text));
  EXPECT_EQ(mtx::sha256_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

// RFC 4648's test vectors.
TEST(Base64, KnownVectors) {
  const std::vector<std::pair<std::string, std::string>> cases = {{"", ""},
                                                                  {"f", "Zg=="},
                                                                  {"fo", "Zm8="},
                                                                  {"foo", "Zm9v"},
                                                                  {"foob", "Zm9vYg=="},
                                                                  {"fooba", "Zm9vYmE="},
                                                                  {"foobar", "Zm9vYmFy"}};
  for (const auto& [in, out] : cases) EXPECT_EQ(mtx::base64(in), out) << in;
  EXPECT_EQ(mtx::base64(std::string("\xff\x00\xfe", 3)), "/wD+");
}

TEST(Utf8, ValidAndInvalidSequences) {
  EXPECT_TRUE(mtx::utf8::is_valid("plain ascii"));
  EXPECT_TRUE(mtx::utf8::is_valid("Grüße, 東京, €, 😀"));
  EXPECT_EQ(mtx::utf8::find_invalid("ab\xff"), 2u);            // invalid byte
  EXPECT_EQ(mtx::utf8::find_invalid("a\xc3"), 1u);             // truncated sequence
  EXPECT_EQ(mtx::utf8::find_invalid("\xc0\xaf"), 0u);          // overlong '/'
  EXPECT_EQ(mtx::utf8::find_invalid("\xe0\x80\xaf"), 0u);      // overlong 3-byte
  EXPECT_EQ(mtx::utf8::find_invalid("x\xed\xa0\x80"), 1u);     // surrogate U+D800
  EXPECT_EQ(mtx::utf8::find_invalid("\xf4\x90\x80\x80"), 0u);  // above U+10FFFF
  EXPECT_EQ(mtx::utf8::find_invalid("\x80"), 0u);              // stray continuation
}

TEST(AtomicFile, ReplacesContentAndLeavesNoTempFiles) {
  mtx::test::TempDir tmp;
  const fs::path p = tmp / "sub" / "f.txt";
  mtx::write_file_atomic(p, "one");
  EXPECT_EQ(mtx::read_file(p), "one");
  mtx::write_file_atomic(p, "two");
  EXPECT_EQ(mtx::read_file(p), "two");
  // A writer that fails leaves the old content and no temp file behind.
  EXPECT_THROW(mtx::write_file_atomic(p,
                                      [](std::ostream& out) {
                                        out << "partial";
                                        throw std::runtime_error("crash mid-write");
                                      }),
               std::runtime_error);
  EXPECT_EQ(mtx::read_file(p), "two");
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(p.parent_path())) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, 1u);
  EXPECT_THROW(mtx::read_file(tmp / "missing"), mtx::DataError);
}

TEST(Strings, EditDistanceAndSuggestions) {
  EXPECT_EQ(mtx::edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(mtx::closest_match("d_modle", {"d_model", "heads", "dropout"}), "d_model");
  EXPECT_EQ(mtx::closest_match("zzzzzz", {"d_model", "heads"}), "");
  EXPECT_EQ(mtx::did_you_mean("trian", {"train", "data"}), " (did you mean 'train'?)");
  EXPECT_EQ(mtx::split("a.b..c", '.'), (std::vector<std::string>{"a", "b", "", "c"}));
  EXPECT_EQ(mtx::trim("  x y \n"), "x y");
  EXPECT_EQ(mtx::format_duration(53.0), "53.0s");
  EXPECT_EQ(mtx::format_duration(125.0), "2m 05s");
  EXPECT_EQ(mtx::format_duration(3723.0), "1h 02m 03s");
}

TEST(Rng, DeterministicAndUnbiasedEnough) {
  mtx::Rng a = mtx::Rng::from({1, 2}), b = mtx::Rng::from({1, 2}), c = mtx::Rng::from({1, 3});
  const uint64_t va = a.next();
  EXPECT_EQ(va, b.next());
  EXPECT_NE(va, c.next());
  mtx::Rng r(42);
  std::vector<int> counts(10, 0);
  for (int i = 0; i < 100000; ++i) ++counts[r.below(10)];
  for (int n : counts) {
    EXPECT_GT(n, 9000);
    EXPECT_LT(n, 11000);
  }
  std::vector<int> v(100);
  for (int i = 0; i < 100; ++i) v[i] = i;
  std::vector<int> w = v;
  mtx::Rng(7).shuffle(v);
  mtx::Rng(7).shuffle(w);
  EXPECT_EQ(v, w);
  std::vector<int> sorted = v;
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < 100; ++i) EXPECT_EQ(sorted[i], i);
}

TEST(BlasCore, FallbackKernelsAreReplacedByTheCpusOwnFamily) {
  mtx::CpuFeatures avx512;
  avx512.avx = avx512.avx2 = avx512.fma = avx512.avx512f = avx512.avx512bw = avx512.avx512dq = avx512.avx512vl = true;
  mtx::CpuFeatures avx2;
  avx2.avx = avx2.avx2 = avx2.fma = true;
  mtx::CpuFeatures avx_only;
  avx_only.avx = true;
  EXPECT_EQ(mtx::better_blas_core("Prescott", avx512), "SkylakeX");
  EXPECT_EQ(mtx::better_blas_core("prescott", avx2), "Haswell");
  EXPECT_EQ(mtx::better_blas_core("Nehalem", avx_only), "Sandybridge");
  EXPECT_EQ(mtx::better_blas_core("Prescott", mtx::CpuFeatures{}), "");  // nothing better to offer
  // AVX2 kernels on an AVX-512 CPU (AMD Zen 4/5 under OpenBLAS 0.3.21) give way to SkylakeX's; other
  // recognised cores are kept.
  EXPECT_EQ(mtx::better_blas_core("Haswell", avx512), "SkylakeX");
  EXPECT_EQ(mtx::better_blas_core("Zen", avx512), "SkylakeX");
  EXPECT_EQ(mtx::better_blas_core("Haswell", avx2), "");
  EXPECT_EQ(mtx::better_blas_core("Zen", avx2), "");
  EXPECT_EQ(mtx::better_blas_core("SkylakeX", avx512), "");
  EXPECT_EQ(mtx::better_blas_core("Cooperlake", avx512), "");
  // AVX-512 without its BW/DQ/VL parts (Knights Landing) is not SkylakeX.
  mtx::CpuFeatures knl = avx2;
  knl.avx512f = true;
  EXPECT_EQ(mtx::better_blas_core("Prescott", knl), "Haswell");
  EXPECT_EQ(mtx::better_blas_core("Haswell", knl), "");
}

// Threads follow the CPUs the process may use: the cgroup quota (v1 and v2, the tightest level of the
// process's cgroup and its ancestors) and the affinity mask, not the host's core count.
TEST(Cpus, CgroupQuotasAreReadAsCpus) {
  EXPECT_EQ(mtx::cgroup_v2_cpus("max 100000\n"), 0);
  EXPECT_EQ(mtx::cgroup_v2_cpus("150000 100000\n"), 1.5);
  EXPECT_EQ(mtx::cgroup_v2_cpus("garbage"), 0);
  EXPECT_EQ(mtx::cgroup_v1_cpus("-1\n", "100000\n"), 0);
  EXPECT_EQ(mtx::cgroup_v1_cpus("200000\n", "100000\n"), 2);
  EXPECT_EQ(mtx::cgroup_v1_cpus("", ""), 0);

  mtx::test::TempDir tmp;
  const auto root = tmp / "cgroup";
  // v1: a container's cgroup under docker/, whose own quota (1.5 CPUs) is looser than docker/'s (1 CPU).
  mtx::test::write_text(root / "cpu,cpuacct" / "docker" / "abc" / "cpu.cfs_quota_us", "150000\n");
  mtx::test::write_text(root / "cpu,cpuacct" / "docker" / "abc" / "cpu.cfs_period_us", "100000\n");
  mtx::test::write_text(root / "cpu,cpuacct" / "docker" / "cpu.cfs_quota_us", "100000\n");
  mtx::test::write_text(root / "cpu,cpuacct" / "docker" / "cpu.cfs_period_us", "100000\n");
  mtx::test::write_text(root / "cpu,cpuacct" / "cpu.cfs_quota_us", "-1\n");
  mtx::test::write_text(root / "cpu,cpuacct" / "cpu.cfs_period_us", "100000\n");
  EXPECT_EQ(mtx::cgroup_cpu_limit("12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n", root), 1);
  EXPECT_EQ(mtx::cgroup_cpu_limit("12:memory:/docker/abc\n", root), 0) << "no cpu controller listed";
  // v2: the unified hierarchy, a 3-CPU slice under an unlimited root.
  const auto v2 = tmp / "v2";
  mtx::test::write_text(v2 / "cpu.max", "max 100000\n");
  mtx::test::write_text(v2 / "user.slice" / "cpu.max", "300000 100000\n");
  mtx::test::write_text(v2 / "user.slice" / "session" / "cpu.max", "max 100000\n");
  EXPECT_EQ(mtx::cgroup_cpu_limit("0::/user.slice/session\n", v2), 3);
  // Inside a container the listed path is not under the mount: the mount's own (root) quota applies.
  mtx::test::write_text(v2 / "cpu.max", "250000 100000\n");
  EXPECT_EQ(mtx::cgroup_cpu_limit("0::/../elsewhere\n", v2), 2.5);
}

TEST(Cpus, UsableCpusFollowTheAffinityMask) {
  const int all = mtx::usable_cpus();
  EXPECT_GE(all, 1);
  EXPECT_LE(all, int(std::max(1u, std::thread::hardware_concurrency())));
  EXPECT_EQ(mtx::resolve_threads(0), all);
  EXPECT_EQ(mtx::resolve_threads(3), 3);
  int pinned = 0;
  std::thread([&] {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(0, &one);
    ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);  // this thread only
    pinned = mtx::usable_cpus();
  }).join();
  EXPECT_EQ(pinned, 1);
}

// The instruction-set level: the widest that the CPU runs under the cap; the levels are not a chain (AVX-VNNI
// CPUs without AVX-512, AVX-512 VNNI CPUs without AVX-VNNI).
TEST(CpuIsa, TheWidestLevelTheCpuRunsUnderTheCap) {
  using mtx::cpu::Isa;
  mtx::CpuFeatures zen3;
  zen3.avx = zen3.avx2 = zen3.fma = true;
  mtx::CpuFeatures alder_lake = zen3;
  alder_lake.avx_vnni = true;
  mtx::CpuFeatures ice_lake = zen3;
  ice_lake.avx512f = ice_lake.avx512bw = ice_lake.avx512dq = ice_lake.avx512vl = ice_lake.avx512vnni = true;
  mtx::CpuFeatures sapphire_rapids = ice_lake;
  sapphire_rapids.avx_vnni = true;
  mtx::CpuFeatures knights = zen3;
  knights.avx512f = true;  // AVX-512F without BW/DQ/VL: not the avx512 level

  EXPECT_EQ(mtx::cpu::best(mtx::CpuFeatures{}), Isa::generic);
  EXPECT_EQ(mtx::cpu::best(zen3), Isa::avx2);
  EXPECT_EQ(mtx::cpu::best(alder_lake), Isa::avx_vnni);
  EXPECT_EQ(mtx::cpu::best(ice_lake), Isa::avx512_vnni);
  EXPECT_EQ(mtx::cpu::best(knights), Isa::avx2);
  EXPECT_EQ(mtx::cpu::best(ice_lake, Isa::avx_vnni), Isa::avx2) << "Ice Lake has no AVX-VNNI";
  EXPECT_EQ(mtx::cpu::best(sapphire_rapids, Isa::avx_vnni), Isa::avx_vnni);
  EXPECT_EQ(mtx::cpu::best(sapphire_rapids, Isa::avx512), Isa::avx512);
  EXPECT_EQ(mtx::cpu::best(zen3, Isa::avx512_vnni), Isa::avx2);
  EXPECT_EQ(mtx::cpu::best(sapphire_rapids, Isa::generic), Isa::generic);

  EXPECT_EQ(mtx::cpu::parse("AVX2"), Isa::avx2);
  EXPECT_EQ(mtx::cpu::parse("avx512-vnni"), Isa::avx512_vnni);
  EXPECT_EQ(mtx::cpu::parse("avx512_vnni"), Isa::avx512_vnni);
  EXPECT_FALSE(mtx::cpu::parse("sse4"));
  for (const Isa isa : mtx::cpu::runnable()) EXPECT_TRUE(mtx::cpu::runs(isa, mtx::cpu_features()));
  EXPECT_EQ(mtx::cpu::runnable().back(), mtx::cpu::detected());
}

TEST(CpuIsa, ScopedIsaChoosesTheLevelInsideTheProcess) {
  using mtx::cpu::Isa;
  const Isa before = mtx::cpu::isa();
  {
    mtx::cpu::ScopedIsa generic(Isa::generic);
    EXPECT_EQ(mtx::cpu::isa(), Isa::generic);
  }
  EXPECT_EQ(mtx::cpu::isa(), before);
  for (const Isa isa : {Isa::generic, Isa::neon, Isa::avx2, Isa::avx_vnni, Isa::avx512, Isa::avx512_vnni}) {
    if (mtx::cpu::runs(isa, mtx::cpu_features())) continue;
    EXPECT_THROW(mtx::cpu::ScopedIsa{isa}, mtx::Error) << mtx::cpu::name(isa) << " does not run here";
  }
}

// A freed tensor-sized block stays with tcmalloc (free, mapped) until release_free_memory hands it back; the
// figures see both. Skipped under another allocator (the sanitizer build).
TEST(Heap, FreePagesGoBackToTheSystemWhenReleased) {
  const mtx::HeapFigures start = mtx::heap_figures();
  if (!start.known) GTEST_SKIP() << "the allocator is not tcmalloc";
  constexpr int64_t kBlock = int64_t(64) << 20;
  {
    std::vector<char> block(size_t(kBlock), 1);
    const mtx::HeapFigures held = mtx::heap_figures();
    EXPECT_GE(held.allocated - start.allocated, kBlock);
    EXPECT_GE(held.mapped, held.allocated);
    volatile char touch = block[size_t(kBlock) - 1];
    (void)touch;
  }
  const mtx::HeapFigures freed = mtx::heap_figures();
  mtx::release_free_memory();
  const mtx::HeapFigures released = mtx::heap_figures();
  EXPECT_LT(released.free, int64_t(1) << 20) << "free before the release: " << freed.free;
  EXPECT_LE(released.mapped, freed.mapped - (freed.free - (int64_t(1) << 20)));
}
