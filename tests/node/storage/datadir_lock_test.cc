#include "node/storage/datadir_lock.h"

#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "tests/test_files.h"

namespace consensor::node {
namespace {

using testing_support::MakeTempDir;
using testing_support::ReadFile;
using testing_support::WriteFile;

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

TEST(DatadirLockTest, CreatesDirectoryAndWritesPid) {
  const std::string root = MakeTempDir("consensor_lock_test");
  const std::string datadir = root + "/a/b/datadir";
  auto lock = DatadirLock::Acquire(datadir);
  ASSERT_TRUE(lock.ok()) << lock.status().ToString();
  EXPECT_EQ((*lock)->datadir(), datadir);
  struct stat st {};
  ASSERT_EQ(::stat(datadir.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 0077, 0u);  // 0700: nothing for group and others
  ASSERT_EQ(::stat((root + "/a").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0077, 0u);
  EXPECT_EQ(ReadFile(datadir + "/LOCK"), std::to_string(::getpid()) + "\n");
}

TEST(DatadirLockTest, SecondAcquireInSameProcessFails) {
  const std::string datadir = MakeTempDir("consensor_lock_test") + "/data";
  auto first = DatadirLock::Acquire(datadir);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto second = DatadirLock::Acquire(datadir);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(second.status().message(),
            "datadir " + datadir + " is in use by another consensord (pid " + std::to_string(::getpid()) + ")");
  first->reset();  // releasing makes it available again
  auto third = DatadirLock::Acquire(datadir);
  EXPECT_TRUE(third.ok()) << third.status().ToString();
}

TEST(DatadirLockTest, DatadirThatIsAFileFails) {
  const std::string root = MakeTempDir("consensor_lock_test");
  WriteFile(root + "/file", "x");
  auto lock = DatadirLock::Acquire(root + "/file");
  ASSERT_FALSE(lock.ok());
  EXPECT_TRUE(Contains(lock.status().message(), root + "/file")) << lock.status().message();
  lock = DatadirLock::Acquire(root + "/file/sub");
  ASSERT_FALSE(lock.ok());
  EXPECT_TRUE(Contains(lock.status().message(), "not a directory")) << lock.status().message();
}

TEST(DatadirLockTest, ChildProcessHoldsLockUntilKilled) {
  const std::string datadir = MakeTempDir("consensor_lock_test") + "/data";
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(ready[0]);
    ::alarm(20);  // never outlive a broken test run
    auto lock = DatadirLock::Acquire(datadir);
    const char ok = lock.ok() ? '1' : '0';
    if (::write(ready[1], &ok, 1) != 1) ::_exit(2);
    for (;;) ::pause();
  }
  ::close(ready[1]);
  pollfd pfd{ready[0], POLLIN, 0};
  ASSERT_EQ(::poll(&pfd, 1, 10000), 1) << "child did not report";
  char ok = 0;
  ASSERT_EQ(::read(ready[0], &ok, 1), 1);
  ::close(ready[0]);
  ASSERT_EQ(ok, '1');

  auto blocked = DatadirLock::Acquire(datadir);
  ASSERT_FALSE(blocked.ok());
  EXPECT_EQ(blocked.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Contains(blocked.status().message(), "(pid " + std::to_string(child) + ")"))
      << blocked.status().message();

  ASSERT_EQ(::kill(child, SIGKILL), 0);
  int wstatus = 0;
  ASSERT_EQ(::waitpid(child, &wstatus, 0), child);
  EXPECT_TRUE(WIFSIGNALED(wstatus));

  auto acquired = DatadirLock::Acquire(datadir);
  ASSERT_TRUE(acquired.ok()) << acquired.status().ToString();
  EXPECT_EQ(ReadFile(datadir + "/LOCK"), std::to_string(::getpid()) + "\n");
}

}  // namespace
}  // namespace consensor::node
