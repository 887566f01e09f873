// The datadir's single-writer lock, so that two daemons never write one store.
#pragma once

#include <memory>
#include <string>

#include "common/status.h"

namespace consensor::node {

// The datadir's single-writer lock: an flock on <datadir>/LOCK holding the owner's pid.
// Creates the directory (mode 0700) when missing. FAILED_PRECONDITION, naming the datadir and
// the pid of the holder, when another process has it. Released on destruction or process exit
// (including kill -9, because the kernel drops flocks with the process).
class DatadirLock {
 public:
  static StatusOr<std::unique_ptr<DatadirLock>> Acquire(const std::string& datadir);
  ~DatadirLock();
  DatadirLock(const DatadirLock&) = delete;
  DatadirLock& operator=(const DatadirLock&) = delete;
  const std::string& datadir() const { return datadir_; }

 private:
  DatadirLock(std::string datadir, int fd) : datadir_(std::move(datadir)), fd_(fd) {}
  std::string datadir_;
  int fd_ = -1;
};

}  // namespace consensor::node
