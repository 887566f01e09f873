// `consensor submit|status|result|node`: the CLI side of the node's client API.
#pragma once

#include <ostream>

#include "node/cli_args.h"

namespace consensor::node {

int CmdSubmit(const ParsedArgs& args, std::ostream& out, std::ostream& err);
int CmdStatus(const ParsedArgs& args, std::ostream& out, std::ostream& err);
int CmdResult(const ParsedArgs& args, std::ostream& out, std::ostream& err);
int CmdNode(const ParsedArgs& args, std::ostream& out, std::ostream& err);

}  // namespace consensor::node
