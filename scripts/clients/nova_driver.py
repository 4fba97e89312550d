#!/usr/bin/python3
"""Drives Nova's Ironic virt driver (Debian's python3-nova, Zed) against an Anvil conductor.

Usage: /usr/bin/python3 scripts/clients/nova_driver.py --endpoint http://127.0.0.1:PORT
       /usr/bin/python3 scripts/clients/nova_driver.py --endpoint URL --agent-node UUID --image-url URL

Everything that talks to the Bare Metal API is Nova's own code (its ironicclient wrapper and its
openstacksdk connection, noauth with an endpoint override). Only what is not Ironic is stood in for:
Nova's database (Instance/Service objects, block device mappings), Neutron (security groups,
network_info), Glance (image metadata) and placement (a ProviderTree in memory). The config drive is
built by Nova's own code (InstanceMetadata + ConfigDriveBuilder, genisoimage) and sent as Nova sends it.
Each step prints one line, `STEP <name> PASS|FAIL <reason>`; the exit status is 1 when any step
failed. Steps run in order and later ones depend on earlier ones (a step whose prerequisite failed is
reported as FAIL with "skipped: ...").

With --agent-node the harness drives one node that already is `available` (a real agent deploys it):
spawn with a network and a config drive, then destroy; image metadata names --image-url as the image,
which is how Nova's image id becomes the node's instance_info.image_source.
"""

import argparse
import logging
import re
import sys
import time
import traceback
import uuid
from unittest import mock

import nova.conf
from nova import context as nova_context
from nova import objects
from nova.compute import provider_tree
from nova.compute import task_states
from nova.compute import vm_states
from nova.network import model as network_model

CONF = nova.conf.CONF
RESOURCE_CLASS = "baremetal-small"
IMAGE_ID = "1b2a7f28-5e6a-4a0e-9d7c-2e3a4b5c6d7e"


def configure(endpoint, poll_interval=0):
    CONF(args=[], project="nova", default_config_files=[])
    CONF.set_override("host", "anvil-nova-harness")
    CONF.set_override("auth_type", "none", group="ironic")
    CONF.set_override("endpoint_override", endpoint, group="ironic")
    # NOTE: Nova polls with FixedIntervalLoopingCall(api_retry_interval); the fake driver has no delays,
    # so poll without sleeping and allow enough polls for a fake clean. A real agent takes seconds.
    CONF.set_override("api_retry_interval", poll_interval, group="ironic")
    CONF.set_override("api_max_retries", 2000, group="ironic")
    # Nova builds config drives with genisoimage (Debian: genisoimage), as a real compute host does.
    CONF.set_override("config_drive_format", "iso9660")


class HttpErrors(logging.Handler):
    """Collects the requests the Bare Metal API refused (urllib3 logs each one at DEBUG).

    A failed step names them, because Nova's clean-up often masks the first refusal with its own.
    """

    PATTERN = re.compile(r'"(GET|POST|PUT|PATCH|DELETE) (\S+) HTTP/1\.1" ([45]\d\d)')

    def __init__(self):
        super().__init__(level=logging.DEBUG)
        self.seen = []

    def emit(self, record):
        match = self.PATTERN.search(record.getMessage())
        if match:
            self.seen.append(f"{match.group(1)} {match.group(2).split('?')[0]} -> {match.group(3)}")

    def take(self):
        seen, self.seen = self.seen, []
        return seen


