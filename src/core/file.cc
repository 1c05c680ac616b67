#include "core/file.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace qemb {
namespace {

using file_testing::Call;

std::function<int(Call)>& fault_hook() {
  static std::function<int(Call)> hook;
  return hook;
}

// Zero, or the errno a test wants this call to fail with.
int injected(Call call) {
  const auto& hook = fault_hook();
  return hook ? hook(call) : 0;
}

std::string errno_text(int err) { return std::strerror(err); }
std::string quoted(const std::string& s) { return "'" + s + "'"; }

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISFIFO(mode)) return "a pipe or FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

Error not_mappable(const std::string& path, mode_t mode) {
  if (S_ISDIR(mode))  // most often a checkpoint folder given where an artifact belongs
    return make_error(ErrorCode::kIoError,
                      quoted(path) + " is a folder, not a file: an artifact is one memory-mapped .qemb file (a "
                                     "checkpoint folder is compiled into one: qemb compile " + quoted(path) +
                          " -o OUT.qemb)");
  return make_error(ErrorCode::kIoError, quoted(path) + " is not a regular file (it is " + kind_of(mode) +
                                             "); checkpoints and artifacts are memory-mapped, so they must be "
                                             "regular files: save it to a file first");
}

// Opens an input for reading without ever blocking: opening a FIFO for
// reading waits for a writer unless O_NONBLOCK is given.
Result<int> open_input(const std::string& path, bool must_be_regular) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    const int err = errno;
    struct stat st {};
    if (err == ENXIO && ::stat(path.c_str(), &st) == 0) {  // a socket
      if (must_be_regular) return not_mappable(path, st.st_mode);
      return make_error(ErrorCode::kIoError, "cannot read " + quoted(path) + ": it is " + kind_of(st.st_mode));
    }
    return make_error(err == ENOENT ? ErrorCode::kNotFound : ErrorCode::kIoError,
                      "cannot open " + quoted(path) + ": " + errno_text(err));
  }
  return fd;
}

// Waits until `fd` can be read (or has hung up); false on a poll error.
bool wait_readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  for (;;) {
    const int r = ::poll(&p, 1, -1);
    if (r >= 0) return true;
    if (errno != EINTR) return false;
  }
}

bool wait_writable(int fd) {
  pollfd p{fd, POLLOUT, 0};
  for (;;) {
    const int r = ::poll(&p, 1, -1);
    if (r >= 0) return true;
    if (errno != EINTR) return false;
  }
}

// A short random name: the output's own name may already be 255 bytes long.
std::string temp_name() {
  static std::atomic<uint64_t> counter{0};
  uint64_t x = static_cast<uint64_t>(::getpid()) * 0x9E3779B97F4A7C15ull ^
               static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
               (counter.fetch_add(1) * 0xBF58476D1CE4E5B9ull);
  std::string name = ".qemb-";
  for (int i = 0; i < 8; ++i) {
    name += "abcdefghijklmnopqrstuvwxyz0123456789"[x % 36];
    x /= 36;
  }
  return name;
}

// True when `path` reaches an open file through /proc/self/fd or /dev/fd
// (/dev/stdout, /dev/fd/3): written in place, as the descriptor's file;
// replacing the link would replace /dev/stdout itself.
bool through_fd_link(std::string path) {
  for (int depth = 0; depth < 16; ++depth) {
    if (path.rfind("/proc/", 0) == 0 || path.rfind("/dev/fd/", 0) == 0) return true;
    char target[4096];
    const ssize_t n = ::readlink(path.c_str(), target, sizeof(target) - 1);
    if (n <= 0) return false;
    std::string next(target, static_cast<size_t>(n));
    if (next[0] != '/') {
      const size_t slash = path.find_last_of('/');
      next = (slash == std::string::npos ? std::string() : path.substr(0, slash + 1)) + next;
    }
    path = next;
  }
  return false;
}

bool proc_fd_available() {
  static const bool available = ::access("/proc/self/fd", X_OK) == 0;
  return available;
}

// Blocks the signals that end a process by default while a file is given its
// name, so that a Ctrl-C cannot land between the link and the rename.
class BlockTerminationSignals {
 public:
  BlockTerminationSignals() {
    sigset_t set;
    sigemptyset(&set);
    for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaddset(&set, s);
    ::pthread_sigmask(SIG_BLOCK, &set, &old_);
  }
  ~BlockTerminationSignals() { ::pthread_sigmask(SIG_SETMASK, &old_, nullptr); }

 private:
  sigset_t old_;
};

