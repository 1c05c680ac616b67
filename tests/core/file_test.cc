// Read-only mappings and write-to-temp-then-rename outputs (DESIGN §6: a failed
// command leaves no partial output file behind).
#include "qemb/file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
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

TEST_F(FileTest, UncommittedWriterLeavesNoFile) {
  const std::string path = Path("out.bin");
  {
    auto w = AtomicFileWriter::create(path);
    ASSERT_TRUE(w.ok()) << w.error().message;
    ASSERT_TRUE((*w)->write("partial", 7).ok());
    EXPECT_EQ(Entries().size(), 1u);  // the temporary exists while writing
    EXPECT_THAT(Entries()[0], HasSubstr("out.bin.tmp-"));
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
  // The target is a non-empty directory, so the final rename fails.
  const std::string path = Path("taken");
  fs::create_directory(path);
  WriteText(Path("taken/keep.txt"), "keep");
  {
    auto w = AtomicFileWriter::create(path);
    ASSERT_TRUE(w.ok()) << w.error().message;
    ASSERT_TRUE((*w)->write("x", 1).ok());
    Status s = (*w)->commit();
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.code(), ErrorCode::kIoError);
    EXPECT_THAT(s.message(), HasSubstr("cannot rename into '" + path + "'"));
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
  EXPECT_THAT(m.error().message, HasSubstr("is not a regular file"));
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

}  // namespace
}  // namespace qemb
