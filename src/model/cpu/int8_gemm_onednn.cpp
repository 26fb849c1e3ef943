// The int8 GEMM's int32 sums from oneDNN (Debian's libdnnl, the library Debian's LibTorch itself links), for CPUs
// without VNNI: its JIT u8 x s8 GEMM beats mtx's AVX2 kernel once a call has a few dozen rows
// (docs/inference.md has the measurement). Built with MTX_HAVE_ONEDNN (CMakeLists.txt); elsewhere it reports
// itself unavailable. No library code but oneDNN's C API: nothing here may define a weak symbol
// (scripts/checks/isa_objects.sh).
#include "int8_kernels.h"

#if defined(MTX_HAVE_ONEDNN)
#include <oneapi/dnnl/dnnl.h>
#endif

namespace mtx::model::int8::kernels {

bool onednn_available() {
#if defined(MTX_HAVE_ONEDNN)
  return true;
#else
  return false;
#endif
}

void onednn_cap_isa(bool avx2_only) {
#if defined(MTX_HAVE_ONEDNN)
  // One-shot and process-wide: oneDNN takes it only before its first JIT kernel, and ignores it after (the
  // numbers do not depend on it: the sums are exact at every level).
  static const bool once = [avx2_only] {
    if (avx2_only) dnnl_set_max_cpu_isa(dnnl_cpu_isa_avx2);
    return true;
  }();
  (void)once;
#else
  (void)avx2_only;
#endif
}

int gemm_onednn_u8s8(const uint8_t* u, int64_t rows, int64_t in, int64_t u_stride, uint8_t u_offset, const int8_t* w,
                     int64_t out, int32_t* acc) {
#if defined(MTX_HAVE_ONEDNN)
  const int32_t no_offset = 0;
  // Row-major: acc [rows, out] = (u - u_offset) [rows, in] x w^T, w stored [out, in].
  return int(dnnl_gemm_u8s8s32('N', 'T', 'F', rows, out, in, 1.0f, u, u_stride, u_offset, w, in, 0, 0.0f, acc, out,
                               &no_offset));
#else
  (void)u, (void)rows, (void)in, (void)u_stride, (void)u_offset, (void)w, (void)out, (void)acc;
  return -1;
#endif
}

}  // namespace mtx::model::int8::kernels