constexpr size_t kBufferSize = size_t{1} << 20;

}  // namespace

void file_testing::set_fault_hook(std::function<int(Call)> hook) { fault_hook() = std::move(hook); }

Result<std::shared_ptr<const MappedFile>> MappedFile::open(const std::string& path) {
  QEMB_ASSIGN_OR_RETURN(const int fd, open_input(path, /*must_be_regular=*/true));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return make_error(ErrorCode::kIoError, "cannot stat " + quoted(path) + ": " + errno_text(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return not_mappable(path, st.st_mode);
  }
  std::shared_ptr<MappedFile> f(new MappedFile());
  f->path_ = path;
  f->size_ = static_cast<size_t>(st.st_size);
  if (f->size_ > 0) {
    void* p = ::mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return make_error(ErrorCode::kIoError, "cannot map " + quoted(path) + ": " + errno_text(err));
    }
    f->data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
  return std::shared_ptr<const MappedFile>(std::move(f));
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

Result<std::vector<uint8_t>> read_input(const std::string& path) {
  const bool is_stdin = path == kStdioPath;
  const std::string name = is_stdin ? "standard input" : quoted(path);
  int fd = STDIN_FILENO;
  if (!is_stdin) {
    QEMB_ASSIGN_OR_RETURN(fd, open_input(path, /*must_be_regular=*/false));
  }
  struct Closer {
    int fd;
    bool owned;
    ~Closer() {
      if (owned) ::close(fd);
    }
  } closer{fd, !is_stdin};
  struct stat st {};
  if (::fstat(fd, &st) != 0) return make_error(ErrorCode::kIoError, "cannot stat " + name + ": " + errno_text(errno));
  if (S_ISDIR(st.st_mode) || S_ISBLK(st.st_mode) || S_ISSOCK(st.st_mode)) {
    return make_error(ErrorCode::kIoError, "cannot read " + name + ": it is " + kind_of(st.st_mode) +
                                               "; give a regular file, a pipe or '-' for standard input");
  }
  std::vector<uint8_t> bytes;
  if (S_ISREG(st.st_mode)) bytes.reserve(static_cast<size_t>(st.st_size));
  // A FIFO opened without blocking reads as empty until its writer comes:
  // wait for the writer (or data) first, as a blocking reader would.
  if (S_ISFIFO(st.st_mode) && !is_stdin && !wait_readable(fd))
    return make_error(ErrorCode::kIoError, "cannot read " + name + ": " + errno_text(errno));
  uint8_t chunk[65536];
  for (;;) {
    const ssize_t n = ::read(fd, chunk, sizeof(chunk));
    if (n > 0) {
      bytes.insert(bytes.end(), chunk, chunk + n);
    } else if (n == 0) {
      break;
    } else if (errno == EINTR) {
      continue;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!wait_readable(fd)) return make_error(ErrorCode::kIoError, "cannot read " + name + ": " + errno_text(errno));
    } else {
      return make_error(ErrorCode::kIoError, "cannot read " + name + ": " + errno_text(errno));
    }
  }
  return bytes;
}

Error AtomicFileWriter::io_error(const std::string& what, int err) const {
  return make_error(ErrorCode::kIoError, "cannot write " + display_ + ": " + errno_text(err) + what);
}

Result<std::unique_ptr<AtomicFileWriter>> AtomicFileWriter::create(const std::string& path) {
  if (path.empty()) return make_error(ErrorCode::kInvalidArgument, "empty output path");
  std::unique_ptr<AtomicFileWriter> w(new AtomicFileWriter());
  w->path_ = path;
  if (path == kStdioPath) {
    w->display_ = "standard output";
    if (::isatty(STDOUT_FILENO))
      return make_error(ErrorCode::kInvalidArgument,
                        "'-o -' writes binary data to standard output, which is a terminal; redirect it to a file "
                        "or a pipe");
    std::fflush(stdout);  // what was printed before comes first
    w->stream_ = true;
    w->owns_fd_ = false;
    w->fd_ = STDOUT_FILENO;
    return w;
  }
  w->display_ = quoted(path);
  struct stat st {};
  mode_t keep_mode = 0;
  bool replace_regular = false;
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode) || (S_ISREG(st.st_mode) && through_fd_link(path))) {
      // Written in place, never replaced: /dev/null, /dev/stdout, a pipe.
      // A regular file behind /dev/stdout is appended to, as '>>' would want
      // and '>' (an empty file) does not mind.
      const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY | (S_ISREG(st.st_mode) ? O_APPEND : 0));
      if (fd < 0) return w->io_error("", errno);
      w->stream_ = true;
      w->fd_ = fd;
      return w;
    }
    if (S_ISDIR(st.st_mode))
      return make_error(ErrorCode::kInvalidArgument,
                        "cannot write " + w->display_ + ": it is a folder; give the output a file name");
    if (!S_ISREG(st.st_mode))
      return make_error(ErrorCode::kInvalidArgument,
                        "cannot write " + w->display_ + ": it is " + kind_of(st.st_mode) +
                            "; qemb writes regular files, character devices, FIFOs and standard output ('-'), and "
                            "never replaces anything else");
    struct stat lst {};
    replace_regular = ::lstat(path.c_str(), &lst) == 0 && S_ISREG(lst.st_mode);
    keep_mode = lst.st_mode & 0777;
  }
  const size_t slash = path.find_last_of('/');
  w->folder_ = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  w->base_ = slash == std::string::npos ? path : path.substr(slash + 1);
  if (w->base_.empty() || w->base_ == "." || w->base_ == "..")
    return make_error(ErrorCode::kInvalidArgument,
                      "cannot write " + w->display_ + ": it names a folder; give the output a file name");
  const std::string check = " (check that the folder exists and is writable)";
  w->folder_fd_ = ::open(w->folder_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (w->folder_fd_ < 0) return w->io_error(check, errno);

  int err = 0;
  if (proc_fd_available()) {
    err = injected(Call::kCreateUnnamed);
    if (err == 0) {
      w->fd_ = ::openat(w->folder_fd_, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
      if (w->fd_ < 0) err = errno;
    }
    if (w->fd_ >= 0) {
      w->unnamed_ = true;
    } else if (err != EOPNOTSUPP && err != EISDIR && err != EINVAL) {  // those: no O_TMPFILE here
      return w->io_error(check, err);
    }
  }
  for (int attempt = 0; w->fd_ < 0 && attempt < 100; ++attempt) {
    const std::string name = temp_name();
    err = injected(Call::kCreateNamed);
    if (err == 0) {
      w->fd_ = ::openat(w->folder_fd_, name.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0666);
      if (w->fd_ < 0) err = errno;
    }
    if (w->fd_ >= 0) w->tmp_name_ = name;
    else if (err != EEXIST) return w->io_error(check, err);
  }
  if (w->fd_ < 0) return w->io_error(check, err);
  if (replace_regular) (void)::fchmod(w->fd_, keep_mode);  // best effort: some file systems have no modes
  return w;
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0 && owns_fd_) ::close(fd_);
  if (spool_fd_ >= 0) ::close(spool_fd_);
  if (!committed_ && !tmp_name_.empty()) ::unlinkat(folder_fd_, tmp_name_.c_str(), 0);
  if (folder_fd_ >= 0) ::close(folder_fd_);
}

