// Where outputs go and where inputs come from, for every command that writes
// a file (compile, run, fakequant, eval --report, export-onnx): devices, FIFOs,
// standard output, folders, sockets, links, a full and a read-only file
// system, long names and modes; token files from pipes; run's shapes, JSON and
// streaming.
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "qemb/compiler.h"
#include "qemb/npy.h"
#include "qemb/runtime.h"
#include "qemb/safetensors.h"
#include "support/test_util.h"

namespace qemb {
namespace {

namespace fs = std::filesystem;
using qemb::testing::read_text;
using qemb::testing::run_command;
using qemb::testing::TempDir;

const std::string kQemb = QEMB_CLI_PATH;
constexpr int64_t kVocab = 512, kDim = 64;
const char kPrecious[] = "precious: an earlier run's output";

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string npy_text(const std::string& descr, const std::vector<int64_t>& shape, const void* data, size_t size) {
  auto e = encode_npy(descr, shape, data, size);
  EXPECT_TRUE(e.ok()) << e.error().message;
  return e.ok() ? std::string(e->begin(), e->end()) : std::string();
}

// One command that writes a file: its arguments with {out} for the output.
struct Writer {
  std::string name;
  std::string args;
};

class Outputs : public ::testing::Test {
 protected:
  void SetUp() override {
    ckpt_ = dir_.file("model.safetensors");
    art_ = dir_.file("model.qemb");
    ids_ = dir_.file("ids.txt");
    auto table = qemb::testing::spread_table(kVocab, kDim, 3);
    std::vector<uint8_t> bytes(table.size() * 4);
    std::memcpy(bytes.data(), table.data(), bytes.size());
    ASSERT_TRUE(write_safetensors(ckpt_, {}, {{"model.embed_tokens.weight", "F32", {kVocab, kDim}, bytes}}).ok());
    std::string ids;
    for (int i = 0; i < kVocab; ++i) ids += std::to_string((i * 7) % kVocab) + "\n";
    write_file(ids_, ids);
    auto r = run_command(q("compile " + ckpt_ + " --qnn-sdk-version 2.48 --scheme 16a8w --mode materialize --quiet -o " + art_));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    writers_ = {
        {"compile", "compile " + ckpt_ + " --qnn-sdk-version 2.48 --scheme 16a8w --mode materialize -o {out}"},
        {"run", "run " + art_ + " --tokens-file " + ids_ + " -o {out}"},
        {"fakequant", "fakequant " + ckpt_ + " --scheme 16a8w --qnn-sdk-version 2.48 -o {out}"},
        {"eval --report", "eval " + ckpt_ + " --qnn-sdk-version 2.48 --report {out}"},
    };
#ifdef QEMB_HAVE_ONNX
    writers_.push_back({"export-onnx", "export-onnx " + ckpt_ + " --qnn-sdk-version 2.48 -o {out}"});
#endif
    // What each command writes to a regular file: the reference for streams.
    for (const Writer& w : writers_) {
      const std::string ref = dir_.file("ref_" + std::to_string(reference_.size()));
      auto out = run_command(q(with_out(w, ref)));
      ASSERT_EQ(out.exit_code, 0) << out.out;
      reference_[w.name] = read_text(ref);
      fs::remove(ref);
    }
  }

  static std::string q(const std::string& args) { return kQemb + " " + args; }
  static std::string with_out(const Writer& w, const std::string& out) {
    std::string s = w.args;
    s.replace(s.find("{out}"), 5, out);
    return s;
  }
  std::vector<std::string> entries(const std::string& folder) const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(folder)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

