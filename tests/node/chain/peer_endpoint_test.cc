// Registered endpoints (node/chain/chain_view.h): anyone can register any string and every node
// dials it, so only host:port is accepted, by `consensor operator register` and by the view of
// the operator set (which does not dial the others).
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "node/chain/chain_view.h"
#include "node/cli/operator_command.h"

namespace consensor::node {
namespace {

TEST(PeerEndpointTest, OnlyHostAndADialablePortAreAccepted) {
  for (const char* good : {"127.0.0.1:7400", "node.example.org:443", "[::1]:7401", "localhost:1"}) {
    EXPECT_TRUE(CheckPeerEndpoint(good).ok()) << good << ": " << CheckPeerEndpoint(good).ToString();
  }
  for (const std::string& bad : {std::string(""), std::string("127.0.0.1"), std::string("127.0.0.1:0"),
                                 std::string("host:99999"), std::string("http://host:80/path"), std::string("::1:7400"),
                                 std::string("ho st:7400"), std::string("a\n:7400"), std::string(300, 'a') + ":7400"}) {
    Status s = CheckPeerEndpoint(bad);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << "'" << bad << "' was accepted";
  }
}

TEST(PeerEndpointTest, RegisterRefusesAnEndpointThatIsNotHostPortBeforeTouchingTheChain) {
  std::ostringstream out, err;
  const int code = RunOperatorCommand(
      {"register", "--stake", "1ether", "--endpoint", "http://evil/../x", "--rpc", "http://127.0.0.1:1"}, out, err);
  EXPECT_EQ(code, 2) << err.str();
  EXPECT_NE(err.str().find("--endpoint"), std::string::npos) << err.str();
}

}  // namespace
}  // namespace consensor::node
