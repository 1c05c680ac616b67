// Read-only mappings, whole reads of pipes, and outputs that appear complete
// or not at all: a failed command leaves no partial output file behind.
#include "core/file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace qemb {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class FileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::path(::testing::TempDir()) / "qemb_file_test_XXXXXX").string();
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    ASSERT_NE(::mkdtemp(buf.data()), nullptr);
    dir_ = buf.data();
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  std::string Path(const std::string& name) const { return (fs::path(dir_) / name).string(); }

  std::vector<std::string> Entries() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

  static std::string Read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  static void WriteText(const std::string& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary);
    out << text;
  }

  std::string dir_;
};

TEST_F(FileTest, CommitWritesTheFileAndLeavesNoTemporary) {
  const std::string path = Path("out.bin");
  {
    auto w = AtomicFileWriter::create(path);
    ASSERT_TRUE(w.ok()) << w.error().message;
    ASSERT_TRUE((*w)->write("abc", 3).ok());
    EXPECT_EQ((*w)->position(), 3u);
    const std::string zeros(300, '\0');
    ASSERT_TRUE((*w)->write(zeros.data(), zeros.size()).ok());
    EXPECT_EQ((*w)->position(), 303u);
    ASSERT_TRUE((*w)->write("z", 1).ok());
    // Nothing at the final name until commit.
    EXPECT_FALSE(fs::exists(path));
    ASSERT_TRUE((*w)->commit().ok());
  }
  std::string expected = "abc" + std::string(300, '\0') + "z";
  EXPECT_EQ(Read(path), expected);
  EXPECT_EQ(Entries(), (std::vector<std::string>{"out.bin"}));
}

TEST_F(FileTest, WriteAtFillsRangesFromSeveralThreadsAndResizeEndsTheFile) {
  const std::string path = Path("out.bin");
  {
    auto w = AtomicFileWriter::create(path);
    ASSERT_TRUE(w.ok()) << w.error().message;
    ASSERT_TRUE((*w)->write("head", 4).ok());  // buffered, then flushed by write_at
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        const std::string chunk(100, static_cast<char>('a' + t));
        ASSERT_TRUE((*w)->write_at(64 + 100 * static_cast<uint64_t>(t), chunk.data(), chunk.size()).ok());
      });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ((*w)->position(), 4u);  // write_at does not move the sequential position
    ASSERT_TRUE((*w)->resize(480).ok());
    ASSERT_TRUE((*w)->commit().ok());
  }
  const std::string expected = "head" + std::string(60, '\0') + std::string(100, 'a') + std::string(100, 'b') +
                               std::string(100, 'c') + std::string(100, 'd') + std::string(16, '\0');
  EXPECT_EQ(Read(path), expected);
}

// The streamed artifact writer asks for early writeback of finished ranges:
// a hint that changes no byte, wherever the range lies.
TEST_F(FileTest, StartWritebackChangesNoByte) {
  const std::string path = Path("wb.bin");
  std::string expected(3 << 20, '\0');
  for (size_t i = 0; i < expected.size(); ++i) expected[i] = static_cast<char>(i * 7 + 1);
  {
    auto w = AtomicFileWriter::create(path);
    ASSERT_TRUE(w.ok()) << w.error().message;
    ASSERT_TRUE((*w)->write_at(0, expected.data(), expected.size() / 2).ok());
    (*w)->start_writeback(0, expected.size() / 2);
    (*w)->start_writeback(0, 0);
    (*w)->start_writeback(expected.size(), 1 << 20);  // past the end so far
    ASSERT_TRUE((*w)->write_at(expected.size() / 2, expected.data() + expected.size() / 2, expected.size() / 2).ok());
    (*w)->start_writeback(expected.size() / 2, expected.size() / 2);
    ASSERT_TRUE((*w)->commit().ok());
    (*w)->start_writeback(0, expected.size());  // after commit: nothing happens
  }
  EXPECT_EQ(Read(path), expected);
}

TEST_F(FileTest, UncommittedWriterLeavesNoFile) {
  const std::string path = Path("out.bin");
  {
    auto w = AtomicFileWriter::create(path);
    ASSERT_TRUE(w.ok()) << w.error().message;
    ASSERT_TRUE((*w)->write("partial", 7).ok());
    EXPECT_TRUE(Entries().empty());  // the file has no name while it is written
  }
  EXPECT_FALSE(fs::exists(path));
  EXPECT_TRUE(Entries().empty());
}

