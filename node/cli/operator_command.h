// `consensor operator ...` and `consensor evidence submit`: the operator's side of the AVS
// contracts, through the chain client.
#pragma once

#include <array>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "common/status.h"
#include "node/cli/cli_args.h"

namespace consensor::node {

int RunOperatorCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int RunEvidenceCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

// "1ether", "0.5ether", "20gwei", "123" (wei) -> wei; INVALID_ARGUMENT otherwise.
StatusOr<std::array<uint8_t, 32>> ParseEtherAmount(const std::string& text);

}  // namespace consensor::node
