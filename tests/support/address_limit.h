// Runs code in a forked child whose address space (RLIMIT_AS) is its current
// size plus a little headroom: room for small buffers, not for new 8 MiB
// thread stacks, so code that starts threads meets the failure it must
// survive. The sanitizers' own address-space reservations defeat the limit,
// so tests skip under them (QEMB_SANITIZED).
#pragma once

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define QEMB_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define QEMB_SANITIZED 1
#endif
#endif

namespace qemb::testing {

// Forks; the child arms alarm(alarm_s) (a hang is a failure, not a stuck
// test), limits its address space to its size + headroom bytes and exits with
// body()'s value (4: its size was unreadable, 5: setrlimit failed). Returns
// the child's wait status, or -1 if fork failed.
template <class Body>
int run_with_address_limit(long headroom, unsigned alarm_s, Body body) {
  const pid_t child = ::fork();
  if (child < 0) return -1;
  if (child == 0) {
    ::alarm(alarm_s);
    long pages = 0;
    if (FILE* f = std::fopen("/proc/self/statm", "r")) {
      if (std::fscanf(f, "%ld", &pages) != 1) pages = 0;
      std::fclose(f);
    }
    if (pages == 0) ::_exit(4);
    const rlim_t limit = static_cast<rlim_t>(pages) * static_cast<rlim_t>(::sysconf(_SC_PAGESIZE)) +
                         static_cast<rlim_t>(headroom);
    const rlimit rl{limit, limit};
    if (::setrlimit(RLIMIT_AS, &rl) != 0) ::_exit(5);
    ::_exit(body());
  }
  int status = 0;
  if (::waitpid(child, &status, 0) != child) return -1;
  return status;
}

}  // namespace qemb::testing
