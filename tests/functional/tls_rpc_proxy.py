#!/usr/bin/python3
"""An HTTPS front for a plain-HTTP JSON-RPC node (anvil), for the https RPC tests.

Serves TLS with the given certificate and key on a free loopback port, writes that port to
--port-file once it listens, and forwards each POST body to --upstream, answering with the
upstream's status and body. With --require-basic USER:PASSWORD a request without that HTTP
Basic authorization gets 401. Requests are not logged (their paths hold the test's fake keys).
Runs until killed. Uses only the standard library (Debian's /usr/bin/python3).
"""

import argparse
import base64
import http.server
import os
import ssl
import sys
import urllib.error
import urllib.request


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cert", required=True, help="PEM server certificate (chain)")
    parser.add_argument("--key", required=True, help="PEM private key of the certificate")
    parser.add_argument("--upstream", required=True, help="http://host:port of the JSON-RPC node")
    parser.add_argument("--port-file", required=True, help="where to write the port once listening")
    parser.add_argument("--require-basic", default="", help="USER:PASSWORD every request must carry")
    args = parser.parse_args()
    expected_auth = ""
    if args.require_basic:
        expected_auth = "Basic " + base64.b64encode(args.require_basic.encode()).decode()

    class Handler(http.server.BaseHTTPRequestHandler):
        # HTTP/1.0: one request per connection, the response framed by Content-Length.
        protocol_version = "HTTP/1.0"

        def do_POST(self) -> None:
            if expected_auth and self.headers.get("Authorization", "") != expected_auth:
                self.reply(401, b'{"error":"unauthorized"}')
                return
            length = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(length)
            request = urllib.request.Request(args.upstream, data=body, headers={"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(request, timeout=60) as response:
                    self.reply(response.status, response.read())
            except urllib.error.HTTPError as e:
                self.reply(e.code, e.read())
            except OSError as e:
                self.reply(502, str(e).encode())

        def reply(self, status: int, data: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *log_args) -> None:  # noqa: A002 (the base class's name)
            pass

    class Server(http.server.ThreadingHTTPServer):
        daemon_threads = True

        def handle_error(self, request, client_address) -> None:
            # A client that rejects the certificate aborts the handshake: expected in the tests.
            sys.stderr.write("connection error: %s\n" % (sys.exc_info()[1],))

    server = Server(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(args.cert, args.key)
    # The handshake runs in each request's thread, so a client that never completes one cannot
    # stall the accept loop.
    server.socket = context.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % server.server_address[1])
    os.replace(tmp, args.port_file)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
