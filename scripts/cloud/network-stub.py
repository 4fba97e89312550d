#!/usr/bin/python3
"""A minimal in-memory Networking (Neutron v2.0) API for the lab cloud, which has no Neutron.

Nova Zed needs Neutron even for servers created with `--nic none` (every server show and list asks for the
server's ports to render its security groups), and its Ironic driver cannot build a config drive for a
server without a network (`_get_network_metadata` subscripts the None that an empty network_info gives).
So this answers what Nova asks of Neutron for one flat network, `lab-net` with subnet 192.0.2.0/24 and the
`default` security group: ports are created, bound (binding:vif_type `other`), listed and deleted in
memory. There is no data plane: nothing is wired, and the addresses are only written into config drives.
It does not check tokens: it holds nothing secret and listens on loopback only.

Usage: network-stub.py PORT
"""

import ipaddress
import itertools
import json
import sys
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

NET_ID = "6a0b2c4e-0000-4000-8000-00000000ab01"
SUBNET_ID = "6a0b2c4e-0000-4000-8000-00000000ab02"
CIDR = ipaddress.ip_network("192.0.2.0/24")

LOCK = threading.Lock()
PORTS = {}
HOSTS = itertools.count(10)
MACS = itertools.count(1)


def network():
    return {
        "id": NET_ID, "name": "lab-net", "status": "ACTIVE", "admin_state_up": True, "shared": True,
        "subnets": [SUBNET_ID], "mtu": 1500, "router:external": False, "tenant_id": "", "project_id": "",
        "provider:network_type": "flat", "provider:physical_network": "lab", "port_security_enabled": True,
        "tags": [], "description": "",
    }  # fmt: skip


def subnet():
    return {
        "id": SUBNET_ID, "name": "lab-subnet", "network_id": NET_ID, "ip_version": 4, "cidr": str(CIDR),
        "gateway_ip": str(CIDR[1]), "enable_dhcp": False, "dns_nameservers": [], "host_routes": [],
        "allocation_pools": [{"start": str(CIDR[10]), "end": str(CIDR[250])}], "ipv6_address_mode": None,
        "ipv6_ra_mode": None, "tenant_id": "", "project_id": "", "subnetpool_id": None, "tags": [],
    }  # fmt: skip


def security_group(project):
    return {"id": "6a0b2c4e-0000-4000-8000-00000000ab03", "name": "default", "description": "default",
            "tenant_id": project, "project_id": project, "security_group_rules": [], "tags": []}  # fmt: skip


def new_port(body):
    n = next(MACS)
    port = {
        "id": str(uuid.uuid4()), "name": "", "network_id": body.get("network_id", NET_ID), "status": "DOWN",
        "admin_state_up": True, "mac_address": body.get("mac_address") or "fa:16:3e:00:%02x:%02x" % (n >> 8, n & 255),
        "fixed_ips": [{"subnet_id": SUBNET_ID, "ip_address": str(CIDR[next(HOSTS)])}],
        "device_id": "", "device_owner": "", "tenant_id": "", "project_id": "", "security_groups": [],
        "binding:host_id": "", "binding:vif_type": "unbound", "binding:vnic_type": "normal",
        "binding:profile": {}, "binding:vif_details": {}, "port_security_enabled": True,
        "allowed_address_pairs": [], "extra_dhcp_opts": [], "dns_name": "", "tags": [], "description": "",
    }  # fmt: skip
    return update_port(port, body)


def update_port(port, body):
    for key, value in body.items():
        if key in ("id", "fixed_ips", "mac_address") and key in port and port[key]:
            continue
        port[key] = value
    if port.get("tenant_id") and not port.get("project_id"):
        port["project_id"] = port["tenant_id"]
    bound = bool(port.get("binding:host_id"))
    port["binding:vif_type"] = "other" if bound else "unbound"
    port["status"] = "ACTIVE" if bound else "DOWN"
    return port


def matches(item, query):
    for key, wanted in query.items():
        if key in ("fields", "limit", "marker", "sort_key", "sort_dir"):
            continue
        value = item.get(key)
        if key == "fixed_ips":
            continue
        if isinstance(value, bool):
            value = str(value)
        if str(value) not in wanted and not (value is None and "" in wanted):
            return False
    return True


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def reply(self, status, body=None):
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def refuse(self, status, kind, message):
        self.reply(status, {"NeutronError": {"type": kind, "message": message, "detail": ""}})

    def route(self):
        url = urlsplit(self.path)
        parts = [p for p in url.path.split("/") if p]
        if parts and parts[0] == "v2.0":
            parts = parts[1:]
        parts = [p[: -len(".json")] if p.endswith(".json") else p for p in parts]
        query = {k: v for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        return parts, query

    def body(self):
        length = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(length) or b"{}") if length else {}

    def do_GET(self):
        parts, query = self.route()
        project = (query.get("tenant_id") or query.get("project_id") or [""])[0]
        with LOCK:
            collections = {
                "networks": [network()],
                "subnets": [subnet()],
                "security-groups": [security_group(project)],
                "ports": list(PORTS.values()),
                "floatingips": [],
                "extensions": [],
                "trunks": [],
                "qos": [],
            }
        if not parts:
            self.reply(200, {"versions": [{"id": "v2.0", "status": "CURRENT", "links": []}]})
        elif parts[0] == "quotas" and len(parts) == 2:
            self.reply(200, {"quota": {"port": -1, "network": -1, "subnet": -1, "security_group": -1}})
        elif parts[0] in collections:
            key = parts[0].replace("-", "_")
            items = [i for i in collections[parts[0]] if matches(i, query)]
            if len(parts) == 1:
                self.reply(200, {key: items})
                return
            found = [i for i in collections[parts[0]] if i.get("id") == parts[1]]
            if found:
                self.reply(200, {key[:-1]: found[0]})
            else:
                self.refuse(404, "NotFound", f"{parts[0]} {parts[1]} could not be found")
        else:
            self.refuse(404, "NotFound", f"{self.path} not found (the lab cloud's Networking API is minimal)")

    def do_POST(self):
        parts, _ = self.route()
        body = self.body()
        if parts == ["ports"]:
            with LOCK:
                port = new_port(body.get("port", {}))
                PORTS[port["id"]] = port
                self.reply(201, {"port": dict(port)})
            return
        self.refuse(400, "BadRequest", f"POST {self.path}: the lab cloud's Networking API creates ports only")

    def do_PUT(self):
        parts, _ = self.route()
        body = self.body()
        if len(parts) == 2 and parts[0] == "ports":
            with LOCK:
                port = PORTS.get(parts[1])
                if port is None:
                    self.refuse(404, "PortNotFound", f"Port {parts[1]} could not be found.")
                    return
                update_port(port, body.get("port", {}))
                self.reply(200, {"port": dict(port)})
            return
        self.refuse(400, "BadRequest", f"PUT {self.path}: the lab cloud's Networking API updates ports only")

    def do_DELETE(self):
        parts, _ = self.route()
        if len(parts) == 2 and parts[0] == "ports":
            with LOCK:
                if PORTS.pop(parts[1], None) is None:
                    self.refuse(404, "PortNotFound", f"Port {parts[1]} could not be found.")
                    return
            self.reply(204)
            return
        self.refuse(400, "BadRequest", f"DELETE {self.path}: the lab cloud's Networking API deletes ports only")

    def log_message(self, fmt, *args):
        sys.stderr.write("network-stub: %s\n" % (fmt % args))


if __name__ == "__main__":
    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