Status AtomicFileWriter::write_all(int fd, const uint8_t* p, size_t size) {
  while (size > 0) {
    const int err = injected(Call::kWrite);
    if (err != 0) return io_error("", err);
    const ssize_t n = ::write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {  // a non-blocking pipe
      if (wait_writable(fd)) continue;
    }
    if (n < 0) return io_error("", errno);
    if (n == 0) return io_error("", ENOSPC);
    p += n;
    size -= static_cast<size_t>(n);
  }
  return Status::Ok();
}

Status AtomicFileWriter::pwrite_all(int fd, const uint8_t* p, size_t size, uint64_t offset) {
  while (size > 0) {
    const int err = injected(Call::kWrite);
    if (err != 0) return io_error("", err);
    const ssize_t n = ::pwrite(fd, p, size, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return io_error("", errno);
    if (n == 0) return io_error("", ENOSPC);
    p += n;
    offset += static_cast<uint64_t>(n);
    size -= static_cast<size_t>(n);
  }
  return Status::Ok();
}

Status AtomicFileWriter::flush_buffer() {
  if (buffer_.empty()) return Status::Ok();
  const uint64_t start = position_ - buffer_.size();
  Status s = Status::Ok();
  if (stream_ && spool_fd_ < 0) {
    sent_directly_ = true;
    s = write_all(fd_, buffer_.data(), buffer_.size());
  } else {
    s = pwrite_all(stream_ ? spool_fd_ : fd_, buffer_.data(), buffer_.size(), start);
  }
  buffer_.clear();
  return s;
}

Status AtomicFileWriter::write(const void* data, size_t size) {
  if (fd_ < 0 || finished_) return make_error(ErrorCode::kIoError, "write after close: " + display_);
  const auto* p = static_cast<const uint8_t*>(data);
  if (buffer_.size() + size > kBufferSize) {
    QEMB_RETURN_IF_ERROR(flush_buffer());
    if (size >= kBufferSize) {  // large writes skip the buffer
      position_ += size;
      if (stream_ && spool_fd_ < 0) {
        sent_directly_ = true;
        return write_all(fd_, p, size);
      }
      return pwrite_all(stream_ ? spool_fd_ : fd_, p, size, position_ - size);
    }
  }
  if (buffer_.capacity() < kBufferSize) buffer_.reserve(kBufferSize);
  buffer_.insert(buffer_.end(), p, p + size);
  position_ += size;
  return Status::Ok();
}

Status AtomicFileWriter::use_spool() {
  std::lock_guard<std::mutex> lock(spool_mu_);
  if (spool_fd_ >= 0) return Status::Ok();
  if (sent_directly_)
    return make_error(ErrorCode::kInternal,
                      "cannot write " + display_ + ": random-access write after bytes were streamed out");
  const char* env = std::getenv("TMPDIR");
  const std::string dir = env != nullptr && *env != '\0' ? env : "/tmp";
  int fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) {
    std::string tmpl = dir + "/qemb-XXXXXX";
    fd = ::mkstemp(tmpl.data());
    if (fd >= 0) ::unlink(tmpl.c_str());
  }
  if (fd < 0)
    return io_error(" (a stream needs a temporary file in '" + dir + "' to assemble its bytes; set TMPDIR)", errno);
  spool_fd_ = fd;
  return Status::Ok();
}

