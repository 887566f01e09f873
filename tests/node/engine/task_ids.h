// Task ids in the engine and task-manager tests: tests hold the API's hex, the task manager
// takes consensus::TaskId.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "consensus/task.h"

namespace consensor::node::test_support {

inline consensus::TaskId Id(const consensus::TaskId& id) { return id; }
inline consensus::TaskId Id(const std::string& hex) {
  auto id = consensus::TaskId::FromHex(hex);
  EXPECT_TRUE(id.ok()) << id.status().ToString();
  return id.ok() ? *id : consensus::TaskId();
}

}  // namespace consensor::node::test_support