TEST_F(FileTest, UncommittedWriterNeverClobbersAnExistingFile) {
  const std::string path = Path("model.qemb");
  WriteText(path, "previous good output");
  {
    auto w = AtomicFileWriter::create(path);
    ASSERT_TRUE(w.ok()) << w.error().message;
    ASSERT_TRUE((*w)->write("new but failed", 14).ok());
  }  // the run failed before commit
  EXPECT_EQ(Read(path), "previous good output");
  EXPECT_EQ(Entries(), (std::vector<std::string>{"model.qemb"}));
}

TEST_F(FileTest, CommitReplacesAnExistingFile) {
  const std::string path = Path("model.qemb");
  WriteText(path, "old");
  {
    auto w = AtomicFileWriter::create(path);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->write("new", 3).ok());
    ASSERT_TRUE((*w)->commit().ok());
  }
  EXPECT_EQ(Read(path), "new");
  EXPECT_EQ(Entries(), (std::vector<std::string>{"model.qemb"}));
}

TEST_F(FileTest, FailedCommitKeepsWhatWasThereAndCleansUp) {
  // The target becomes a non-empty folder while the file is written, so
  // giving the file its name fails.
  const std::string path = Path("taken");
  {
    auto w = AtomicFileWriter::create(path);
    ASSERT_TRUE(w.ok()) << w.error().message;
    fs::create_directory(path);
    WriteText(Path("taken/keep.txt"), "keep");
    ASSERT_TRUE((*w)->write("x", 1).ok());
    Status s = (*w)->commit();
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.code(), ErrorCode::kIoError);
    EXPECT_THAT(s.message(), HasSubstr("cannot write '" + path + "': Is a directory (renaming the finished file into place)"));
    // A second commit or write after the failed one is an error, not a crash.
    EXPECT_EQ((*w)->commit().code(), ErrorCode::kIoError);
    EXPECT_EQ((*w)->write("y", 1).code(), ErrorCode::kIoError);
  }
  EXPECT_TRUE(fs::is_directory(path));
  EXPECT_EQ(Read(Path("taken/keep.txt")), "keep");
  EXPECT_EQ(Entries(), (std::vector<std::string>{"taken"}));
}

TEST_F(FileTest, WriteAfterCommitIsAnError) {
  auto w = AtomicFileWriter::create(Path("a.bin"));
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->commit().ok());
  Status s = (*w)->write("x", 1);
  EXPECT_EQ(s.code(), ErrorCode::kIoError);
  EXPECT_THAT(s.message(), HasSubstr("a.bin"));
  EXPECT_EQ((*w)->commit().code(), ErrorCode::kIoError);
  EXPECT_EQ(Read(Path("a.bin")), "");
}

TEST_F(FileTest, CreateInMissingFolderIsAnActionableIoError) {
  const std::string path = Path("no/such/folder/out.qemb");
  auto w = AtomicFileWriter::create(path);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.error().code, ErrorCode::kIoError);
  EXPECT_THAT(w.error().message, HasSubstr("cannot write '" + path + "'"));
  EXPECT_THAT(w.error().message, HasSubstr("folder exists"));
  EXPECT_TRUE(Entries().empty());
}

TEST_F(FileTest, CreateWithEmptyPathIsInvalidArgument) {
  auto w = AtomicFileWriter::create("");
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.error().code, ErrorCode::kInvalidArgument);
}

TEST_F(FileTest, MappedFileReadsTheBytes) {
  const std::string path = Path("data.bin");
  const std::string bytes("\x01\x02\x00\xff", 4);
  WriteText(path, bytes);
  auto m = MappedFile::open(path);
  ASSERT_TRUE(m.ok()) << m.error().message;
  ASSERT_EQ((*m)->size(), 4u);
  EXPECT_EQ((*m)->path(), path);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>((*m)->data()), 4), bytes);
}

TEST_F(FileTest, MappedFileOfAnEmptyFileHasSizeZero) {
  const std::string path = Path("empty.bin");
  WriteText(path, "");
  auto m = MappedFile::open(path);
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ((*m)->size(), 0u);
}

