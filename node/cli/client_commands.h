// `consensor submit|status|result|trace|node`: the CLI side of the node's client API.
#pragma once

#include <chrono>
#include <ostream>
#include <string>

#include "common/status.h"
#include "consensor/v1/node.pb.h"
#include "node/api/client.h"
#include "node/cli/cli_args.h"

namespace consensor::node {

// The node's gRPC address: --node, else $CONSENSOR_NODE, else 127.0.0.1:7400.
std::string NodeAddress(const ParsedArgs& args);
// A client of the node at NodeAddress, with the API key of --api-key-file FILE or
// $CONSENSOR_API_KEY (none when neither is set).
StatusOr<NodeClient> ConnectNode(const ParsedArgs& args,
                                 std::chrono::milliseconds call_timeout = std::chrono::seconds(60));

// What a node says about a task must hang together before its outputs are trusted: the task's
// request hashes to `expected_task_id` (the id the user asked about), and the outputs' tensor
// hashes form the result root the node reports and, when the task is certified, the root the
// certificate's signers signed. DATA_LOSS naming the first mismatch. (Each downloaded output is
// then checked against its tensor hash, so the bytes are bound to the signed root.)
Status CheckTaskAgainstCertificate(const v1::Task& task, const std::string& expected_task_id);

// Each gets the arguments after its command name (cli.cc parses them with the options the
// client commands share); positional[0] is the command's first argument.
int CmdSubmit(const ParsedArgs& args, std::ostream& out, std::ostream& err);
int CmdStatus(const ParsedArgs& args, std::ostream& out, std::ostream& err);
int CmdResult(const ParsedArgs& args, std::ostream& out, std::ostream& err);
// Asks the node to recompute a finished task's execution trace (GetTrace).
int CmdTrace(const ParsedArgs& args, std::ostream& out, std::ostream& err);
int CmdNode(const ParsedArgs& args, std::ostream& out, std::ostream& err);

}  // namespace consensor::node
