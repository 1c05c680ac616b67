#include "qemb/file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace qemb {
namespace {
std::string errno_text() { return std::strerror(errno); }
}  // namespace

Result<std::shared_ptr<const MappedFile>> MappedFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return make_error(errno == ENOENT ? ErrorCode::kNotFound : ErrorCode::kIoError,
                      "cannot open '" + path + "': " + errno_text());
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    std::string e = errno_text();
    ::close(fd);
    return make_error(ErrorCode::kIoError, "cannot stat '" + path + "': " + e);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return make_error(ErrorCode::kIoError, "'" + path + "' is not a regular file");
  }
  std::shared_ptr<MappedFile> f(new MappedFile());
  f->path_ = path;
  f->size_ = static_cast<size_t>(st.st_size);
  if (f->size_ > 0) {
    void* p = ::mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      std::string e = errno_text();
      ::close(fd);
      return make_error(ErrorCode::kIoError, "cannot map '" + path + "': " + e);
    }
    f->data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
  return std::shared_ptr<const MappedFile>(std::move(f));
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

Result<std::unique_ptr<AtomicFileWriter>> AtomicFileWriter::create(const std::string& path) {
  if (path.empty()) return make_error(ErrorCode::kInvalidArgument, "empty output path");
  std::string tmpl = path + ".tmp-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  int fd = ::mkstemp(buf.data());
  if (fd < 0) {
    return make_error(ErrorCode::kIoError,
                      "cannot write '" + path + "': " + errno_text() +
                          " (check that the folder exists and is writable)");
  }
  std::unique_ptr<AtomicFileWriter> w(new AtomicFileWriter());
  w->path_ = path;
  w->tmp_path_ = buf.data();
  w->file_ = ::fdopen(fd, "wb");
  if (w->file_ == nullptr) {
    ::close(fd);
    ::unlink(w->tmp_path_.c_str());
    return make_error(ErrorCode::kIoError, "cannot write '" + path + "': " + errno_text());
  }
  ::fchmod(fd, 0644);
  return w;
}

AtomicFileWriter::~AtomicFileWriter() {
  if (file_ != nullptr) std::fclose(file_);
  if (!committed_ && !tmp_path_.empty()) ::unlink(tmp_path_.c_str());
}

Status AtomicFileWriter::write(const void* data, size_t size) {
  if (file_ == nullptr) return make_error(ErrorCode::kIoError, "write after close: " + path_);
  if (size > 0 && std::fwrite(data, 1, size, file_) != size) {
    return make_error(ErrorCode::kIoError, "write to '" + path_ + "' failed: " + errno_text());
  }
  position_ += size;
  return Status::Ok();
}

Status AtomicFileWriter::write_at(uint64_t offset, const void* data, size_t size) {
  if (file_ == nullptr) return make_error(ErrorCode::kIoError, "write after close: " + path_);
  if (std::fflush(file_) != 0) return make_error(ErrorCode::kIoError, "write to '" + path_ + "' failed: " + errno_text());
  const int fd = ::fileno(file_);
  const auto* p = static_cast<const uint8_t*>(data);
  while (size > 0) {
    const ssize_t n = ::pwrite(fd, p, size, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return make_error(ErrorCode::kIoError, "write to '" + path_ + "' failed: " + errno_text());
    p += n;
    offset += static_cast<uint64_t>(n);
    size -= static_cast<size_t>(n);
  }
  return Status::Ok();
}

Status AtomicFileWriter::resize(uint64_t size) {
  if (file_ == nullptr) return make_error(ErrorCode::kIoError, "write after close: " + path_);
  if (std::fflush(file_) != 0 || ::ftruncate(::fileno(file_), static_cast<off_t>(size)) != 0)
    return make_error(ErrorCode::kIoError, "cannot set the size of '" + path_ + "': " + errno_text());
  return Status::Ok();
}

Status AtomicFileWriter::commit() {
  if (file_ == nullptr) return make_error(ErrorCode::kIoError, "commit after close: " + path_);
  int rc = std::fflush(file_);
  rc |= std::fclose(file_);
  file_ = nullptr;
  if (rc != 0) return make_error(ErrorCode::kIoError, "write to '" + path_ + "' failed: " + errno_text());
  if (::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
    return make_error(ErrorCode::kIoError, "cannot rename into '" + path_ + "': " + errno_text());
  }
  committed_ = true;
  return Status::Ok();
}

bool same_file(const std::string& a, const std::string& b) {
  if (a == b) return true;
  struct stat sa {}, sb {};
  if (::stat(a.c_str(), &sa) != 0 || ::stat(b.c_str(), &sb) != 0) return false;
  return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

}  // namespace qemb