TEST_F(FileTest, MappedFileOfAMissingFileIsNotFoundNamingThePath) {
  const std::string path = Path("missing.qemb");
  auto m = MappedFile::open(path);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().code, ErrorCode::kNotFound);
  EXPECT_THAT(m.error().message, HasSubstr("cannot open '" + path + "'"));
}

TEST_F(FileTest, MappedFileOfADirectoryIsAnIoError) {
  auto m = MappedFile::open(dir_);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().code, ErrorCode::kIoError);
  // Most often a checkpoint folder given where an artifact belongs.
  EXPECT_THAT(m.error().message, HasSubstr("is a folder, not a file: an artifact is one memory-mapped .qemb file "
                                           "(a checkpoint folder is compiled into one: qemb compile "));
}

TEST_F(FileTest, MappingOutlivesTheFileName) {
  const std::string path = Path("data.bin");
  WriteText(path, "hello");
  auto m = MappedFile::open(path);
  ASSERT_TRUE(m.ok());
  fs::remove(path);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>((*m)->data()), 5), "hello");
}

TEST_F(FileTest, SameFile) {
  const std::string a = Path("a"), b = Path("b"), link = Path("a_link");
  WriteText(a, "1");
  WriteText(b, "1");
  fs::create_hard_link(a, link);
  EXPECT_TRUE(same_file(a, a));
  EXPECT_TRUE(same_file(a, link));
  EXPECT_TRUE(same_file(a, dir_ + "/./a"));
  EXPECT_FALSE(same_file(a, b));
  EXPECT_FALSE(same_file(a, Path("missing")));
  EXPECT_TRUE(same_file(Path("missing"), Path("missing")));  // equal strings
}

// ---- outputs that are not regular files --------------------------------------

using file_testing::Call;

// Sets a fault hook for one test and clears it however the test ends.
class ScopedFault {
 public:
  explicit ScopedFault(std::function<int(Call)> hook) { file_testing::set_fault_hook(std::move(hook)); }
  ~ScopedFault() { file_testing::set_fault_hook(nullptr); }
};

// Forces the named-temporary fallback, as on a file system without O_TMPFILE.
int no_tmpfile(Call c) { return c == Call::kCreateUnnamed ? EOPNOTSUPP : 0; }

Status write_and_commit(const std::string& path, const std::string& bytes) {
  auto w = AtomicFileWriter::create(path);
  if (!w.ok()) return w.status();
  QEMB_RETURN_IF_ERROR((*w)->write(bytes.data(), bytes.size()));
  return (*w)->commit();
}

TEST_F(FileTest, NamedFallbackCommitsAndCleansUpLikeTheUnnamedFile) {
  ScopedFault fault(no_tmpfile);
  const std::string path = Path("out.bin");
  {
    auto w = AtomicFileWriter::create(path);
    ASSERT_TRUE(w.ok()) << w.error().message;
    ASSERT_TRUE((*w)->write("partial", 7).ok());
    ASSERT_EQ(Entries().size(), 1u);  // a short hidden name while writing
    EXPECT_EQ(Entries()[0].rfind(".qemb-", 0), 0u);
    EXPECT_EQ(Entries()[0].size(), 14u);
  }
  EXPECT_TRUE(Entries().empty());
  ASSERT_TRUE(write_and_commit(path, "done").ok());
  EXPECT_EQ(Read(path), "done");
  EXPECT_EQ(Entries(), (std::vector<std::string>{"out.bin"}));
}

