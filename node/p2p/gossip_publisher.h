// The one thing the consensus engine asks of gossip: publish a message to the operators.
// GossipNetwork is the real thing; unit tests record what would have been sent.
#pragma once

#include "common/sha256.h"
#include "common/status.h"
#include "consensor/v1/peer.pb.h"

namespace consensor::node {

class GossipPublisher {
 public:
  virtual ~GossipPublisher() = default;
  // Signs and sends `message` to the network; returns its id.
  virtual StatusOr<Hash256> Publish(v1::GossipMessage message) = 0;
};

}  // namespace consensor::node
