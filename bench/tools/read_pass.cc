// The baseline for compile time: one plain pass over a file's bytes, either
// memory-mapped and touched (how `qemb compile` reads a checkpoint) or read(2)
// into a reused buffer, on T threads that each take a contiguous slice.
//   qemb_read_pass [--mmap|--read] [--threads T] FILE
// Prints "<method> <bytes> bytes <ms> ms <GB/s> GB/s".
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

uint64_t sum_words(const uint8_t* p, size_t n) {
  uint64_t sum = 0;
  for (size_t i = 0; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    sum += w;
  }
  return sum;
}

int usage() {
  std::fprintf(stderr, "usage: qemb_read_pass [--mmap|--read] [--threads T] FILE\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  bool mapped = true;
  int threads = 1;
  std::string path;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--mmap") {
      mapped = true;
    } else if (a == "--read") {
      mapped = false;
    } else if (a == "--threads" && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
      if (threads < 1) return usage();
    } else if (!a.empty() && a[0] != '-' && path.empty()) {
      path = a;
    } else {
      return usage();
    }
  }
  if (path.empty()) return usage();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat st {};
  if (fd < 0 || ::fstat(fd, &st) != 0) {
    std::fprintf(stderr, "qemb_read_pass: cannot open '%s': %s\n", path.c_str(), std::strerror(errno));
    return 1;
  }
  const size_t size = static_cast<size_t>(st.st_size);
  const auto start = std::chrono::steady_clock::now();
  const uint8_t* map = nullptr;
  if (mapped && size > 0) {
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      std::fprintf(stderr, "qemb_read_pass: cannot map '%s': %s\n", path.c_str(), std::strerror(errno));
      return 1;
    }
    map = static_cast<const uint8_t*>(p);
  }
  std::vector<uint64_t> sums(static_cast<size_t>(threads), 0);
  std::vector<std::thread> pool;
  const size_t slice = (size / static_cast<size_t>(threads) + 4095) & ~size_t{4095};
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      const size_t begin = std::min(size, slice * static_cast<size_t>(t));
      const size_t end = std::min(size, begin + slice);
      if (map != nullptr) {
        sums[static_cast<size_t>(t)] = sum_words(map + begin, end - begin);
        return;
      }
      std::vector<uint8_t> buffer(size_t{1} << 20);
      for (size_t at = begin; at < end;) {
        const ssize_t n = ::pread(fd, buffer.data(), std::min(buffer.size(), end - at), static_cast<off_t>(at));
        if (n <= 0) break;
        sums[static_cast<size_t>(t)] += sum_words(buffer.data(), static_cast<size_t>(n));
        at += static_cast<size_t>(n);
      }
    });
  }
  for (auto& th : pool) th.join();
  if (map != nullptr) ::munmap(const_cast<uint8_t*>(map), size);
  ::close(fd);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  uint64_t total = 0;
  for (uint64_t s : sums) total += s;
  std::printf("%s %zu bytes %.1f ms %.2f GB/s (checksum %016llx)\n", mapped ? "mmap" : "read", size, ms,
              static_cast<double>(size) / (ms * 1e6), static_cast<unsigned long long>(total));
  return 0;
}
