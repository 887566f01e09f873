// consensord assembled: datadir lock, store, task manager, gRPC server (Client, health,
// reflection) and the HTTP server for /metrics and the EigenLayer node API. One struct owns
// the components; there are no globals.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "common/status.h"
#include "node/daemon/config.h"

namespace consensor::node {

class Node {
 public:
  // Takes the datadir lock, opens the store, recovers unfinished tasks and starts serving.
  // Writes the bound addresses to <datadir>/rpc.addr and <datadir>/metrics.addr (useful with
  // port 0). The config must have been through FinalizeNodeConfig.
  static StatusOr<std::unique_ptr<Node>> Start(const NodeConfig& config);
  ~Node();  // Shutdown()

  // Graceful: health goes NOT_SERVING, admission stops, running tasks drain, RPCs end, the
  // store closes cleanly. Idempotent.
  void Shutdown();

  int rpc_port() const;
  int metrics_port() const;  // 0 when metrics are disabled

  struct Impl;

 private:
  explicit Node(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace consensor::node
