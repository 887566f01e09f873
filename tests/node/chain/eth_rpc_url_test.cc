// RPC URLs: parsing for the transport (http and https, ports, paths, user info) and the
// redaction every message and log line uses, so hosted-RPC credentials never get printed.
#include <gtest/gtest.h>

#include <string>

#include "node/chain/eth_rpc.h"

namespace consensor::node {
namespace {

TEST(RedactRpcUrl, KeepsSchemeHostAndPortOnly) {
  EXPECT_EQ(RedactRpcUrl("http://127.0.0.1:8545"), "http://127.0.0.1:8545");
  EXPECT_EQ(RedactRpcUrl("http://127.0.0.1:8545/"), "http://127.0.0.1:8545");
  EXPECT_EQ(RedactRpcUrl("https://rpc.example.org"), "https://rpc.example.org");
  EXPECT_EQ(RedactRpcUrl("https://[::1]:8545"), "https://[::1]:8545");
  EXPECT_EQ(RedactRpcUrl("https://mainnet.infura.io/v3/0123456789abcdef"), "https://mainnet.infura.io/***");
  EXPECT_EQ(RedactRpcUrl("https://rpc.example.org?apikey=SECRET"), "https://rpc.example.org/***");
  EXPECT_EQ(RedactRpcUrl("https://rpc.example.org/#frag"), "https://rpc.example.org/***");
  EXPECT_EQ(RedactRpcUrl("https://user:secret@127.0.0.1:9999/key123?apikey=SECRET"), "https://***@127.0.0.1:9999/***");
  EXPECT_EQ(RedactRpcUrl("http://token@node.local"), "http://***@node.local");
}

TEST(RedactRpcUrl, MalformedUrlsLeakNothing) {
  EXPECT_EQ(RedactRpcUrl(""), "***");
  EXPECT_EQ(RedactRpcUrl("rpc.example.org/v3/KEY"), "***");
  EXPECT_EQ(RedactRpcUrl("se/cret://host"), "***");  // not a scheme
  // A password with an unescaped '/' or '@' makes the host ambiguous: all of it is hidden.
  EXPECT_EQ(RedactRpcUrl("https://user:pa/ss@host:1/x"), "https://***");
  EXPECT_EQ(RedactRpcUrl("https://user:p@ss@host"), "https://***@host");
  EXPECT_EQ(RedactRpcUrl("https://host:notaport/KEY"), "https://***");
  EXPECT_EQ(RedactRpcUrl("https://ho st/KEY"), "https://***");
  EXPECT_EQ(RedactRpcUrl("https://host:99999"), "https://***");
  // An '@' in the query is not user info.
  EXPECT_EQ(RedactRpcUrl("https://host?key=a@b"), "https://host/***");
}

TEST(ParseRpcUrl, HttpAndHttpsWithDefaultPorts) {
  auto a = ParseRpcUrl("http://127.0.0.1:8545");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_FALSE(a->tls);
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, "8545");
  EXPECT_EQ(a->target, "/");
  EXPECT_FALSE(a->has_userinfo);

  auto b = ParseRpcUrl("https://rpc.example.org/v3/KEY?x=1#frag");
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_TRUE(b->tls);
  EXPECT_EQ(b->host, "rpc.example.org");
  EXPECT_EQ(b->port, "443");
  EXPECT_EQ(b->target, "/v3/KEY?x=1");

  auto c = ParseRpcUrl("HTTP://node.local");
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->tls);
  EXPECT_EQ(c->port, "80");

  auto d = ParseRpcUrl("https://[::1]:8443?apikey=K");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->host, "::1");
  EXPECT_EQ(d->port, "8443");
  EXPECT_EQ(d->target, "/?apikey=K");
}

TEST(ParseRpcUrl, UserInfoIsPercentDecoded) {
  auto u = ParseRpcUrl("https://alice:p%40ss%3Aword@rpc.example.org:8443/path");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_TRUE(u->has_userinfo);
  EXPECT_EQ(u->username, "alice");
  EXPECT_EQ(u->password, "p@ss:word");
  EXPECT_EQ(u->host, "rpc.example.org");
  EXPECT_EQ(u->port, "8443");
  EXPECT_EQ(u->target, "/path");

  auto token = ParseRpcUrl("https://token@rpc.example.org");
  ASSERT_TRUE(token.ok());
  EXPECT_EQ(token->username, "token");
  EXPECT_EQ(token->password, "");
}