  TempDir dir_;
  std::string ckpt_, art_, ids_;
  std::vector<Writer> writers_;
  std::map<std::string, std::string> reference_;
};

// ---- outputs that are not regular files ---------------------------------------

// Copies of /dev/null and /dev/full in the test's folder where root may make
// them, so that a regression replaces a copy, not the machine's device.
std::string device(const TempDir& dir, const std::string& name, unsigned minor) {
  const std::string path = dir.file(name);
  return ::mknod(path.c_str(), S_IFCHR | 0666, ::makedev(1, minor)) == 0 ? path : "/dev/" + name;
}

TEST_F(Outputs, DevicesAreWrittenInPlaceAndNeverReplaced) {
  const std::string null = device(dir_, "null", 3), full = device(dir_, "full", 7);
  for (const Writer& w : writers_) {
    SCOPED_TRACE(w.name);
    auto n = run_command(q(with_out(w, null)));
    EXPECT_EQ(n.exit_code, 0) << n.out;
    auto f = run_command(q(with_out(w, full)));  // replaced the device node before
    EXPECT_EQ(f.exit_code, 1) << f.out;
    EXPECT_NE(f.out.find("qemb: error: I/O error: cannot write '" + full + "': No space left on device"),
              std::string::npos)
        << f.out;
    EXPECT_TRUE(fs::is_character_file(full));
    EXPECT_TRUE(fs::is_character_file(null));
  }
}

TEST_F(Outputs, DashIsStandardOutputAndCarriesExactlyTheFile) {
  for (const Writer& w : writers_) {
    SCOPED_TRACE(w.name);
    const std::string got = dir_.file("stdout.bin");
    auto r = run_command("{ " + q(with_out(w, "-")) + " > " + got + "; }");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_TRUE(read_text(got) == reference_[w.name]) << "standard output differs from the file output";
    fs::remove(got);
    // /dev/stdout redirected to a file is written through, never replaced
    // (it was, by a file). A link of our own to /proc/self/fd/1 stands in for
    // it, so that a regression cannot replace the machine's /dev/stdout.
    const std::string stdout_link = dir_.file("stdout_link");
    fs::remove(stdout_link);
    fs::create_symlink("/proc/self/fd/1", stdout_link);
    r = run_command("{ " + q(with_out(w, stdout_link)) + " > " + got + "; }");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_TRUE(read_text(got) == reference_[w.name]) << "/dev/stdout differs from the file output";
    EXPECT_TRUE(fs::is_symlink(stdout_link));
    fs::remove(got);
  }
  // The summary moved to standard error: stdout stays the file alone.
  auto both = run_command(q("eval " + ckpt_ + " --qnn-sdk-version 2.48 --report - --json"));
  EXPECT_EQ(both.exit_code, 1);
  EXPECT_NE(both.out.find("--report - and --json both write to standard output"), std::string::npos) << both.out;
}

TEST_F(Outputs, AFifoIsAPipeAndStays) {
  const std::string fifo = dir_.file("pipe"), got = dir_.file("got.bin");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const Writer& w : writers_) {
    SCOPED_TRACE(w.name);
    auto r = run_command("cat " + fifo + " > " + got + " & " + q(with_out(w, fifo)) + "; s=$?; wait; exit $s");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_TRUE(read_text(got) == reference_[w.name]) << "the FIFO's reader got other bytes";
    EXPECT_TRUE(fs::is_fifo(fifo));
  }
}

TEST_F(Outputs, FoldersAndSocketsAreRefusedAndKept) {
  const std::string folder = dir_.file("folder"), sock = dir_.file("sock");
  fs::create_directory(folder);
  write_file(folder + "/keep.txt", "keep");
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", sock.c_str());
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  for (const Writer& w : writers_) {
    SCOPED_TRACE(w.name);
    auto d = run_command(q(with_out(w, folder)));
    EXPECT_EQ(d.exit_code, 1);
    EXPECT_NE(d.out.find("cannot write '" + folder + "': it is a folder; give the output a file name"),
              std::string::npos)
        << d.out;
    auto s = run_command(q(with_out(w, sock)));
    EXPECT_EQ(s.exit_code, 1);
    EXPECT_NE(s.out.find("cannot write '" + sock + "': it is a socket; qemb writes regular files, character devices"),
              std::string::npos)
        << s.out;
    EXPECT_TRUE(fs::is_socket(sock));
    EXPECT_EQ(entries(folder), std::vector<std::string>{"keep.txt"});
  }
  ::close(fd);
}

TEST_F(Outputs, LinksAreReplacedAndWhatTheyPointToIsLeftAlone) {
  const std::string target = dir_.file("target"), link = dir_.file("link"), dangling = dir_.file("dangling");
  for (const Writer& w : writers_) {
    SCOPED_TRACE(w.name);
    write_file(target, kPrecious);
    fs::remove(link);
    fs::remove(dangling);
    fs::create_symlink(target, link);
    fs::create_symlink(dir_.file("nowhere"), dangling);
    ASSERT_EQ(run_command(q(with_out(w, link))).exit_code, 0);
    ASSERT_EQ(run_command(q(with_out(w, dangling))).exit_code, 0);
    EXPECT_FALSE(fs::is_symlink(link));
    EXPECT_FALSE(fs::is_symlink(dangling));
    EXPECT_TRUE(read_text(link) == reference_[w.name]);
    EXPECT_TRUE(read_text(dangling) == reference_[w.name]);
    EXPECT_EQ(read_text(target), kPrecious);
    EXPECT_FALSE(fs::exists(dir_.file("nowhere")));
  }
}

TEST_F(Outputs, LongNamesAndModes) {
  for (const Writer& w : writers_) {
    SCOPED_TRACE(w.name);
    const std::string longest = dir_.file(std::string(250, 'n') + ".out");  // 254 bytes, with the existing one
    write_file(longest, kPrecious);
    auto r = run_command("umask 077; " + q(with_out(w, longest)));
    ASSERT_EQ(r.exit_code, 0) << r.out;  // the ".tmp-XXXXXX" suffix made this ENAMETOOLONG
    EXPECT_TRUE(read_text(longest) == reference_[w.name]);
    fs::remove(longest);
    // A new file follows the umask; a replaced one keeps its mode (was always 0644).
    const std::string fresh = dir_.file("fresh"), kept = dir_.file("kept");
    ASSERT_EQ(run_command("umask 077; " + q(with_out(w, fresh))).exit_code, 0);
    EXPECT_EQ(fs::status(fresh).permissions(), fs::perms(0600));
    write_file(kept, kPrecious);
    fs::permissions(kept, fs::perms(0640));
    ASSERT_EQ(run_command("umask 022; " + q(with_out(w, kept))).exit_code, 0);
    EXPECT_EQ(fs::status(kept).permissions(), fs::perms(0640));
    fs::remove(fresh);
    fs::remove(kept);
  }
}

// A real small tmpfs, full and then read-only. Needs root (mount); skipped with
// a message otherwise.
TEST_F(Outputs, FullAndReadOnlyFileSystemsAreCleanErrors) {
  const std::string mnt = dir_.file("mnt");
  fs::create_directory(mnt);
  if (::mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=64k") != 0)
    GTEST_SKIP() << "cannot mount a tmpfs (" << std::strerror(errno) << "; needs root): full-disk test skipped";
  struct Unmount {
    std::string at;
    ~Unmount() { ::umount2(at.c_str(), MNT_DETACH); }
  } unmount{mnt};
  const std::string out = mnt + "/out";
  write_file(out, kPrecious);
  write_file(mnt + "/filler", std::string(52u << 10, 'f'));  // leaves less than any of the outputs
  for (bool read_only : {false, true}) {
    if (read_only) {
      ASSERT_EQ(::mount("tmpfs", mnt.c_str(), "tmpfs", MS_REMOUNT | MS_RDONLY, "size=64k"), 0);
    }
    for (const Writer& w : writers_) {
      SCOPED_TRACE(w.name + (read_only ? ", read-only" : ", full"));
      auto r = run_command(q(with_out(w, out)));
      EXPECT_EQ(r.exit_code, 1) << r.out;
      const std::string why = read_only ? "Read-only file system" : "No space left on device";
      EXPECT_NE(r.out.find("qemb: error: I/O error: cannot write '" + out + "': " + why), std::string::npos) << r.out;
      EXPECT_EQ(read_text(out), kPrecious);
      EXPECT_EQ(entries(mnt), (std::vector<std::string>{"filler", "out"}));
    }
  }
}

// Ctrl-C or SIGTERM in the middle of a compile (here: from its progress
// callback, while the artifact is half written) leaves no file: the artifact
// has no name until it is complete. A left-over "*.tmp-*" file before.
TEST_F(Outputs, ASignalDuringACompileLeavesNothing) {
  const std::string out = dir_.file("sig.qemb");
  for (int sig : {SIGINT, SIGTERM}) {
    for (bool existing : {false, true}) {
      if (existing) write_file(out, kPrecious);
      const auto before = entries(dir_.path().string());
      const pid_t child = ::fork();
      ASSERT_GE(child, 0);
      if (child == 0) {
        CompileOptions o;
        o.qnn_sdk_version = "2.48";
        o.threads = 1;
        o.progress = [sig](const char*, int64_t done, int64_t) {
          if (done > 0) ::raise(sig);
        };
        auto c = compile_checkpoint(ckpt_, o, out);
        ::_exit(c.ok() ? 3 : 4);  // never reached: the signal ends the process
      }
      int status = 0;
      ASSERT_EQ(::waitpid(child, &status, 0), child);
      ASSERT_TRUE(WIFSIGNALED(status)) << "exit " << WEXITSTATUS(status);
      EXPECT_EQ(WTERMSIG(status), sig);
      EXPECT_EQ(entries(dir_.path().string()), before);
      if (existing) {
        EXPECT_EQ(read_text(out), kPrecious);
      }
      fs::remove(out);
    }
  }
}

// ---- inputs -------------------------------------------------------------------

TEST_F(Outputs, AFifoAsACheckpointOrArtifactIsRefusedAtOnce) {
  const std::string fifo = dir_.file("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // `timeout`: before, each of these waited in open() for a writer forever.
  std::vector<std::string> commands = {
      "run " + fifo + " --tokens 1", "inspect " + fifo, "bench " + fifo, "compile " + fifo + " -o " + dir_.file("o"),
      "eval " + fifo, "fakequant " + fifo + " --scheme 16a8w -o " + dir_.file("o")};
#ifdef QEMB_HAVE_ONNX
  commands.push_back("export-onnx " + fifo + " -o " + dir_.file("o"));
#endif
  for (const std::string& args : commands) {
    SCOPED_TRACE(args);
    auto r = run_command("timeout 60 " + q(args));
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find("'" + fifo + "' is not a regular file (it is a pipe or FIFO); checkpoints and artifacts "
                         "are memory-mapped, so they must be regular files"),
              std::string::npos)
        << r.out;
  }
}

TEST_F(Outputs, TokenFilesComeFromStdinPipesAndFifos) {
  auto expected = run_command(q("run " + art_ + " --tokens 5,6,7"));
  ASSERT_EQ(expected.exit_code, 0) << expected.out;
  auto from_stdin = run_command("printf '5 6\\n7\\n' | " + q("run " + art_ + " --tokens-file -"));
  EXPECT_EQ(from_stdin.out, expected.out);
  auto substituted = run_command("bash -c \"" + q("run " + art_ + " --tokens-file <(seq 5 7)") + "\"");
  EXPECT_EQ(substituted.out, expected.out);
  const std::string fifo = dir_.file("ids_pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto fifo_run = run_command("(seq 5 7 > " + fifo + " &); " + q("run " + art_ + " --tokens-file " + fifo));
  EXPECT_EQ(fifo_run.out, expected.out);
  // A .npy through a pipe too, and as calibration tokens.
  const int64_t ids[3] = {5, 6, 7};
  write_file(dir_.file("ids.npy"), npy_text("<i8", {3}, ids, sizeof(ids)));
  auto npy_pipe = run_command("cat " + dir_.file("ids.npy") + " | " + q("run " + art_ + " --tokens-file -"));
  EXPECT_EQ(npy_pipe.out, expected.out);
  auto calib = run_command("seq 0 9 | " + q("compile " + ckpt_ + " --calibration-tokens - --quiet -o " +
                                            dir_.file("c.qemb")));
  EXPECT_EQ(calib.exit_code, 0) << calib.out;
}

// ---- run: shapes, JSON, empty lists, standard output, bounded memory --------------

NpyArray load_npy(const std::string& path) {
  auto a = read_npy(path);
  EXPECT_TRUE(a.ok()) << a.error().message;
  return a.ok() ? *a : NpyArray{};
}

TEST_F(Outputs, RunKeepsTheTokenArraysShape) {
  const int32_t batch[2][3] = {{1, 2, 3}, {4, 5, 6}};
  write_file(dir_.file("batch.npy"), npy_text("<i4", {2, 3}, batch, sizeof(batch)));
  const int64_t one = 9;
  write_file(dir_.file("one.npy"), npy_text("<i8", {}, &one, sizeof(one)));
  ASSERT_EQ(run_command(q("run " + art_ + " --tokens-file " + dir_.file("batch.npy") + " -o " + dir_.file("b.npy")))
                .exit_code,
            0);
  ASSERT_EQ(run_command(q("run " + art_ + " --tokens-file " + dir_.file("one.npy") + " --dequantize -o " +
                          dir_.file("o.npy")))
                .exit_code,
            0);
  ASSERT_EQ(run_command(q("run " + art_ + " --tokens 1,2,3,4,5,6 -o " + dir_.file("flat.npy"))).exit_code, 0);
  const NpyArray b = load_npy(dir_.file("b.npy")), o = load_npy(dir_.file("o.npy")),
                 flat = load_npy(dir_.file("flat.npy"));
  EXPECT_EQ(b.shape, (std::vector<int64_t>{2, 3, kDim}));  // was [6, D]
  EXPECT_EQ(o.shape, (std::vector<int64_t>{kDim}));        // was [1, D]
  EXPECT_EQ(o.dtype, "<f4");
  EXPECT_EQ(flat.shape, (std::vector<int64_t>{6, kDim}));
  EXPECT_EQ(b.data, flat.data);
  auto rt = EmbeddingRuntime::load(art_);
  ASSERT_TRUE(rt.ok());
  std::vector<float> row(kDim);
  ASSERT_TRUE((*rt)->lookup_dequantized(std::vector<int64_t>{9}, row.data()).ok());
  EXPECT_EQ(std::memcmp(o.data.data(), row.data(), row.size() * 4), 0);
}

TEST_F(Outputs, RunJsonPrintsRowsNestedAsTheOutput) {
  auto rt = EmbeddingRuntime::load(art_);
  ASSERT_TRUE(rt.ok());
  std::vector<uint16_t> rows(4 * kDim);
  ASSERT_TRUE((*rt)->lookup(std::vector<int64_t>{1, 2, 3, 4}, rows.data()).ok());
  auto row_json = [&](int i) {
    return nlohmann::json(std::vector<uint16_t>(rows.begin() + i * kDim, rows.begin() + (i + 1) * kDim));
  };
  auto flat = run_command(q("run " + art_ + " --tokens 1,2,3,4 --json"));
  ASSERT_EQ(flat.exit_code, 0) << flat.out;
  EXPECT_EQ(nlohmann::json::parse(flat.out), nlohmann::json({row_json(0), row_json(1), row_json(2), row_json(3)}));
  const int64_t batch[2][2] = {{1, 2}, {3, 4}};
  write_file(dir_.file("batch.npy"), npy_text("<i8", {2, 2}, batch, sizeof(batch)));
  auto nested = run_command(q("run " + art_ + " --json --tokens-file " + dir_.file("batch.npy")));
  ASSERT_EQ(nested.exit_code, 0) << nested.out;
  EXPECT_EQ(nlohmann::json::parse(nested.out),
            nlohmann::json({nlohmann::json({row_json(0), row_json(1)}), nlohmann::json({row_json(2), row_json(3)})}));
  const int64_t one = 3;
  write_file(dir_.file("one.npy"), npy_text("<i8", {}, &one, sizeof(one)));
  auto single = run_command(q("run " + art_ + " --json --tokens-file " + dir_.file("one.npy")));
  EXPECT_EQ(nlohmann::json::parse(single.out), row_json(2));
  auto deq = run_command(q("run " + art_ + " --json --dequantize --tokens 1"));
  auto parsed = nlohmann::json::parse(deq.out);
  ASSERT_EQ(parsed.size(), 1u);
  ASSERT_EQ(parsed[0].size(), static_cast<size_t>(kDim));
  EXPECT_TRUE(parsed[0][0].is_number_float());
}

// Bad input for run's own flags and token lists: an error, and an existing
// output left as it was (an empty list wrote a [0, D] file over it).
TEST_F(Outputs, RunBadInputTable) {
  const int64_t none = 0;
  write_file(dir_.file("empty.txt"), "# only a comment\n");
  write_file(dir_.file("empty.npy"), npy_text("<i8", {0}, &none, 0));
  write_file(dir_.file("empty2d.npy"), npy_text("<i8", {2, 0}, &none, 0));
  const std::string out = dir_.file("out.npy");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--tokens-file " + dir_.file("empty.txt") + " -o " + out, "the token list is empty: there are no ids to look up"},
      {"--tokens-file " + dir_.file("empty.npy") + " -o " + out, "the token list is empty"},
      {"--tokens-file " + dir_.file("empty2d.npy") + " -o " + out, "the token list is empty"},
      {"--tokens-file /dev/null -o " + out, "the token list is empty"},
      {"--tokens 1 --json -o " + out, "--json prints the rows; -o writes them to a .npy: give one or the other"},
      {"--tokens-file " + dir_.path().string() + " -o " + out, "it is a folder; give a regular file, a pipe"},
      {"--tokens 1,512 -o -", "token id 512 at position 1 is past the last row"},
  };
  for (const auto& [args, message] : cases) {
    SCOPED_TRACE(args);
    write_file(out, kPrecious);
    auto r = run_command("{ " + q("run " + art_ + " " + args) + " > " + dir_.file("stdout.bin") + "; }");
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find("qemb: error: "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(message), std::string::npos) << "expected: " << message << "\ngot: " << r.out;
    EXPECT_EQ(read_text(out), kPrecious);
    EXPECT_EQ(read_text(dir_.file("stdout.bin")), "");
  }
}

TEST_F(Outputs, AFailedWriteToStandardOutputFailsTheCommand) {
  for (const std::string& args : {"run " + art_ + " --tokens 1,2", "run " + art_ + " --tokens 1 --json",
                                  "inspect " + art_, "inspect " + art_ + " --json",
                                  "eval " + ckpt_ + " --qnn-sdk-version 2.48", "run " + art_ + " --tokens 1 -o -"}) {
    SCOPED_TRACE(args);
    auto r = run_command("{ " + q(args) + " > /dev/full; }");  // exited 0 before
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_TRUE(r.out.find("cannot write to standard output: No space left on device") != std::string::npos ||
                r.out.find("cannot write standard output: No space left on device") != std::string::npos)
        << r.out;
  }
}

// 200k ids of a 4096-wide table are 1.6 GB of output: run holds a chunk of
// it at a time, so it fits in a 1 GiB address space (it allocated the whole
// output and aborted before).
TEST_F(Outputs, RunStreamsAnOutputLargerThanItsMemory) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "sanitizers reserve more address space than the limit this test sets";
#endif
  const int64_t wide = 4096;
  auto table = qemb::testing::spread_table(4, wide, 1);
  std::vector<uint8_t> bytes(table.size() * 4);
  std::memcpy(bytes.data(), table.data(), bytes.size());
  const std::string ckpt = dir_.file("wide.safetensors"), art = dir_.file("wide.qemb");
  ASSERT_TRUE(write_safetensors(ckpt, {}, {{"model.embed_tokens.weight", "F32", {4, wide}, bytes}}).ok());
  ASSERT_EQ(run_command(q("compile " + ckpt + " --qnn-sdk-version 2.48 --quiet -o " + art)).exit_code, 0);
  std::vector<int32_t> ids(200000);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i % 4);
  write_file(dir_.file("ids.npy"), npy_text("<i4", {static_cast<int64_t>(ids.size())}, ids.data(), ids.size() * 4));
  auto r = run_command("{ ulimit -v 1048576; " + q("run " + art + " --tokens-file " + dir_.file("ids.npy")) +
                       " -o -; echo $? > " + dir_.file("rc") + "; } | tail -c 16384 > " + dir_.file("tail.bin"));
  EXPECT_EQ(read_text(dir_.file("rc")), "0\n") << r.out;
  // The last two rows are ids 2 and 3.
  auto rt = EmbeddingRuntime::load(art);
  ASSERT_TRUE(rt.ok());
  std::vector<uint16_t> last(2 * wide);
  ASSERT_TRUE((*rt)->lookup(std::vector<int64_t>{2, 3}, last.data()).ok());
  EXPECT_EQ(read_text(dir_.file("tail.bin")), std::string(reinterpret_cast<const char*>(last.data()), last.size() * 2));
}

}  // namespace
}  // namespace qemb
