// The flooding half of fault mode `refuse-everywhere` (tests and devnets only; docs/SECURITY.md,
// section 9): a registered operator that sends every peer as many requests as the protocol lets
// any member send. Each round it keeps `streams_per_peer` signed GetBlob streams open at every
// peer and never reads them (the blobs its announcements named, which peers hold, else random
// names), and sends `calls_per_round` GetTask calls for made-up task ids, `pulls_per_round`
// signed Pull requests from the start of the peer's log and `info_calls_per_round` GetNodeInfo
// calls, all signed as this operator when it has the signer. What the peers' budgets refuse is
// counted on their side (consensor_p2p_streams_refused_total, consensor_p2p_calls_refused_total
// and consensor_rpc_requests_total), and in this node's log.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "consensor/v1/node.pb.h"
#include "consensor/v1/peer.pb.h"

namespace consensor::node {

struct PeerFlooderOptions {
  std::chrono::milliseconds round{100};
  int streams_per_peer = 24;             // more than the default p2p.max_blob_streams_per_operator
  std::chrono::milliseconds hold{2000};  // a stream is cancelled and opened again after this
  int calls_per_round = 4;               // GetTask calls per peer per round
  // Pull requests per peer per round: more than p2p.max_pull_requests_per_second_per_ip (100/s)
  // when the calls are quick, far more than p2p.max_pull_requests_per_second_per_operator.
  int pulls_per_round = 32;
  int info_calls_per_round = 24;  // GetNodeInfo calls per peer per round
};

// How the flooder signs its unary requests (empty: sent unsigned).
struct PeerFlooderSigners {
  std::function<Status(v1::GetTaskRequest*)> task;
  std::function<Status(v1::GetNodeInfoRequest*)> node_info;
  std::function<Status(v1::PullRequest*)> pull;
};

class PeerFlooder {
 public:
  PeerFlooder(PeerFlooderOptions options, std::function<std::vector<std::string>()> peers,
              std::function<std::vector<std::string>()> blobs, std::function<Status(v1::GetBlobRequest*)> sign,
              PeerFlooderSigners signers = {});
  ~PeerFlooder();  // Stop()
  void Start();
  void Stop();  // idempotent; cancels every stream it holds

 private:
  void Run();

  const PeerFlooderOptions options_;
  const std::function<std::vector<std::string>()> peers_;
  const std::function<std::vector<std::string>()> blobs_;
  const std::function<Status(v1::GetBlobRequest*)> sign_;
  const PeerFlooderSigners signers_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace consensor::node
