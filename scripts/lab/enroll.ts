import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { LabNode, LabState } from "./state.ts";

/** driver_info for a lab node (the ipmi hardware type, the lab's deploy kernel and ramdisk). */
export async function labDriverInfo(state: LabState, node: LabNode): Promise<Record<string, string>> {
  return {
    ipmi_address: "127.0.0.1",
    ipmi_port: String(node.bmcPort),
    ipmi_username: node.username,
    ipmi_password: (await readFile(node.passwordFile, "utf8")).trim(),
    deploy_kernel: state.deployKernel,
    deploy_ramdisk: state.deployRamdisk,
  };
}

/**
 * Writes the file `baremetal create FILE` enrolls every node from (nodes with their ports), so BMC
 * passwords never go through argv. The file is 0600: it holds them.
 */
export async function writeEnrollFile(
  state: LabState,
  /** More node fields for every node (e.g. `raid_interface: "agent"`). */
  nodeFields: Record<string, string> = {},
): Promise<string> {
  const nodes = [];
  for (const node of state.nodes) {
    nodes.push({
      ...nodeFields,
      name: node.name,
      driver: "ipmi",
      driver_info: await labDriverInfo(state, node),
      ports: [{ address: node.mac }],
    });
  }
  const path = join(state.dir, "enroll.json");
  await writeFile(path, JSON.stringify({ nodes }, null, 2) + "\n", { mode: 0o600 });
  return path;
}

/** What an operator types to enroll and drive the lab's nodes with the stock client. */
export function enrollInstructions(state: LabState, enrollFile: string): string {
  const endpoint = state.conductor?.url ?? `http://127.0.0.1:${state.conductorPort}`;
  const client = state.auth
    ? [
        `export OS_AUTH_TYPE=http_basic OS_ENDPOINT=${endpoint} OS_USERNAME=${state.auth.username}`,
        `export OS_PASSWORD="$(cat ${state.auth.passwordFile})"`,
      ]
    : [`export OS_AUTH_TYPE=none OS_ENDPOINT=${endpoint}`];
  if (state.tls) client.push(`export OS_CACERT=${state.tls.caCert}`);
  const lines = [
    ...client,
    `baremetal create ${enrollFile}    # every node and its port (the file holds the BMC passwords)`,
    "",
    "# or node by node:",
  ];
  for (const node of state.nodes) {
    lines.push(
      [
        `baremetal node create --name ${node.name} --driver ipmi`,
        `--driver-info ipmi_address=127.0.0.1 --driver-info ipmi_port=${node.bmcPort}`,
        `--driver-info ipmi_username=${node.username} --driver-info ipmi_password="$(cat ${node.passwordFile})"`,
        `--driver-info deploy_kernel=${state.deployKernel} --driver-info deploy_ramdisk=${state.deployRamdisk}`,
      ].join(" \\\n    "),
      `baremetal port create ${node.mac} --node "$(baremetal node show ${node.name} -f value -c uuid)"`,
    );
  }
  const first = state.nodes[0]?.name ?? "lab-01";
  lines.push(
    "",
    "# then:",
    `baremetal node manage ${first} --wait && baremetal node inspect ${first} --wait && baremetal node provide ${first} --wait`,
    `baremetal node set ${first} --instance-info image_source=file://${state.imageRoot}/test-images/anvil-test.qcow2`,
    `baremetal node deploy ${first} --wait`,
    `tail -f ${state.nodes[0]?.dir ?? "<node dir>"}/vm/serial.log   # the node's console`,
  );
  return lines.join("\n");
}
