#!/usr/bin/python3
"""An empty Networking (Neutron) API for the lab cloud, which has no Neutron.

Nova Zed reads Neutron even for servers created with `--nic none`: every server show and list asks for the
server's ports to render its security groups, and delete asks for its ports to unbind. This stub answers those
reads with empty collections, so those servers have no ports, as they would with a real Neutron, and refuses
every write (a `--nic auto` or a network id then fails as with no network at all). It does not check tokens:
it holds nothing and listens on loopback only.

Usage: network-stub.py PORT
"""

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

COLLECTIONS = {
    "ports": "ports",
    "networks": "networks",
    "subnets": "subnets",
    "security-groups": "security_groups",
    "floatingips": "floatingips",
    "extensions": "extensions",
}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def reply(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def refuse(self, status, kind, message):
        self.reply(status, {"NeutronError": {"type": kind, "message": message, "detail": ""}})

    def do_GET(self):
        path = urlsplit(self.path).path.rstrip("/")
        if path in ("", "/v2.0"):
            self.reply(200, {"versions": [{"id": "v2.0", "status": "CURRENT", "links": []}]})
            return
        parts = path.split("/")
        if len(parts) == 3 and parts[1] == "v2.0" and parts[2] in COLLECTIONS:
            self.reply(200, {COLLECTIONS[parts[2]]: []})
            return
        self.refuse(404, "NotFound", f"{path} not found (the lab cloud has no Neutron)")

    def refuse_write(self):
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        self.refuse(400, "BadRequest", "the lab cloud has no Neutron: create servers with --nic none")

    do_POST = do_PUT = do_DELETE = refuse_write

    def log_message(self, fmt, *args):
        sys.stderr.write("network-stub: %s %s\n" % (self.address_string(), fmt % args))


if __name__ == "__main__":
    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