// Every checked call, failing with ENOSPC, gives an error naming the path and
// (except once the file has its name) leaves the folder as it was.
TEST_F(FileTest, EveryFailingCallIsACleanErrorNamingThePath) {
  const std::string big(3u << 20, 'n');  // past the write buffer: several writes
  for (bool named : {false, true}) {
    for (bool existing : {false, true}) {
      for (Call failing : {Call::kWrite, Call::kFsync, Call::kClose, Call::kLink, Call::kRename, Call::kFsyncFolder}) {
        SCOPED_TRACE(std::string(named ? "named" : "unnamed") + (existing ? ", existing output" : "") + ", call " +
                     std::to_string(static_cast<int>(failing)));
        const std::string path = Path("out.bin");
        fs::remove(path);
        if (existing) WriteText(path, "precious");
        int calls = 0;
        ScopedFault fault([&](Call c) {
          if (named && c == Call::kCreateUnnamed) return EOPNOTSUPP;
          if (c != failing) return 0;
          ++calls;
          return ENOSPC;
        });
        Status s = write_and_commit(path, big);
        if (calls == 0) {  // this call is not made on this path (e.g. no link without O_TMPFILE)
          EXPECT_TRUE(s.ok()) << s.message();
          EXPECT_EQ(Read(path), big);
          continue;
        }
        ASSERT_FALSE(s.ok());
        EXPECT_EQ(s.code(), ErrorCode::kIoError);
        EXPECT_THAT(s.message(), HasSubstr("cannot write '" + path + "': No space left on device"));
        EXPECT_EQ(Entries(), (existing || (!named && failing == Call::kClose) || failing == Call::kFsyncFolder)
                                 ? std::vector<std::string>{"out.bin"}
                                 : std::vector<std::string>{});
        // After the name is given (the folder's fsync, the last close of an
        // unnamed file) the data is complete and fsynced; before, nothing moved.
        const bool published = failing == Call::kFsyncFolder || (!named && failing == Call::kClose);
        if (existing || published) {
          EXPECT_EQ(Read(path), published ? big : "precious");
        }
      }
    }
  }
}

TEST_F(FileTest, CreateFailuresNameThePath) {
  for (Call failing : {Call::kCreateUnnamed, Call::kCreateNamed}) {
    ScopedFault fault([&](Call c) {
      if (failing == Call::kCreateNamed && c == Call::kCreateUnnamed) return EOPNOTSUPP;
      return c == failing ? EROFS : 0;
    });
    auto w = AtomicFileWriter::create(Path("out.bin"));
    ASSERT_FALSE(w.ok());
    EXPECT_THAT(w.error().message, HasSubstr("cannot write '" + Path("out.bin") + "': Read-only file system"));
    EXPECT_TRUE(Entries().empty());
  }
}

TEST_F(FileTest, ASignalWhileWritingLeavesNoFile) {
  for (int sig : {SIGINT, SIGTERM}) {
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      auto w = AtomicFileWriter::create(Path("out.bin"));
      if (!w.ok()) ::_exit(2);
      const std::string half(4u << 20, 'h');
      if (!(*w)->write(half.data(), half.size()).ok() || !(*w)->write_at(0, "x", 1).ok()) ::_exit(3);
      ::raise(sig);  // the default action: the process ends here
      ::_exit(4);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFSIGNALED(status)) << "child exit " << WEXITSTATUS(status);
    EXPECT_EQ(WTERMSIG(status), sig);
    EXPECT_TRUE(Entries().empty());
  }
}

TEST_F(FileTest, ModeIsTheUmasksOrTheReplacedFilesOwn) {
  const mode_t old_mask = ::umask(027);
  for (bool named : {false, true}) {
    ScopedFault fault(named ? std::function<int(Call)>(no_tmpfile) : nullptr);
    const std::string fresh = Path(named ? "fresh_named" : "fresh");
    const std::string kept = Path(named ? "kept_named" : "kept");
    ASSERT_TRUE(write_and_commit(fresh, "a").ok());
    EXPECT_EQ(fs::status(fresh).permissions(), fs::perms(0640));
    WriteText(kept, "old");
    fs::permissions(kept, fs::perms(0600));
    ASSERT_TRUE(write_and_commit(kept, "new").ok());
    EXPECT_EQ(fs::status(kept).permissions(), fs::perms(0600));
    EXPECT_EQ(Read(kept), "new");
  }
  ::umask(old_mask);
}

TEST_F(FileTest, NamesUpTo255BytesAreWritable) {
  for (bool named : {false, true}) {
    ScopedFault fault(named ? std::function<int(Call)>(no_tmpfile) : nullptr);
    for (size_t length : {245u, 255u}) {
      const std::string path = Path(std::string(length - 4, named ? 'n' : 'u') + ".npy");
      WriteText(path, "old");  // replacing goes through a temporary name
      ASSERT_TRUE(write_and_commit(path, "x").ok()) << length;
      EXPECT_EQ(Read(path), "x");
      fs::remove(path);
    }
  }
  EXPECT_TRUE(Entries().empty());
}

