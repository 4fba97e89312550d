import { parseArgs } from "node:util";
import { writeEnrollFile, enrollInstructions } from "./enroll.ts";
import { labDown, labUp } from "./lab.ts";
import { alive } from "./daemon.ts";
import { readLabState } from "./state.ts";
import { runLabDemo } from "./demo.ts";
import { redfishLabDown, redfishLabUp } from "./redfish-node.ts";
import { DISK_BUSES, NIC_MODELS, type DiskBus, type NicModel } from "./vm-args.ts";

const isNicModel = (value: string): value is NicModel => Object.hasOwn(NIC_MODELS, value);
const isDiskBus = (value: string): value is DiskBus => Object.hasOwn(DISK_BUSES, value);

const USAGE = `npm run lab -- <command> [options]
  up N            start N virtual nodes (ipmi_sim BMC + QEMU VM each) and a conductor
  down            stop everything the lab started (by pid); logs stay in the lab dir
  status          what runs
  demo            up 1, walk the node from enroll to active with the stock baremetal CLI, then down
                  (--keep leaves the lab up; --tls and --auth as for up)
  redfish-up [N]  N nodes (default 1) behind the lab Redfish BMC (QMP) on one bridge without DHCP, and a
                  conductor on the bridge's address (root; default dir .tmp/redfish-lab; --fast-track and
                  --memory as for up): see docs/lab.md
  redfish-down    stop it, delete its bridge and disks
options:
  --dir DIR       the lab's state (default .tmp/lab)
  --port PORT     the conductor's port (default 6385; 0 picks a free one)
  --no-conductor  only the nodes
  --fast-track    start the conductor with --fast-track
  --memory MB     RAM per VM (default 768)
  --raid-disks    nodes get two virtio disks (RAID-1 members) beside the NVMe disk
  --nic MODEL     the NIC QEMU emulates: ${Object.keys(NIC_MODELS).join(", ")} (default virtio)
  --root-bus BUS  where the root disk(s) sit: ${Object.keys(DISK_BUSES).join(", ")} (default virtio)
  --tls           HTTPS/WSS with a lab CA (tls/ca.crt) the ramdisk pins; boot files stay on plain HTTP
  --auth STRATEGY noauth (default) or http_basic: a lab-admin user, password in auth/password (0600)
  --capture       each VM power-on writes its NIC's frames to <node>/vm/nic-<ms>.pcap`;

async function main(): Promise<void> {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      dir: { type: "string", default: ".tmp/lab" },
      port: { type: "string" },
      "no-conductor": { type: "boolean" },
      "fast-track": { type: "boolean" },
      memory: { type: "string" },
      "raid-disks": { type: "boolean" },
      nic: { type: "string" },
      "root-bus": { type: "string" },
      tls: { type: "boolean" },
      auth: { type: "string" },
      capture: { type: "boolean" },
      keep: { type: "boolean" },
      help: { type: "boolean", short: "h" },
    },
  });
  const [command, count] = positionals;
  const dir = values.dir;
  const auth = values.auth ?? "noauth";
  if (auth !== "noauth" && auth !== "http_basic")
    throw new Error(`--auth is noauth or http_basic, not ${auth}`);
  const nicModel = values.nic ?? "virtio";
  if (!isNicModel(nicModel)) throw new Error(`--nic is one of ${Object.keys(NIC_MODELS).join(", ")}`);
  const rootBus = values["root-bus"] ?? "virtio";
  if (!isDiskBus(rootBus)) throw new Error(`--root-bus is one of ${Object.keys(DISK_BUSES).join(", ")}`);
  switch (command ?? "help") {
    case "up": {
      const state = await labUp({
        dir,
        nodes: Number(count ?? 1),
        conductor: values["no-conductor"] !== true,
        port: values.port === undefined ? undefined : Number(values.port),
        conductorArgs: values["fast-track"] ? ["--fast-track"] : [],
        memoryMb: values.memory === undefined ? undefined : Number(values.memory),
        shape: values["raid-disks"] === true ? "raid" : "standard",
        tls: values.tls === true,
        auth,
        captureNic: values.capture === true,
        nicModel,
        rootBus,
      });
      for (const node of state.nodes) {
        console.log(
          `${node.name}: BMC 127.0.0.1:${node.bmcPort} (pid ${node.bmcPid}), MAC ${node.mac}, console ${node.dir}/vm/serial.log`,
        );
      }
      if (state.conductor)
        console.log(
          `conductor: ${state.conductor.url} (pid ${state.conductor.pid}), log ${state.conductor.log}`,
        );
      console.log(`\n${enrollInstructions(state, await writeEnrollFile(state))}`);
      return;
    }
    case "down": {
      const state = await labDown(dir);
      console.log(state === null ? `no lab in ${dir}` : `stopped the lab in ${state.dir}`);
      return;
    }
    case "status": {
      const state = await readLabState(dir);
      if (state === null) {
        console.log(`no lab in ${dir}`);
        return;
      }
      const mark = (pid: number) => (alive(pid) ? `running (pid ${pid})` : "stopped");
      if (state.conductor) console.log(`conductor ${state.conductor.url}: ${mark(state.conductor.pid)}`);
      for (const node of state.nodes)
        console.log(`${node.name}: BMC ${mark(node.bmcPid)}, port ${node.bmcPort}`);
      return;
    }
    case "redfish-up": {
      const state = await redfishLabUp({
        dir: values.dir === ".tmp/lab" ? ".tmp/redfish-lab" : dir,
        nodes: Number(count ?? 1),
        conductorArgs: values["fast-track"] ? ["--fast-track"] : [],
        memoryMb: values.memory === undefined ? undefined : Number(values.memory),
      });
      const { bmc } = state;
      console.log(
        [
          ...state.nodes.flatMap((node) => [
            `${node.name}: MAC ${node.mac}, static ${node.ip}/${state.prefix} on ${state.bridge} (no DHCP)`,
            `  BMC ${bmc.url}${node.systemId}, network_data ${node.networkDataFile}, console ${node.dir}/vm/serial.log`,
          ]),
          `BMC user ${bmc.username}, password in ${bmc.passwordFile}`,
          `conductor ${state.conductor?.url ?? "-"}, log ${state.conductor?.log ?? "-"}`,
        ].join("\n"),
      );
      return;
    }
    case "redfish-down":
      await redfishLabDown(values.dir === ".tmp/lab" ? ".tmp/redfish-lab" : dir);
      console.log("stopped the Redfish lab");
      return;
    case "demo":
      await runLabDemo({
        dir,
        port: values.port === undefined ? 0 : Number(values.port),
        keep: values.keep === true,
        tls: values.tls === true,
        auth,
      });
      return;
    default:
      console.log(USAGE);
      if (!values.help) process.exitCode = 2;
  }
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
