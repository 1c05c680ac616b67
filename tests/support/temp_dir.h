// Temporary folders for tests that are removed whatever the outcome: a RAII
// folder, and a per-test folder removed when the current test ends (passed,
// failed or skipped), for helpers that return a path rather than an object.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

namespace qemb::testing {

// The current test's suite and name, safe as one path component.
inline std::string current_test_slug() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = std::string(info ? info->test_suite_name() : "t") + "_" + (info ? info->name() : "x");
  for (char& c : name)
    if (c == '/') c = '_';
  return name;
}

// A fresh folder, removed with everything in it when the object goes.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "qemb_") {
    path_ = std::filesystem::path(::testing::TempDir()) /
            (prefix + current_test_slug() + "_" + std::to_string(::getpid()));
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;  // never throw from a destructor
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

namespace detail {

// Removes the folders handed out by per_test_dir when their test ends.
class TempDirReaper : public ::testing::EmptyTestEventListener {
 public:
  static TempDirReaper& instance() {
    static TempDirReaper* reaper = [] {
      auto* r = new TempDirReaper;  // owned by gtest's listener list once appended
      ::testing::UnitTest::GetInstance()->listeners().Append(r);
      return r;
    }();
    return *reaper;
  }
  void add(std::string dir) { dirs_.push_back(std::move(dir)); }
  void OnTestEnd(const ::testing::TestInfo&) override {
    for (const std::string& d : dirs_) {
      std::error_code ec;
      std::filesystem::remove_all(d, ec);
    }
    dirs_.clear();
  }

 private:
  std::vector<std::string> dirs_;
};

}  // namespace detail

// A fresh folder "<TempDir>/<prefix><suite>_<test>_<pid>", removed when the
// current test ends, on success and on failure.
inline std::string per_test_dir(const std::string& prefix) {
  const std::string dir = (std::filesystem::path(::testing::TempDir()) /
                           (prefix + current_test_slug() + "_" + std::to_string(::getpid())))
                              .string();
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  std::filesystem::create_directories(dir);
  detail::TempDirReaper::instance().add(dir);
  return dir;
}

}  // namespace qemb::testing
