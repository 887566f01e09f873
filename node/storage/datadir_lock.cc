#include "node/storage/datadir_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

namespace consensor::node {
namespace {

std::string ErrnoText(int err) { return std::strerror(err); }

// mkdir -p; directories we create get mode 0700 because the datadir holds keys and state.
Status MakeDirs(const std::string& dir) {
  std::string path = dir;
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  size_t pos = 0;
  for (;;) {
    pos = path.find('/', pos + 1);
    const std::string prefix = path.substr(0, pos);
    if (!prefix.empty() && ::mkdir(prefix.c_str(), 0700) != 0) {
      const int err = errno;
      struct stat st {};
      if (err != EEXIST || ::stat(prefix.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
        return FailedPrecondition("cannot create datadir " + dir + ": " + prefix + ": " +
                                  (err == EEXIST ? std::string("exists and is not a directory") : ErrnoText(err)));
      }
    }
    if (pos == std::string::npos) break;
  }
  return OkStatus();
}

int64_t ReadPid(int fd) {
  char buf[32] = {};
  const ssize_t n = ::pread(fd, buf, sizeof(buf) - 1, 0);
  if (n <= 0) return -1;
  int64_t pid = 0;
  bool any = false;
  for (ssize_t i = 0; i < n && buf[i] >= '0' && buf[i] <= '9' && pid < (int64_t{1} << 40); ++i) {
    pid = pid * 10 + (buf[i] - '0');
    any = true;
  }
  return any ? pid : -1;
}

}  // namespace

StatusOr<std::unique_ptr<DatadirLock>> DatadirLock::Acquire(const std::string& datadir) {
  if (datadir.empty()) return InvalidArgument("datadir must not be empty");
  RETURN_IF_ERROR(MakeDirs(datadir));
  const std::string lock_path = datadir + "/LOCK";
  int fd;
  do {
    fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    const int err = errno;
    return FailedPrecondition("cannot open lock file " + lock_path + ": " + ErrnoText(err));
  }
  // flock locks belong to the open file description, so even a second Acquire in this
  // process conflicts, and the kernel drops the lock when the holder dies.
  int rc;
  do {
    rc = ::flock(fd, LOCK_EX | LOCK_NB);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    const int err = errno;
    if (err == EWOULDBLOCK) {
      const int64_t pid = ReadPid(fd);
      ::close(fd);
      return FailedPrecondition("datadir " + datadir + " is in use by another consensord (pid " +
                                (pid > 0 ? std::to_string(pid) : std::string("unknown")) + ")");
    }
    ::close(fd);
    return FailedPrecondition("cannot lock " + lock_path + ": " + ErrnoText(err));
  }
  const std::string pid_text = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) != 0 ||
      ::pwrite(fd, pid_text.data(), pid_text.size(), 0) != static_cast<ssize_t>(pid_text.size())) {
    const int err = errno;
    ::close(fd);
    return FailedPrecondition("cannot write lock file " + lock_path + ": " + ErrnoText(err));
  }
  return std::unique_ptr<DatadirLock>(new DatadirLock(datadir, fd));
}

DatadirLock::~DatadirLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace consensor::node
