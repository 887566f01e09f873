// TLS for the chain endpoint, shared by the HTTP JSON-RPC transport and the WebSocket head
// subscription (internal to node/chain: it exposes Asio and OpenSSL types).
#pragma once

#include <openssl/ssl.h>

#include <boost/asio/ssl/context.hpp>
#include <boost/system/error_code.hpp>

#include <memory>
#include <string>

#include "common/status.h"

namespace consensor::node {

// A client context that verifies the server's chain against `ca_file` (PEM) or, when empty,
// the system store; TLS 1.2 at least. An unreadable ca_file is INVALID_ARGUMENT.
StatusOr<std::unique_ptr<boost::asio::ssl::context>> NewRpcTlsContext(const std::string& ca_file);

// SNI for host names (not IP literals, RFC 6066), and the name or address the certificate must
// be issued for (RFC 2818 / RFC 6125, checked by OpenSSL during the handshake). `shown` is the
// redacted URL for messages.
Status SetRpcTlsPeerName(SSL* ssl, const std::string& host, const std::string& shown);

// The Status for a failed handshake: DEADLINE_EXCEEDED, FAILED_PRECONDITION for a certificate
// that does not verify (with a hint about the CA file), UNAVAILABLE otherwise.
Status RpcTlsHandshakeError(SSL* ssl, const boost::system::error_code& ec, const std::string& shown,
                            const std::string& ca_file);

// "Basic <base64(user:password)>": how user info in an RPC URL is sent.
std::string RpcBasicAuthorization(const std::string& username, const std::string& password);

}  // namespace consensor::node