TEST(ParseRpcUrl, RejectsWithoutNamingSecrets) {
  const char* bad[] = {
      "ws://127.0.0.1:8545/key123",           // scheme
      "127.0.0.1:8545",                       // no scheme
      "https://user:secret@:8545/key123",     // no host
      "https://user:secret@host:0/key123",    // port out of range
      "https://user:secret@host:70000",       // port out of range
      "https://user:secret@host:8545/key 1",  // space in the request line
      "https://user:secret@host:8545/k\r\n",  // CR LF in the request line
      "https://user:%zzsecret@host/key123",   // malformed escape
  };
  for (const char* url : bad) {
    auto parsed = ParseRpcUrl(url);
    ASSERT_FALSE(parsed.ok()) << url;
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument) << url;
    const std::string& m = parsed.status().message();
    EXPECT_EQ(m.find("secret"), std::string::npos) << m;
    EXPECT_EQ(m.find("key123"), std::string::npos) << m;
  }
}

TEST(ParseWsRpcUrl, WsAndWssOnly) {
  auto a = ParseWsRpcUrl("ws://127.0.0.1:8545");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_FALSE(a->tls);
  EXPECT_EQ(a->port, "8545");
  EXPECT_EQ(a->target, "/");
  auto b = ParseWsRpcUrl("WSS://u:p%40ss@rpc.example.org/v3/KEY");
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_TRUE(b->tls);
  EXPECT_EQ(b->port, "443");
  EXPECT_EQ(b->target, "/v3/KEY");
  EXPECT_EQ(b->password, "p@ss");
  EXPECT_EQ(RedactRpcUrl("wss://u:secret@rpc.example.org/v3/KEY"), "wss://***@rpc.example.org/***");
  for (const char* bad : {"http://127.0.0.1:8545", "https://host/key123", "ws://:1/key123", "ws://host:0",
                          "wss://user:secret@host/key 1"}) {
    auto parsed = ParseWsRpcUrl(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(parsed.status().message().find("key123"), std::string::npos) << parsed.status().message();
    EXPECT_EQ(parsed.status().message().find("secret"), std::string::npos) << parsed.status().message();
  }
  // The HTTP transport still takes only http and https.
  EXPECT_FALSE(ParseRpcUrl("ws://127.0.0.1:8545").ok());
}

TEST(NewHttpRpcTransport, ErrorsNameOnlyTheRedactedUrl) {
  HttpRpcOptions options;
  options.timeout = std::chrono::milliseconds(5000);
  // Port 1 on loopback: nothing listens there, so the connection is refused.
  for (const char* url : {"http://user:secret@127.0.0.1:1/key123?apikey=SECRET",
                          "https://user:secret@127.0.0.1:1/key123?apikey=SECRET"}) {
    auto transport = NewHttpRpcTransport(url, options);
    ASSERT_TRUE(transport.ok()) << transport.status().ToString();
    auto r = (*transport)->Call("eth_chainId", nlohmann::json::array());
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().ToString();
    const std::string& m = r.status().message();
    EXPECT_NE(m.find("://***@127.0.0.1:1/***"), std::string::npos) << m;
    EXPECT_EQ(m.find("secret"), std::string::npos) << m;
    EXPECT_EQ(m.find("SECRET"), std::string::npos) << m;
    EXPECT_EQ(m.find("key123"), std::string::npos) << m;
  }
}

TEST(NewHttpRpcTransport, UnreadableCaFileIsInvalidArgument) {
  HttpRpcOptions options;
  options.ca_file = "/nonexistent/ca.pem";
  auto transport = NewHttpRpcTransport("https://127.0.0.1:8545/key123", options);
  ASSERT_FALSE(transport.ok());
  EXPECT_EQ(transport.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(transport.status().message().find("/nonexistent/ca.pem"), std::string::npos);
  // The CA file matters to https only.
  EXPECT_TRUE(NewHttpRpcTransport("http://127.0.0.1:8545", options).ok());
}

}  // namespace
}  // namespace consensor::node
