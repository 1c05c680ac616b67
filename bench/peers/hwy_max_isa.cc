// LD_PRELOAD shim for the side-by-side benchmark (fbgemm_side_by_side.sh):
// restricts Highway's run-time dispatch in an unmodified `qemb bench` to the
// instruction set named by QEMB_PEERS_ISA (AVX2, SSE4), as the per-ISA tests
// do in process. qemb links libhwy dynamically and picks its kernels from
// hwy::SupportedAndGeneratedTargets() on first use, after this constructor.
// Built by the script (never by qemb's CMake):
//   g++ -O2 -shared -fPIC hwy_max_isa.cc -o hwy_max_isa.so -lhwy
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <hwy/targets.h>

__attribute__((constructor)) static void qemb_peers_restrict_isa() {
  const char* isa = std::getenv("QEMB_PEERS_ISA");
  if (isa == nullptr || *isa == '\0') return;
  int64_t keep = 0;
  if (std::strcmp(isa, "AVX2") == 0) keep = HWY_AVX2;
  else if (std::strcmp(isa, "SSE4") == 0) keep = HWY_SSE4;
  else {
    std::fprintf(stderr, "hwy_max_isa: QEMB_PEERS_ISA=%s: expected AVX2 or SSE4\n", isa);
    std::exit(2);
  }
  // Every target better than `keep` (Highway's lower bits are the better ones).
  hwy::DisableTargets(keep - 1);
}