Status AtomicFileWriter::write_at(uint64_t offset, const void* data, size_t size) {
  if (fd_ < 0 || finished_) return make_error(ErrorCode::kIoError, "write after close: " + display_);
  if (stream_) QEMB_RETURN_IF_ERROR(use_spool());
  if (!buffer_.empty()) QEMB_RETURN_IF_ERROR(flush_buffer());
  return pwrite_all(stream_ ? spool_fd_ : fd_, static_cast<const uint8_t*>(data), size, offset);
}

void AtomicFileWriter::start_writeback(uint64_t offset, uint64_t size) {
#ifdef SYNC_FILE_RANGE_WRITE
  if (stream_ || fd_ < 0 || finished_ || size == 0) return;
  (void)::sync_file_range(fd_, static_cast<off64_t>(offset), static_cast<off64_t>(size), SYNC_FILE_RANGE_WRITE);
#else
  (void)offset, (void)size;
#endif
}

Status AtomicFileWriter::resize(uint64_t size) {
  if (fd_ < 0 || finished_) return make_error(ErrorCode::kIoError, "write after close: " + display_);
  if (stream_) QEMB_RETURN_IF_ERROR(use_spool());
  QEMB_RETURN_IF_ERROR(flush_buffer());
  int err = injected(Call::kWrite);
  if (err == 0 && ::ftruncate(stream_ ? spool_fd_ : fd_, static_cast<off_t>(size)) != 0) err = errno;
  if (err != 0) return io_error(" (setting its size)", err);
  return Status::Ok();
}

Status AtomicFileWriter::publish() {
  BlockTerminationSignals blocked;
  if (!unnamed_) {
    int err = injected(Call::kRename);
    if (err == 0 && ::renameat(folder_fd_, tmp_name_.c_str(), folder_fd_, base_.c_str()) != 0) err = errno;
    if (err != 0) return io_error(" (renaming the finished file into place)", err);
    tmp_name_.clear();
    return Status::Ok();
  }
  const std::string proc = "/proc/self/fd/" + std::to_string(fd_);
  auto link_as = [&](const std::string& name) {
    const int err = injected(Call::kLink);
    if (err != 0) return err;
    return ::linkat(AT_FDCWD, proc.c_str(), folder_fd_, name.c_str(), AT_SYMLINK_FOLLOW) == 0 ? 0 : errno;
  };
  int err = link_as(base_);
  if (err == 0) return Status::Ok();
  if (err != EEXIST) return io_error(" (giving the finished file its name)", err);
  // Something is there: link under a temporary name, then rename over it.
  std::string tmp;
  for (int attempt = 0; attempt < 100; ++attempt) {
    tmp = temp_name();
    err = link_as(tmp);
    if (err != EEXIST) break;
  }
  if (err != 0) return io_error(" (giving the finished file its name)", err);
  err = injected(Call::kRename);
  if (err == 0 && ::renameat(folder_fd_, tmp.c_str(), folder_fd_, base_.c_str()) != 0) err = errno;
  if (err != 0) {
    ::unlinkat(folder_fd_, tmp.c_str(), 0);
    return io_error(" (renaming the finished file into place)", err);
  }
  return Status::Ok();
}

