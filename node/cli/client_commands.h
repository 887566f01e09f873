// `consensor submit|status|result|node`: the CLI side of the node's client API.
#pragma once

#include <ostream>
#include <string>

#include "node/cli/cli_args.h"

namespace consensor::node {

// The node's gRPC address: --node, else $CONSENSOR_NODE, else 127.0.0.1:7400.
std::string NodeAddress(const ParsedArgs& args);

// Each gets the arguments after its command name (cli.cc parses them with the options the
// client commands share); positional[0] is the command's first argument.
int CmdSubmit(const ParsedArgs& args, std::ostream& out, std::ostream& err);
int CmdStatus(const ParsedArgs& args, std::ostream& out, std::ostream& err);
int CmdResult(const ParsedArgs& args, std::ostream& out, std::ostream& err);
int CmdNode(const ParsedArgs& args, std::ostream& out, std::ostream& err);

}  // namespace consensor::node