TEST_F(FileTest, ASymlinkIsReplacedAndItsTargetLeftAlone) {
  const std::string target = Path("target.bin"), link = Path("link.bin"), dangling = Path("dangling.bin");
  WriteText(target, "target");
  fs::create_symlink(target, link);
  fs::create_symlink(Path("nowhere.bin"), dangling);
  ASSERT_TRUE(write_and_commit(link, "new").ok());
  ASSERT_TRUE(write_and_commit(dangling, "new too").ok());
  EXPECT_FALSE(fs::is_symlink(link));
  EXPECT_FALSE(fs::is_symlink(dangling));
  EXPECT_EQ(Read(link), "new");
  EXPECT_EQ(Read(dangling), "new too");
  EXPECT_EQ(Read(target), "target");
  EXPECT_FALSE(fs::exists(Path("nowhere.bin")));
}

// A copy of /dev/null or /dev/full in the test's folder, where root may make
// one: a regression then replaces the copy, not the machine's device. Others
// cannot replace /dev's nodes anyway.
std::string device(const std::string& folder, const std::string& name, unsigned minor) {
  const std::string path = folder + "/" + name;
  return ::mknod(path.c_str(), S_IFCHR | 0666, ::makedev(1, minor)) == 0 ? path : "/dev/" + name;
}

TEST_F(FileTest, CharacterDevicesAreWrittenInPlaceNeverReplaced) {
  const std::string null = device(dir_, "null", 3), full = device(dir_, "full", 7);
  ASSERT_TRUE(write_and_commit(null, "discarded").ok());
  Status s = write_and_commit(full, "no room");
  EXPECT_EQ(s.code(), ErrorCode::kIoError);
  EXPECT_THAT(s.message(), HasSubstr("cannot write '" + full + "': No space left on device"));
  // Random-access writes are assembled first, then streamed in.
  auto w = AtomicFileWriter::create(full);
  ASSERT_TRUE(w.ok()) << w.error().message;
  EXPECT_TRUE((*w)->is_stream());
  ASSERT_TRUE((*w)->write_at(10, "x", 1).ok());
  EXPECT_THAT((*w)->commit().message(), HasSubstr("cannot write '" + full + "': No space left on device"));
  // A link to a device writes through the link, which stays.
  fs::create_symlink(null, Path("null_link"));
  ASSERT_TRUE(write_and_commit(Path("null_link"), "discarded").ok());
  EXPECT_TRUE(fs::is_symlink(Path("null_link")));
  for (const std::string& dev : {null, full}) EXPECT_TRUE(fs::is_character_file(dev)) << dev;
}

// A FIFO is a stream: sequential bytes go straight through; random-access
// ones (an artifact's header comes last) arrive in order at commit.
TEST_F(FileTest, AFifoReceivesTheBytesInOrderAndStays) {
  const std::string fifo = Path("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (bool random_access : {false, true}) {
    std::string received;
    std::thread reader([&] { received = Read(fifo); });
    {
      auto w = AtomicFileWriter::create(fifo);
      ASSERT_TRUE(w.ok()) << w.error().message;
      if (random_access) {
        ASSERT_TRUE((*w)->write_at(4, "body", 4).ok());
        ASSERT_TRUE((*w)->write_at(0, "head", 4).ok());
        ASSERT_TRUE((*w)->resize(10).ok());
      } else {
        ASSERT_TRUE((*w)->write("headbody", 8).ok());
      }
      ASSERT_TRUE((*w)->commit().ok());
    }
    reader.join();
    EXPECT_EQ(received, random_access ? std::string("headbody\0\0", 10) : "headbody");
  }
  EXPECT_TRUE(fs::is_fifo(fifo));
  EXPECT_EQ(Entries(), (std::vector<std::string>{"pipe"}));
}

TEST_F(FileTest, SocketsFoldersAndBlockDevicesAreRefusedAndKept) {
  const std::string sock = Path("sock");
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", sock.c_str());
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << sock;
  auto w = AtomicFileWriter::create(sock);
  ASSERT_FALSE(w.ok());
  EXPECT_THAT(w.error().message, HasSubstr("cannot write '" + sock + "': it is a socket; qemb writes regular files"));
  EXPECT_TRUE(fs::is_socket(sock));
  ::close(fd);

  auto d = AtomicFileWriter::create(dir_);
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.error().message, HasSubstr("it is a folder; give the output a file name"));

  const std::string blk = Path("blk");
  if (::mknod(blk.c_str(), S_IFBLK | 0600, ::makedev(7, 200)) != 0) GTEST_SKIP() << "mknod needs root";
  auto b = AtomicFileWriter::create(blk);
  ASSERT_FALSE(b.ok());
  EXPECT_THAT(b.error().message, HasSubstr("it is a block device"));
  EXPECT_TRUE(fs::is_block_file(blk));
}