class Harness:
    def __init__(self, endpoint, debug=False, agent_node=None, image_url=None):
        configure(endpoint, poll_interval=0.2 if agent_node else 0)
        self.agent_node = agent_node
        self.image_id = image_url or IMAGE_ID
        objects.register_all()
        from nova.virt.ironic import driver as ironic_driver

        self.ironic_driver = ironic_driver
        self.ctx = nova_context.get_admin_context()
        self.instances = {}
        self.results = []
        self.failed_names = set()
        self.virtapi = mock.Mock(name="virtapi")
        self.driver = ironic_driver.IronicDriver(self.virtapi)
        self.nodes = {}
        self.http_errors = HttpErrors()
        urllib3_log = logging.getLogger("urllib3.connectionpool")
        urllib3_log.addHandler(self.http_errors)
        urllib3_log.setLevel(logging.DEBUG)
        urllib3_log.propagate = debug
        # names are unique per run, so the harness can run twice against one conductor
        self.run_id = uuid.uuid4().hex[:6]

    # --- stand-ins for Nova's database and Neutron ------------------------------------------------

    def patches(self):
        harness = self
        service = objects.Service(host=CONF.host, binary="nova-compute", disabled=False)

        # Nova calls it both positionally and as get_by_uuid(ctx, uuid=..., expected_attrs=...)
        def get_by_uuid(_ctx, instance_uuid=None, *args, uuid=None, **kwargs):
            return harness.instances[instance_uuid or uuid]

        def get_uuids_by_host(_ctx, host):
            return [i.uuid for i in harness.instances.values() if i.host == host]

        return [
            mock.patch.object(objects.ServiceList, "get_all_computes_by_hv_type", return_value=[service]),
            mock.patch("nova.servicegroup.API.service_is_up", return_value=True),
            mock.patch.object(objects.Instance, "get_by_uuid", side_effect=get_by_uuid),
            mock.patch.object(objects.InstanceList, "get_uuids_by_host", side_effect=get_uuids_by_host),
            mock.patch.object(objects.Instance, "save", autospec=True),
            mock.patch.object(objects.Instance, "refresh", autospec=True),
            mock.patch(
                "nova.network.security_group_api.get_instance_security_groups", return_value=[]
            ),
            mock.patch.object(objects.BlockDeviceMappingList, "get_by_instance_uuid",
                              return_value=objects.BlockDeviceMappingList(objects=[])),
        ]

    def instance(self, node_uuid, name, config_drive=False):
        flavor = objects.Flavor(
            name="baremetal", memory_mb=8192, vcpus=4, root_gb=100, ephemeral_gb=0, swap=0,
            extra_specs={"resources:CUSTOM_BAREMETAL_SMALL": "1"}, flavorid="bm", id=1,
            rxtx_factor=1.0, vcpu_weight=0, is_public=True, disabled=False,
        )
        inst = objects.Instance(
            context=self.ctx, id=len(self.instances) + 1, uuid=str(uuid.uuid4()), node=node_uuid, host=CONF.host,
            display_name=name, hostname=name, project_id="p1", user_id="u1",
            vm_state=vm_states.BUILDING, task_state=task_states.SPAWNING,
            flavor=flavor, config_drive="True" if config_drive else "",
            metadata={}, system_metadata={}, launch_index=0, reservation_id="r-1", key_name=None,
            key_data=None, user_data="I2Nsb3VkLWNvbmZpZwo=", availability_zone="nova",
            # NOTE: Nova's database fills these from the block device mappings; the metadata service
            # (and so the config drive) reads default_swap_device.
            default_ephemeral_device=None, default_swap_device=None,
            root_device_name="/dev/sda", image_ref=self.image_id, launched_at=None, created_at=None,
            ec2_ids=objects.EC2Ids(instance_id="i-00000001", ami_id="ami-00000001", kernel_id=None,
                                   ramdisk_id=None),
            keypairs=objects.KeyPairList(objects=[]), device_metadata=None, numa_topology=None,
            info_cache=objects.InstanceInfoCache(network_info=network_model.NetworkInfo([])),
            trusted_certs=None, services=objects.ServiceList(objects=[]),
            tags=objects.TagList(objects=[]), vcpu_model=None, pci_devices=None,
        )
        self.instances[inst.uuid] = inst
        return inst

    @staticmethod
    def network_info(mac):
        subnet = network_model.Subnet(
            cidr="192.0.2.0/24", dns=[], gateway=network_model.IP(address="192.0.2.1", type="gateway"),
            ips=[network_model.FixedIP(address="192.0.2.10")], routes=[], version=4,
        )
        network = network_model.Network(id=str(uuid.uuid4()), bridge="br-int", label="tenant",
                                        subnets=[subnet])
        vif = network_model.VIF(id=str(uuid.uuid4()), address=mac, network=network, type="other",
                                details={}, vnic_type="baremetal", active=True)
        return network_model.NetworkInfo([vif])

    def image_meta(self):
        return objects.ImageMeta.from_dict({"id": self.image_id, "name": "anvil-image", "disk_format": "raw",
                                            "container_format": "bare", "properties": {}})

    # --- the steps -----------------------------------------------------------------------------------

    def step(self, name, fn, needs=()):
        missing = [n for n in needs if n in self.failed_names]
        if missing:
            self.report(name, False, "skipped: needs " + ",".join(missing))
            return None
        self.http_errors.take()
        try:
            value = fn()
            self.report(name, True, "" if value is None else str(value))
            return value
        except Exception as error:  # noqa: BLE001 -- every failure becomes one STEP line
            reason = f"{type(error).__name__}: {error}".replace("\n", " ")
            refused = self.http_errors.take()
            if refused:
                reason = f"[http: {'; '.join(dict.fromkeys(refused))}] {reason}"
            logging.getLogger("harness").debug("step %s failed:\n%s", name, traceback.format_exc())
            self.report(name, False, reason)
            return None

    def report(self, name, ok, reason):
        if not ok:
            self.failed_names.add(name)
        self.results.append((name, ok))
        line = f"STEP {name} {'PASS' if ok else 'FAIL'} {reason}".rstrip()
        print(line[:1500], flush=True)

    def enroll(self):
        """Three fake-hardware nodes brought to available through openstacksdk.

        Each has a port; the "net" node has a second one, free for the interface attached later.
        """
        conn = self.driver.ironic_connection
        if self.agent_node:
            self.nodes["net"] = self.agent_node
            return self.agent_node
        for index, key in enumerate(("plain", "net", "fail")):
            node = conn.create_node(
                driver="fake-hardware", name=f"nova-{key}-{self.run_id}", resource_class=RESOURCE_CLASS,
                properties={"cpus": 4, "memory_mb": 8192, "local_gb": 100, "cpu_arch": "x86_64"},
            )
            conn.create_port(node_uuid=node.id, address=self.mac(index))
            if key == "net":
                conn.create_port(node_uuid=node.id, address=self.mac(0x11))
            conn.set_node_provision_state(node, "manage", wait=True, timeout=60)
            conn.set_node_provision_state(node, "provide", wait=True, timeout=60)
            # NOTE: fake-hardware has no power state until a power action (Ironic's): Nova's resource tracker
            # reports no resources for a node whose power_state is None, so devstack powers fake nodes off
            conn.set_node_power_state(node, "power off", wait=True, timeout=60)
            self.nodes[key] = node.id
        return ",".join(self.nodes.values())

    def mac(self, index):
        return f"52:54:{self.run_id[0:2]}:{self.run_id[2:4]}:{self.run_id[4:6]}:{index:02x}"

    def check(self, condition, message):
        if not condition:
            raise AssertionError(message)

    def node(self, key):
        return self.driver.ironic_connection.get_node(self.nodes[key])

    def run(self):
        with_patches = self.patches()
        for p in with_patches:
            p.start()
        try:
            if self.agent_node:
                self.run_agent_steps()
            else:
                self.run_steps()
        finally:
            for p in with_patches:
                p.stop()
        passed = sum(1 for _, ok in self.results if ok)
        print(f"SUMMARY {passed}/{len(self.results)} passed", flush=True)
        return 0 if passed == len(self.results) else 1

    def run_agent_steps(self):
        """One node a real agent deploys: spawn with a network and a config drive, then destroy."""
        s = self.step
        s("enroll", self.enroll)
        net = self.instance(self.agent_node, "net", config_drive=True)
        net_info = self.network_info(self.port_macs(self.agent_node)[0])
        s("spawn_with_network_and_configdrive", lambda: self.spawn_with_network(net, net_info),
          needs=["enroll"])
        s("destroy_with_network", lambda: self.destroy(net, net_info),
          needs=["spawn_with_network_and_configdrive"])

    def run_steps(self):
        d = self.driver
        s = self.step
        s("enroll", self.enroll)
        s("init_host", lambda: d.init_host(CONF.host), needs=["enroll"])
        s("get_available_nodes", self.get_available_nodes, needs=["enroll"])
        s("get_available_resource", self.get_available_resource, needs=["get_available_nodes"])
        s("update_provider_tree", self.update_provider_tree, needs=["get_available_nodes"])

        plain = self.instance(self.nodes.get("plain"), "plain")
        s("spawn", lambda: self.spawn(plain, None), needs=["enroll"])
        s("list_instances", lambda: self.list_instances(plain), needs=["spawn"])
        s("instance_exists", lambda: self.check(d.instance_exists(plain), "not found"), needs=["spawn"])
        s("get_info", lambda: d.get_info(plain, use_cache=False).state, needs=["spawn"])
        s("power_off", lambda: self.power(plain, "off"), needs=["spawn"])
        s("power_on", lambda: self.power(plain, "on"), needs=["spawn"])
        s("reboot_hard", lambda: self.reboot(plain, "HARD"), needs=["spawn"])
        s("reboot_soft", lambda: self.reboot(plain, "SOFT"), needs=["spawn"])
        s("rebuild", lambda: self.rebuild(plain), needs=["spawn"])
        s("rescue", lambda: self.rescue(plain), needs=["spawn"])
        s("unrescue", lambda: self.unrescue(plain), needs=["rescue"])
        s("trigger_crash_dump", lambda: d.trigger_crash_dump(plain), needs=["spawn"])
        s("destroy", lambda: self.destroy(plain, None), needs=["spawn"])

        net = self.instance(self.nodes.get("net"), "net", config_drive=True)
        net_info = self.network_info(self.mac(1))
        s("spawn_with_network_and_configdrive", lambda: self.spawn_with_network(net, net_info),
          needs=["enroll"])
        extra = self.network_info(self.mac(0x11))
        s("attach_interface", lambda: self.attach(net, extra[0]),
          needs=["spawn_with_network_and_configdrive"])
        s("detach_interface", lambda: self.detach(net, extra[0]), needs=["attach_interface"])
        s("destroy_with_network", lambda: self.destroy(net, net_info),
          needs=["spawn_with_network_and_configdrive"])

        fail = self.instance(self.nodes.get("fail"), "fail")
        fail_info = self.network_info(self.mac(2))
        s("failed_spawn_cleanup", lambda: self.failed_spawn(fail, fail_info), needs=["enroll"])

    def get_available_nodes(self):
        nodes = self.driver.get_available_nodes()
        missing = set(self.nodes.values()) - set(nodes)
        self.check(not missing, f"nodes not offered to Nova: {sorted(missing)}")
        return len(nodes)

    def get_available_resource(self):
        info = self.driver.get_available_resource(self.nodes["plain"])
        self.check(info["resource_class"] == RESOURCE_CLASS, f"resource_class {info['resource_class']}")
        self.check(info["hypervisor_hostname"] == self.nodes["plain"], "hypervisor_hostname")
        return f"vcpus={info['vcpus']} memory_mb={info['memory_mb']}"

    def update_provider_tree(self):
        node_uuid = self.nodes["plain"]
        tree = provider_tree.ProviderTree()
        tree.new_root(node_uuid, node_uuid)
        self.driver.update_provider_tree(tree, node_uuid)
        inventory = tree.data(node_uuid).inventory
        self.check(inventory.get("CUSTOM_BAREMETAL_SMALL", {}).get("total") == 1,
                   f"inventory {inventory}")
        self.check(inventory["CUSTOM_BAREMETAL_SMALL"]["reserved"] == 0, "an available node is reserved")
        return "CUSTOM_BAREMETAL_SMALL total=1 reserved=0"

    def list_instances(self, inst):
        names = self.driver.list_instances()
        uuids = self.driver.list_instance_uuids()
        # Nova lists instance names (instance-%08x from the database id), not display names
        self.check(inst.name in names, f"list_instances {names}")
        self.check(inst.uuid in uuids, f"list_instance_uuids {uuids}")
        return f"{len(names)} instance(s)"

    def spawn(self, inst, network_info):
        self.driver.prepare_for_spawn(inst)
        self.driver.spawn(self.ctx, inst, self.image_meta(), injected_files=[], admin_password="pw",
                          allocations={}, network_info=network_info)
        node = self.driver.ironic_connection.get_node(inst.node)
        self.check(node.provision_state == "active", f"provision_state {node.provision_state}")
        self.check(node.instance_id == inst.uuid, "instance_uuid not set")
        self.check(node.instance_info.get("image_source") == self.image_id,
                   f"instance_info {node.instance_info}")
        inst.vm_state = vm_states.ACTIVE
        inst.task_state = None
        return node.provision_state

    def spawn_with_network(self, inst, network_info):
        """As the compute manager builds a server with a network: VIFs plugged first, then spawn.

        Nova's manager calls prepare_networks_before_block_device_mapping (which attaches every VIF)
        before spawn, and clean_networks_preparation when the build fails.
        """
        started = time.monotonic()
        try:
            self.driver.prepare_networks_before_block_device_mapping(inst, network_info)
            self.spawn(inst, network_info)
        except Exception:
            self.driver.clean_networks_preparation(inst, network_info)
            raise
        seconds = time.monotonic() - started
        vif = network_info[0]
        holders = self.vif_holders(inst.node)
        self.check(holders.get(vif["id"]) == vif["address"],
                   f"VIF {vif['id']} not recorded on the port with {vif['address']}: {holders}")
        self.check(self.vif_ids(inst) == {vif["id"]}, "GET /vifs does not list the VIF")
        node = self.driver.ironic_connection.get_node(inst.node)
        # Ironic stores the config drive in instance_info and masks it on the API
        self.check(node.instance_info.get("configdrive") == "******",
                   f"config drive not stored: {node.instance_info.get('configdrive')!r}")
        return f"active vif={vif['id']} mac={vif['address']} seconds={seconds:.2f}"

    def vif_holders(self, node_uuid):
        """VIF id -> MAC of the port recording it in internal_info.tenant_vif_port_id (Ironic's key)."""
        holders = {}
        for port in self.driver.ironic_connection.ports(node_uuid=node_uuid, details=True):
            vif = (port.internal_info or {}).get("tenant_vif_port_id")
            if vif:
                holders[vif] = port.address
        return holders

    def port_macs(self, node_uuid):
        return sorted(port.address for port in self.driver.ironic_connection.ports(node_uuid=node_uuid))

    def power(self, inst, target):
        if target == "off":
            self.driver.power_off(inst)
        else:
            self.driver.power_on(self.ctx, inst, None)
        state = self.driver.ironic_connection.get_node(inst.node).power_state
        self.check(state == f"power {target}", f"power_state {state}")
        return state

    def reboot(self, inst, kind):
        self.driver.reboot(self.ctx, inst, None, kind)
        state = self.driver.ironic_connection.get_node(inst.node).power_state
        self.check(state == "power on", f"power_state {state}")
        return state

    def rebuild(self, inst):
        inst.task_state = task_states.REBUILDING
        self.driver.rebuild(self.ctx, inst, self.image_meta(), [], "pw", {}, [], None, None,
                            network_info=None, preserve_ephemeral=False)
        inst.task_state = None
        node = self.driver.ironic_connection.get_node(inst.node)
        self.check(node.provision_state == "active", f"provision_state {node.provision_state}")
        self.check(node.instance_info.get("preserve_ephemeral") == "False", "preserve_ephemeral not sent")
        return node.provision_state

    def rescue(self, inst):
        self.driver.rescue(self.ctx, inst, None, self.image_meta(), "rescue-pw", None)
        return self.driver.ironic_connection.get_node(inst.node).provision_state

    def unrescue(self, inst):
        self.driver.unrescue(self.ctx, inst)
        return self.driver.ironic_connection.get_node(inst.node).provision_state

    def vif_ids(self, inst):
        response = self.driver.ironic_connection.get(f"/nodes/{inst.node}/vifs",
                                                     microversion="1.28")
        self.check(response.status_code == 200, f"GET /v1/nodes/{{node}}/vifs: {response.status_code}")
        return {vif["id"] for vif in response.json()["vifs"]}

    def attach(self, inst, vif):
        self.driver.attach_interface(self.ctx, inst, self.image_meta(), vif)
        self.check(vif["id"] in self.vif_ids(inst), "VIF not attached")
        holders = self.vif_holders(inst.node)
        self.check(holders.get(vif["id"]) == vif["address"],
                   f"VIF {vif['id']} not recorded on the free port {vif['address']}: {holders}")
        self.check(len(holders) == 2, f"the first VIF moved or went: {holders}")
        return vif["id"]

    def detach(self, inst, vif):
        self.driver.detach_interface(self.ctx, inst, vif)
        self.check(vif["id"] not in self.vif_ids(inst), "VIF still attached")
        holders = self.vif_holders(inst.node)
        self.check(vif["id"] not in holders, f"a port still records {vif['id']}: {holders}")
        self.check(len(holders) == 1, f"detach touched the other VIF: {holders}")
        return vif["id"]

    def destroy(self, inst, network_info):
        inst.task_state = task_states.DELETING
        self.driver.destroy(self.ctx, inst, network_info)
        node = self.driver.ironic_connection.get_node(inst.node)
        self.check(node.instance_id is None, f"instance_uuid still {node.instance_id}")
        self.check(node.provision_state in ("available", "cleaning", "clean wait"),
                   f"provision_state {node.provision_state}")
        self.check(not node.instance_info, f"instance_info still {node.instance_info}")
        if network_info:
            self.check(not self.vif_ids(inst), "VIFs left attached")
            holders = self.vif_holders(inst.node)
            self.check(not holders, f"ports still record VIFs: {holders}")
        self.check(not self.driver.instance_exists(inst), "instance still exists")
        return node.provision_state

    def failed_spawn(self, inst, network_info):
        """A spawn with a network that fails before Ironic deploys (the node fails validation), then
        Nova's clean-up.

        The driver undoes its own PATCH (remove /instance_info and /instance_uuid); the compute
        manager's _build_resources_cleanup then calls clean_networks_preparation (detaching the VIFs)
        and failed_spawn_cleanup, which finds nothing left and returns.
        """
        conn = self.driver.ironic_connection
        self.driver.prepare_for_spawn(inst)
        self.driver.prepare_networks_before_block_device_mapping(inst, network_info)
        vif = network_info[0]
        self.check(self.vif_holders(inst.node).get(vif["id"]) == vif["address"], "VIF not attached")
        # NOTE: an ipmi node with no BMC address fails power validation, as a mis-enrolled node does. The
        # driver change takes ipmi's default interfaces (reset_interfaces, 1.45): fake-hardware's are not ipmi's.
        conn.patch_node(
            inst.node,
            [{"op": "replace", "path": "/driver", "value": "ipmi"},
             {"op": "replace", "path": "/driver_info", "value": {}}],
            reset_interfaces=True,
        )
        try:
            self.driver.spawn(self.ctx, inst, self.image_meta(), injected_files=[], admin_password=None,
                              allocations={}, network_info=None)
        except Exception as error:  # noqa: BLE001 -- the spawn is meant to fail
            self.check("failed to validate" in str(error), f"spawn failed for another reason: {error}")
        else:
            raise AssertionError("spawn on an invalid node succeeded")
        self.driver.clean_networks_preparation(inst, network_info)
        self.driver.failed_spawn_cleanup(inst)
        self.check(not self.vif_holders(inst.node), "a port still records the VIF")
        node = conn.get_node(inst.node)
        self.check(node.instance_id is None, f"instance_uuid still {node.instance_id}")
        self.check(not node.instance_info, f"instance_info still {node.instance_info}")
        self.check(node.provision_state == "available", f"provision_state {node.provision_state}")
        return "cleaned up"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--endpoint", required=True, help="the conductor's base URL (noauth, loopback)")
    parser.add_argument("--debug", action="store_true", help="log Nova's and the clients' debug output")
    parser.add_argument("--agent-node", help="drive this available node (a real agent deploys it)")
    parser.add_argument("--image-url", help="the image Nova deploys (with --agent-node)")
    args = parser.parse_args()
    if bool(args.agent_node) != bool(args.image_url):
        parser.error("--agent-node and --image-url go together")
    logging.basicConfig(level=logging.DEBUG if args.debug else logging.CRITICAL, stream=sys.stderr)
    return Harness(args.endpoint, args.debug, args.agent_node, args.image_url).run()


if __name__ == "__main__":
    sys.exit(main())
