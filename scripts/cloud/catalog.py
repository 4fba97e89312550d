#!/usr/bin/python3
"""Fills the lab cloud's Keystone: the `service` project, one user per service (admin and service roles on `service`),
and the catalog (one public+internal+admin endpoint per service). Idempotent.

Usage: catalog.py SECRETS_DIR NAME=TYPE=URL...   (e.g. nova=compute=http://127.0.0.1:8774/v2.1)
Admin credentials come from the OS_* environment (admin-openrc); each service user's password is read from
SECRETS_DIR/NAME, so no password is ever in argv.
"""

import os
import sys

from keystoneauth1 import session as ks_session
from keystoneauth1.identity import v3
from keystoneclient.v3 import client as ks_client


def one(items):
    return items[0] if items else None


def main(argv):
    secrets_dir, specs = argv[1], argv[2:]
    auth = v3.Password(
        auth_url=os.environ["OS_AUTH_URL"],
        username=os.environ["OS_USERNAME"],
        password=os.environ["OS_PASSWORD"],
        project_name=os.environ["OS_PROJECT_NAME"],
        user_domain_name="Default",
        project_domain_name="Default",
    )
    ks = ks_client.Client(session=ks_session.Session(auth=auth))
    region = os.environ.get("OS_REGION_NAME", "RegionOne")
    project = one(ks.projects.list(name="service")) or ks.projects.create("service", "default")
    admin = one(ks.roles.list(name="admin"))
    # the `service` role: Keystone's identity:validate_token and Ironic's (Anvil's) rule:service_role
    service_role = one(ks.roles.list(name="service")) or ks.roles.create("service")
    for spec in specs:
        name, kind, url = spec.split("=", 2)
        with open(os.path.join(secrets_dir, name), encoding="ascii") as f:
            password = f.read().strip()
        user = one(ks.users.list(name=name))
        if user is None:
            user = ks.users.create(name, domain="default", password=password, default_project=project)
        else:
            ks.users.update(user, password=password)
        ks.roles.grant(admin, user=user, project=project)
        ks.roles.grant(service_role, user=user, project=project)
        service = one(ks.services.list(type=kind)) or ks.services.create(name, type=kind)
        have = {e.interface for e in ks.endpoints.list(service=service)}
        for interface in ("public", "internal", "admin"):
            if interface not in have:
                ks.endpoints.create(service, url, interface=interface, region=region)
        print(f"catalog: {kind} {url} (user {name})")


if __name__ == "__main__":
    main(sys.argv)