// A real full and read-only file system: a small tmpfs mounted for the test.
class SmallFileSystem : public FileTest {
 protected:
  void SetUp() override {
    FileTest::SetUp();
    mount_ = Path("mnt");
    fs::create_directory(mount_);
    if (::mount("tmpfs", mount_.c_str(), "tmpfs", 0, "size=64k") != 0)
      GTEST_SKIP() << "cannot mount a tmpfs (" << std::strerror(errno) << "; needs root): full-disk test skipped";
    mounted_ = true;
  }
  void TearDown() override {
    if (mounted_) ::umount2(mount_.c_str(), MNT_DETACH);
    FileTest::TearDown();
  }
  uint64_t free_bytes() const {
    struct statvfs v {};
    ::statvfs(mount_.c_str(), &v);
    return static_cast<uint64_t>(v.f_bfree) * v.f_frsize;
  }
  std::string mount_;
  bool mounted_ = false;
};

TEST_F(SmallFileSystem, AFullDiskIsACleanErrorAndLeavesNothing) {
  const std::string path = mount_ + "/out.bin";
  WriteText(path, "precious");
  const uint64_t free_before = free_bytes();
  for (bool named : {false, true}) {
    ScopedFault fault(named ? std::function<int(Call)>(no_tmpfile) : nullptr);
    Status s = write_and_commit(path, std::string(256u << 10, 'x'));
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.code(), ErrorCode::kIoError);
    EXPECT_THAT(s.message(), HasSubstr("cannot write '" + path + "': No space left on device"));
    EXPECT_EQ(Read(path), "precious");
    std::vector<std::string> left;
    for (const auto& e : fs::directory_iterator(mount_)) left.push_back(e.path().filename().string());
    EXPECT_EQ(left, (std::vector<std::string>{"out.bin"}));
    EXPECT_EQ(free_bytes(), free_before);  // the unfinished file's blocks are freed
  }
}

TEST_F(SmallFileSystem, AReadOnlyFileSystemIsACleanError) {
  const std::string path = mount_ + "/out.bin";
  WriteText(path, "precious");
  ASSERT_EQ(::mount("tmpfs", mount_.c_str(), "tmpfs", MS_REMOUNT | MS_RDONLY, "size=64k"), 0) << std::strerror(errno);
  for (bool named : {false, true}) {
    ScopedFault fault(named ? std::function<int(Call)>(no_tmpfile) : nullptr);
    Status s = write_and_commit(path, "new");
    EXPECT_THAT(s.message(), HasSubstr("cannot write '" + path + "': Read-only file system"));
    EXPECT_EQ(Read(path), "precious");
  }
}

// ---- inputs ------------------------------------------------------------------

TEST_F(FileTest, MappingAFifoFailsAtOnceInsteadOfWaitingForAWriter) {
  const std::string fifo = Path("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto m = MappedFile::open(fifo);  // blocked forever in open() before
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.error().message, HasSubstr("'" + fifo + "' is not a regular file (it is a pipe or FIFO); checkpoints "
                                           "and artifacts are memory-mapped"));
}

TEST_F(FileTest, ReadInputTakesFilesAndFifos) {
  WriteText(Path("ids.txt"), "1 2 3");
  auto file = read_input(Path("ids.txt"));
  ASSERT_TRUE(file.ok()) << file.error().message;
  EXPECT_EQ(std::string(file->begin(), file->end()), "1 2 3");

  const std::string fifo = Path("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string big(200000, '7');  // more than a pipe holds at once
  std::thread writer([&] { WriteText(fifo, big); });
  auto piped = read_input(fifo);
  writer.join();
  ASSERT_TRUE(piped.ok()) << piped.error().message;
  EXPECT_EQ(std::string(piped->begin(), piped->end()), big);

  auto folder = read_input(dir_);
  ASSERT_FALSE(folder.ok());
  EXPECT_THAT(folder.error().message, HasSubstr("cannot read '" + dir_ + "': it is a folder"));
  auto missing = read_input(Path("missing"));
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
}

}  // namespace
}  // namespace qemb
