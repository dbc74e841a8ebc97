#include "src/base/file_io.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "src/base/mapped_file.h"
#include "src/base/status_matchers.h"
#include "src/base/temp_files.h"

namespace fg {
namespace {

namespace fs = std::filesystem;
using ::fg::testing::IsOk;
using ::fg::testing::StatusIs;
using ::testing::HasSubstr;

std::string Temp(const std::string& name) { return ::testing::TempDir() + "/file_io_" + name; }

std::string MakeFifo(const std::string& name) {
  const std::string path = Temp(name);
  ::unlink(path.c_str());
  EXPECT_EQ(::mkfifo(path.c_str(), 0600), 0);
  return path;
}

TEST(FileIoTest, ReadsARegularFile) {
  const std::string p = Temp("plain.txt");
  std::ofstream(p) << "hello";
  FG_ASSERT_OK_AND_ASSIGN(std::string text, ReadFileToString(p));
  EXPECT_EQ(text, "hello");
  EXPECT_THAT(ReadFileToString(Temp("missing")), StatusIs(StatusCode::kNotFound, HasSubstr("missing")));
}

// A FIFO with no writer: opening it for reading used to block forever (ifstream, open without
// O_NONBLOCK). Every reader refuses it at once, as it does devices and folders.
TEST(FileIoTest, NonRegularFilesAreRefusedWithoutBlocking) {
  const std::string fifo = MakeFifo("fifo");
  EXPECT_THAT(ReadFileToString(fifo), StatusIs(StatusCode::kInvalidArgument,
                                               HasSubstr("is not a regular file (a FIFO)")));
  EXPECT_THAT(MappedFile::Open(fifo), StatusIs(StatusCode::kInvalidArgument, HasSubstr("FIFO")));
  EXPECT_THAT(ReadFileToString("/dev/zero"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("(a device)")));
  EXPECT_THAT(ReadFileToString(::testing::TempDir()),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("(a folder)")));
}

// The resident KiB of the mapping that holds `p` (/proc/self/smaps), or -1.
long MappingRssKiB(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool in = false;
  const auto at = reinterpret_cast<uintptr_t>(p);
  while (std::getline(smaps, line)) {
    unsigned long begin = 0, end = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &begin, &end) == 2 && line.find(' ') != 0 &&
        line.find(':') > line.find('-')) {
      in = begin <= at && at < end;
    } else if (in && line.rfind("Rss:", 0) == 0) {
      return std::atol(line.c_str() + 4);
    }
  }
  return -1;
}

TEST(MappedFileTest, ReleaseDropsResidentPagesAndKeepsTheBytes) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t pages = 64, size = pages * page;
  std::string pattern(size, '\0');
  for (size_t i = 0; i < size; ++i) pattern[i] = static_cast<char>(i * 31 % 251);
  const std::string p = Temp("release.bin");
  std::ofstream(p, std::ios::binary) << pattern;
  auto m = MappedFile::Open(p);
  FG_ASSERT_OK(m.status());
  const std::span<const uint8_t> bytes = (*m)->bytes();
  ASSERT_EQ(std::string(bytes.begin(), bytes.end()), pattern);  // every page read
  const long before = MappingRssKiB(bytes.data());
  ASSERT_GE(before, static_cast<long>(size / 1024)) << "smaps has no Rss for the mapping";
  // Not page-aligned: the first and last pages are only partly inside and stay.
  (*m)->Release(bytes.subspan(10, size - 20));
  const long after = MappingRssKiB(bytes.data());
  EXPECT_LE(after, static_cast<long>(2 * page / 1024)) << before << " KiB before";
  EXPECT_EQ(std::string(bytes.begin(), bytes.end()), pattern);  // read back from the file
  // Memory outside the mapping (a heap buffer) is never touched.
  std::vector<uint8_t> heap(pattern.begin(), pattern.end());
  (*m)->Release({heap.data(), heap.size()});
  EXPECT_EQ(std::string(heap.begin(), heap.end()), pattern);
  (*m)->Release(bytes.subspan(size - 1, 1));  // less than a page: nothing
  (*m)->Release({});
  EXPECT_EQ(std::string(bytes.begin(), bytes.end()), pattern);
}

