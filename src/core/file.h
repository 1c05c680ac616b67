// Files: inputs (read-only memory maps, or whole reads of pipes and standard
// input) and outputs that appear complete or not at all.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "qemb/status.h"

namespace qemb {

// Input and output paths: "-" names standard input or output.
inline constexpr const char* kStdioPath = "-";

class MappedFile {
 public:
  // Maps the whole file read-only. An empty file maps to size 0. Opening never
  // blocks (a FIFO with no writer is refused at once): what is mapped must be
  // a regular file, and the error says what the path is instead.
  static Result<std::shared_ptr<const MappedFile>> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile() = default;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

// The whole content of an input that is read once from start to end: a
// regular file, a FIFO or pipe (process substitution), a character device, or
// "-" for standard input. A FIFO is opened without blocking and then waits for
// its writer like any reader of a pipe. Folders, sockets and block devices are
// refused.
Result<std::vector<uint8_t>> read_input(const std::string& path);

// An output written so that it appears complete or not at all.
//
// A regular file (or a path that does not exist yet) is written as a file
// with no name (O_TMPFILE) in the output's folder; commit() fsyncs it, gives
// it its name (replacing any file or symbolic link there, never what a link
// points to), and fsyncs the folder. A crash, a signal or an error before
// then leaves nothing behind, and an existing file stays as it was. Where the
// file system has no O_TMPFILE, a short hidden temporary name in the same
// folder is used instead, removed on every error path (not on SIGKILL).
// The new file's mode is 0666 less the umask, or the replaced file's mode.
//
// "-" (standard output), an existing character device or FIFO (also through
// a link), and whatever /dev/stdout or /dev/fd/N stands for are streams: bytes go straight to them
// and nothing is created, renamed or removed. Random-access writes (write_at,
// resize) to a stream are collected in an unnamed temporary file and copied
// into it by commit(). Block devices, sockets and folders are refused.
class AtomicFileWriter {
 public:
  static Result<std::unique_ptr<AtomicFileWriter>> create(const std::string& path);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  // Sequential writes, buffered, from position().
  Status write(const void* data, size_t size);
  uint64_t position() const { return position_; }
  // Writes at an absolute offset without moving position(); safe to call from
  // several threads at once for disjoint ranges. Bytes never written read as
  // zero, so alignment padding needs no writing.
  Status write_at(uint64_t offset, const void* data, size_t size);
  // Starts writing bytes [offset, offset + size), already written, to the
  // disk in the background (files only; a hint, errors surface at commit),
  // so that commit()'s fsync has less left to wait for.
  void start_writeback(uint64_t offset, uint64_t size);
  // Sets the file's length (growing it with zeros), e.g. to end it exactly
  // at its last byte after write_at calls.
  Status resize(uint64_t size);
  // Flushes, checks every byte reached the file (write, fsync, close) and
  // publishes it. Any error leaves the earlier file, if any, as it was.
  Status commit();
  // The part of commit() that can fail for a reason of the data: flushes and
  // fsyncs a file (not yet named); for a stream, the same as commit(). Lets a
  // command with several outputs check them all before it names any
  // (commit_all).
  Status sync();

  // True when the output is a stream (standard output, a device, a FIFO).
  bool is_stream() const { return stream_; }
  // The quoted path, or "standard output", for messages.
  const std::string& display_name() const { return display_; }

 private:
  AtomicFileWriter() = default;
  Status flush_buffer();
  Status write_all(int fd, const uint8_t* p, size_t size);
  Status pwrite_all(int fd, const uint8_t* p, size_t size, uint64_t offset);
  Status use_spool();
  Status publish();
  Error io_error(const std::string& what, int err) const;

  std::string path_, display_, folder_, base_;
  int fd_ = -1;          // the file being written, or the stream
  int folder_fd_ = -1;   // the output's folder (files only)
  bool stream_ = false;
  bool owns_fd_ = true;  // false for standard output
  bool unnamed_ = false;  // O_TMPFILE: no name until commit
  std::string tmp_name_;  // named fallback, relative to folder_fd_
  int spool_fd_ = -1;     // streams: what write_at/resize wrote
  std::mutex spool_mu_;
  bool sent_directly_ = false;  // streams: bytes already went out
  std::vector<uint8_t> buffer_;
  uint64_t position_ = 0;
  bool committed_ = false;
  bool finished_ = false;  // commit() was called
};

// Commits several outputs of one command: all or none. Streams first (what
// they were sent cannot be taken back, but a failure there then publishes no
// file), then every file is flushed and fsynced, and only when all of that
// succeeded is each given its name. Null entries are skipped.
Status commit_all(const std::vector<AtomicFileWriter*>& outputs);

// Writes all of `data` to standard output through stdio, so that it keeps
// its order with printf; the error names standard output.
Status write_stdout(const void* data, size_t size);
// Flushes standard output and reports a write that failed at any time (a full
// disk, /dev/full, a closed pipe) as an error.
Status flush_stdout();

// True when both paths name the same existing file (inode), or are equal.
bool same_file(const std::string& a, const std::string& b);

namespace file_testing {
// The system calls AtomicFileWriter checks, for fault-injection tests.
enum class Call { kCreateUnnamed, kCreateNamed, kWrite, kFsync, kClose, kLink, kRename, kFsyncFolder };
// When set, each such call first asks the hook; a non-zero result is taken
// as the call failing with that errno (the call is not made). Tests only; not
// thread-safe to change while a writer is in use.
void set_fault_hook(std::function<int(Call)> hook);
}  // namespace file_testing

}  // namespace qemb
