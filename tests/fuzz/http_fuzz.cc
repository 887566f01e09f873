// The HTTP request parser of the /metrics and node API endpoint (node/telemetry/http_server.h),
// which anyone who can reach the port talks to: the bytes of one connection, answered as the
// server would (AnswerHttpRequest shares the parser limits and response rules with it).
#include <string_view>

#include "node/telemetry/http_server.h"
#include "tests/fuzz/fuzz_target.h"

using namespace consensor;
using namespace consensor::node;

namespace {

HttpResponse Handle(const std::string& path) {
  CNSR_FUZZ_CHECK(!path.empty() && path[0] == '/' && path.find_first_of("?#") == std::string::npos);
  if (path == "/metrics") return {200, "text/plain; version=0.0.4", "consensor_up 1\n"};
  if (path == "/eigen/node/health") return {200, "text/plain", ""};
  if (path == "/eigen/node") return {200, "application/json", "{\"node_name\":\"consensord\"}"};
  if (path == "/no-content") return {204, "", ""};
  return {404, "text/plain; charset=utf-8", "not found\n"};
}

}  // namespace

CNSR_FUZZ_TARGET(http) {
  HttpServerOptions options;
  options.max_header_bytes = 1024;  // small caps, so inputs can reach them
  options.max_body_bytes = 2048;
  const std::string response =
      AnswerHttpRequest(std::string_view(reinterpret_cast<const char*>(data), size), &Handle, options);
  if (response.empty()) return 0;
  CNSR_FUZZ_CHECK(response.rfind("HTTP/1.", 0) == 0);
  // Nothing of the request may reach the response's header section but what the rules allow:
  // exactly one status line and header block, ended by an empty line.
  CNSR_FUZZ_CHECK(response.find("\r\n\r\n") != std::string::npos);
  return 0;
}

CNSR_FUZZ_SEEDS(http) {
  return {fuzz::Bytes("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:9100\r\nUser-Agent: Prometheus/2.45\r\nAccept: "
                      "text/plain\r\n\r\n"),
          fuzz::Bytes("HEAD /eigen/node/health HTTP/1.0\r\n\r\n"),
          fuzz::Bytes("GET /eigen/node?x=1#frag HTTP/1.1\r\nConnection: close\r\n\r\n"),
          fuzz::Bytes("POST /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello"),
          fuzz::Bytes("GET /metrics HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"),
          fuzz::Bytes("GET http://example.com/ HTTP/1.1\r\n\r\n"),
          fuzz::Bytes("GET /no-content HTTP/1.1\r\n\r\n")};
}