TEST(FileIoTest, SizeLimitIsCheckedBeforeReading) {
  const std::string p = Temp("big.txt");
  std::ofstream(p) << std::string(1000, 'x');
  EXPECT_THAT(ReadFileToString(p, 999),
              StatusIs(StatusCode::kResourceExhausted, HasSubstr("more than the limit of 999")));
  FG_EXPECT_OK(ReadFileToString(p, 1000));
  // The default limit is kMaxInputFileBytes: a sparse file of 16 MiB + 1 is refused unread.
  const std::string sparse = Temp("sparse.bin");
  { std::ofstream(sparse) << ""; }
  fs::resize_file(sparse, kMaxInputFileBytes + 1);
  EXPECT_THAT(ReadFileToString(sparse), StatusIs(StatusCode::kResourceExhausted, HasSubstr("16 MiB")));
}

TEST(FileIoTest, ReadFdToStringIsBounded) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  ASSERT_EQ(::write(fds[1], "0123456789", 10), 10);
  ::close(fds[1]);
  EXPECT_THAT(ReadFdToString(fds[0], 5, "stdin"),
              StatusIs(StatusCode::kResourceExhausted, HasSubstr("stdin is longer")));
  ::close(fds[0]);
  ASSERT_EQ(::pipe(fds), 0);
  ASSERT_EQ(::write(fds[1], "abc", 3), 3);
  ::close(fds[1]);
  FG_ASSERT_OK_AND_ASSIGN(std::string s, ReadFdToString(fds[0], 5, "stdin"));
  EXPECT_EQ(s, "abc");
  ::close(fds[0]);
}

TEST(FileIoTest, CheckWritableFile) {
  FG_EXPECT_OK(CheckWritableFile(Temp("new.npy")));
  EXPECT_THAT(CheckWritableFile("/nonexistent/folder/x.npy"),
              StatusIs(StatusCode::kNotFound, HasSubstr("does not exist")));
  EXPECT_THAT(CheckWritableFile(::testing::TempDir()),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("not a regular file")));
}

TEST(FileIoTest, WriteFileAtomicallyLeavesNoTemporary) {
  const std::string dir = Temp("atomic");
  fs::remove_all(dir);
  fs::create_directory(dir);
  FG_ASSERT_OK(WriteFileAtomically(dir + "/out.bin", "data"));
  FG_ASSERT_OK_AND_ASSIGN(std::string text, ReadFileToString(dir + "/out.bin"));
  EXPECT_EQ(text, "data");
  EXPECT_FALSE(WriteFileAtomically(dir + "/missing/out.bin", "x").ok());
  int entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++entries;
  EXPECT_EQ(entries, 1);
}

TEST(TempPathTest, RemovedUnlessKept) {
  const std::string a = Temp("tmp_a"), b = Temp("tmp_b"), d = Temp("tmp_dir");
  std::ofstream(a) << "a";
  std::ofstream(b) << "b";
  fs::create_directories(d);
  std::ofstream(d + "/inner") << "x";
  {
    TempPath ta(a);
    TempPath tb(b);
    TempPath td(d, TempPath::Kind::kFolder);
    tb.Keep();
  }
  EXPECT_FALSE(fs::exists(a));
  EXPECT_TRUE(fs::exists(b));
  EXPECT_FALSE(fs::exists(d));
}

// SIGINT/SIGTERM while temporaries exist: the handler removes them (a folder with its files)
// and the process still dies of the signal.
TEST(TempPathTest, SignalRemovesRegisteredPathsAndReraises) {
  for (int sig : {SIGINT, SIGTERM}) {
    const std::string f = Temp("sig_file"), d = Temp("sig_dir");
    fs::remove_all(d);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::signal(sig, SIG_DFL);
      InstallTempCleanupHandlers();
      std::ofstream(f) << "partial";
      fs::create_directories(d);
      for (int i = 0; i < 50; ++i) std::ofstream(d + "/part" + std::to_string(i)) << "x";
      TempPath tf(f);
      TempPath td(d, TempPath::Kind::kFolder);
      ::raise(sig);
      ::_exit(3);  // not reached
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status)) << status;
    EXPECT_EQ(WTERMSIG(status), sig);
    EXPECT_FALSE(fs::exists(f));
    EXPECT_FALSE(fs::exists(d));
  }
}

}  // namespace
}  // namespace fg