Status AtomicFileWriter::commit() {
  if (fd_ < 0 || finished_) return make_error(ErrorCode::kIoError, "commit after close: " + display_);
  finished_ = true;  // one try: after a failed commit the writer only cleans up
  QEMB_RETURN_IF_ERROR(flush_buffer());
  if (stream_) {
    if (spool_fd_ >= 0) {
      struct stat st {};
      if (::fstat(spool_fd_, &st) != 0) return io_error("", errno);
      std::vector<uint8_t> chunk(kBufferSize);
      for (uint64_t at = 0; at < static_cast<uint64_t>(st.st_size);) {
        const ssize_t n = ::pread(spool_fd_, chunk.data(), chunk.size(), static_cast<off_t>(at));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return io_error(" (reading back its temporary file)", n < 0 ? errno : EIO);
        QEMB_RETURN_IF_ERROR(write_all(fd_, chunk.data(), static_cast<size_t>(n)));
        at += static_cast<uint64_t>(n);
      }
    }
    committed_ = true;
    if (owns_fd_) {
      int err = injected(Call::kClose);
      if (::close(fd_) != 0 && err == 0) err = errno;
      fd_ = -1;
      if (err != 0) return io_error("", err);
    }
    return Status::Ok();
  }
  // Data on disk first, then the name, then the folder entry.
  int err = injected(Call::kFsync);
  if (err == 0 && ::fsync(fd_) != 0) err = errno;
  if (err != 0) return io_error("", err);
  if (!unnamed_) {  // a named temporary is closed before it takes the name
    err = injected(Call::kClose);
    if (::close(fd_) != 0 && err == 0) err = errno;
    fd_ = -1;
    if (err != 0) return io_error("", err);
  }
  QEMB_RETURN_IF_ERROR(publish());
  committed_ = true;
  err = injected(Call::kFsyncFolder);
  if (err == 0 && ::fsync(folder_fd_) != 0 && errno != EINVAL) err = errno;  // EINVAL: not supported there
  if (err != 0) return io_error(" (syncing its folder)", err);
  if (fd_ >= 0) {
    err = injected(Call::kClose);
    if (::close(fd_) != 0 && err == 0) err = errno;
    fd_ = -1;
    if (err != 0) return io_error("", err);
  }
  return Status::Ok();
}

Status AtomicFileWriter::sync() {
  if (fd_ < 0 || finished_) return make_error(ErrorCode::kIoError, "commit after close: " + display_);
  if (stream_) return commit();
  QEMB_RETURN_IF_ERROR(flush_buffer());
  int err = injected(Call::kFsync);
  if (err == 0 && ::fsync(fd_) != 0) err = errno;
  if (err != 0) {
    finished_ = true;
    return io_error("", err);
  }
  return Status::Ok();
}

Status commit_all(const std::vector<AtomicFileWriter*>& outputs) {
  for (AtomicFileWriter* w : outputs)
    if (w != nullptr && w->is_stream()) QEMB_RETURN_IF_ERROR(w->commit());
  for (AtomicFileWriter* w : outputs)
    if (w != nullptr && !w->is_stream()) QEMB_RETURN_IF_ERROR(w->sync());
  for (AtomicFileWriter* w : outputs)
    if (w != nullptr && !w->is_stream()) QEMB_RETURN_IF_ERROR(w->commit());
  return Status::Ok();
}

Status write_stdout(const void* data, size_t size) {
  if (size > 0 && std::fwrite(data, 1, size, stdout) != size)
    return make_error(ErrorCode::kIoError, "cannot write to standard output: " + errno_text(errno));
  return Status::Ok();
}

Status flush_stdout() {
  errno = 0;
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    const int err = errno;
    return make_error(ErrorCode::kIoError, std::string("cannot write to standard output: ") +
                                               (err != 0 ? errno_text(err) : "a write failed"));
  }
  return Status::Ok();
}

bool same_file(const std::string& a, const std::string& b) {
  if (a == b) return true;
  struct stat sa {}, sb {};
  if (::stat(a.c_str(), &sa) != 0 || ::stat(b.c_str(), &sb) != 0) return false;
  return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

}  // namespace qemb
