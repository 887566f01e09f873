#include "node/cli/chain_flags.h"

#include <cstdlib>
#include <iterator>
#include <optional>

#include "common/file_io.h"
#include "node/keys/keystore.h"

namespace consensor::node {

namespace {

constexpr const char* kDevnetKeys[kDevnetKeyCount] = {
    "ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80",
    "59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d",
    "5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a",
    "7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6",
    "47e179ec197488593b187f80a00eb0da91f1b9d0b13f8733639f19c30a34926a",
    "8b3a350cf5c34c9194ca85829a2df0ec3153be0318b5e2d3348e872092edffba",
    "92db14e403b83dfe3df233f83dfa3a0d7096f21ca9b0d6d6b8d88b2b4ec1564e",
    "4bbbf85ce3377467afe5d46f804f221813b2bb87f24d81f60f1fcdbf7cbf4356",
    "dbda1821b80551c9d65939329250298aa3472ba22feea921c0cf5d620ea67b97",
    "2a871d0798f97d79848a013d4936a73bf4cc922c825d33c1cf7073dff6d409c6",
};

StatusOr<std::optional<Secp256k1Secret>> LoadKey(const ParsedArgs& a, uint64_t chain_id, bool need_key) {
  if (auto n = a.Option("--devnet-key")) {
    if (a.Option("--keystore")) return InvalidArgument("give either --keystore or --devnet-key, not both");
    ASSIGN_OR_RETURN(int64_t index, ParseIntOption(*n, "--devnet-key", 0, kDevnetKeyCount - 1));
    // The keys are public: anywhere but a local devnet they would hand the stake to anyone.
    if (chain_id != kDevnetChainId) {
      return FailedPrecondition("--devnet-key uses public test keys and works only on chain " +
                                std::to_string(kDevnetChainId) + "; this RPC serves chain " + std::to_string(chain_id));
    }
    ASSIGN_OR_RETURN(auto key, DevnetKey(static_cast<size_t>(index)));
    return std::optional<Secp256k1Secret>(key);
  }
  if (auto file = a.Option("--keystore")) {
    ASSIGN_OR_RETURN(auto password,
                     ReadPassword(a.Option("--password-file").value_or(""), a.Option("--password-env").value_or("")));
    auto decrypted = DecryptKeystoreFile(*file, password);
    if (!decrypted.ok()) return decrypted.status();
    return std::optional<Secp256k1Secret>(decrypted->secret);
  }
  if (need_key) return InvalidArgument("this command signs a transaction: give --keystore FILE or --devnet-key N");
  return std::optional<Secp256k1Secret>();
}

}  // namespace

StatusOr<Secp256k1Secret> DevnetKey(size_t index) {
  if (index >= kDevnetKeyCount) {
    return InvalidArgument("devnet key " + std::to_string(index) + " does not exist (0.." +
                           std::to_string(kDevnetKeyCount - 1) + ")");
  }
  return Hash256FromHex(kDevnetKeys[index]);
}

StatusOr<ChainSession> OpenChainSession(const ParsedArgs& a, bool need_key) {
  std::string url = a.Option("--rpc").value_or("");
  if (url.empty()) {
    const char* env = std::getenv("CONSENSOR_RPC");
    url = env && *env ? env : "http://127.0.0.1:8545";
  }
  HttpRpcOptions http;
  http.ca_file = a.Option("--rpc-ca-file").value_or("");
  if (http.ca_file.empty()) {
    const char* env = std::getenv("CONSENSOR_RPC_CA_FILE");
    if (env) http.ca_file = env;
  }
  ASSIGN_OR_RETURN(auto transport, NewHttpRpcTransport(url, http));
  ChainSession s;
  s.rpc = std::make_unique<EthRpc>(std::move(transport));
  ASSIGN_OR_RETURN(uint64_t chain_id, s.rpc->ChainId());
  const std::string deployment_path =
      a.Option("--deployment").value_or("contracts/deployments/" + std::to_string(chain_id) + ".json");
  ASSIGN_OR_RETURN(Deployment deployment, LoadDeployment(deployment_path));
  ASSIGN_OR_RETURN(std::optional<Secp256k1Secret> key, LoadKey(a, chain_id, need_key));
  s.chain = std::make_unique<ChainClient>(s.rpc.get(), deployment, key);
  RETURN_IF_ERROR(s.chain->CheckChain());
  return s;
}

std::string FormatEther(const Uint256& wei) {
  std::string d = Uint256ToDecimal(wei);
  if (d.size() <= 18) d = std::string(19 - d.size(), '0') + d;
  std::string whole = d.substr(0, d.size() - 18), frac = d.substr(d.size() - 18);
  while (!frac.empty() && frac.back() == '0') frac.pop_back();
  return whole + (frac.empty() ? "" : "." + frac) + " ETH";
}

}  // namespace consensor::node
