import { existsSync } from "node:fs";
import { readFile, readdir } from "node:fs/promises";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { exec } from "../../shared/system/exec.ts";
import { baremetal } from "../../scripts/lab/baremetal.ts";
import { recordEvents, type RecordedEvent } from "../../scripts/lab/events.ts";
import { REPO_ROOT } from "../../scripts/lab/lab.ts";
import { countPowerActions } from "../../scripts/lab/probe.ts";
import { redfishLabDown, redfishLabUp, type RedfishLabState } from "../../scripts/lab/redfish-node.ts";
import { provisionStates } from "../../scripts/lab/walk.ts";

// Issue 26: a lab node driven by the lab Redfish BMC only (QMP, no ipmi_sim), on a bridge with no DHCP
// server, its deploy ramdisk booted from the conductor's virtual-media ISO with a static address from the
// node's network_data, walked through its whole life with the stock baremetal CLI; its serial console (the
// BMC's Telnet port, console_interface redfish-serial) is read through the API's WebSocket during the deploy.

const MARKER = "ANVIL-TEST-IMAGE-BOOTED anvil-test";
// what the deploy ramdisk prints on its serial console once it configured itself from network_data
const RAMDISK_LINE = /vmedia: network configured from network_data\.json/;
const API = "1.81";
const DIR = join(REPO_ROOT, ".tmp", "e2e", "redfish-vmedia");
const canRun = process.getuid?.() === 0;

const seconds = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;
const read = (path: string): Promise<string> => readFile(path, "utf8").catch(() => "");
const count = (text: string, pattern: RegExp): number => text.match(new RegExp(pattern, "g"))?.length ?? 0;

afterAll(async () => {
  await redfishLabDown(DIR);
});

/** The BMC's view of the node's virtual CD (basic auth, as any Redfish client may). */
async function virtualCd(state: RedfishLabState): Promise<{ Inserted: boolean; Image: string | null }> {
  const password = await readFile(state.bmc.passwordFile, "utf8");
  const auth = `Basic ${Buffer.from(`${state.bmc.username}:${password}`).toString("base64")}`;
  const response = await fetch(`${state.bmc.url}/redfish/v1/Managers/BMC/VirtualMedia/${state.node.name}`, {
    headers: { authorization: auth },
  });
  expect(response.status).toBe(200);
  return (await response.json()) as { Inserted: boolean; Image: string | null };
}

describe.skipIf(!canRun)("a lab node over Redfish virtual media, with no DHCP on its network", () => {
  it("enroll → manage → inspect (out of band, in band) → provide → deploy → boots → power → undeploy", async () => {
    const started = Date.now();
    const state = await redfishLabUp({ dir: DIR });
    const url = state.conductor?.url ?? "";
    const { node } = state;
    const bm = baremetal(url);
    const recorder = recordEvents(url);
    const events: RecordedEvent[] = recorder.events;
    const vm = join(node.dir, "vm");
    const hookLog = async () => (await read(join(vm, "hook.log"))).split("\n").filter((l) => l !== "");
    const serial = () => read(join(vm, "serial.log"));
    const waitForSerial = async (pattern: RegExp, times: number, timeoutMs: number): Promise<string> => {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const text = await serial();
        if (count(text, pattern) >= times) return text;
        if (Date.now() > deadline)
          throw new Error(
            `${pattern} not ${times}× on the console after ${timeoutMs} ms:\n${text.slice(-3000)}`,
          );
        await sleep(500);
      }
    };
    const steps: Record<string, string> = {};
    const provision = async (verb: string, ...rest: string[]): Promise<number> => {
      const t = Date.now();
      await bm.run(["node", verb, node.name, ...rest, "--wait", "600"], { timeoutMs: 630_000 });
      const ms = Date.now() - t;
      let key = verb;
      for (let n = 2; key in steps; n++) key = `${verb} (${n})`;
      steps[key] = seconds(ms);
      console.log(`redfish-vmedia e2e: ${verb} ${seconds(ms)}`);
      return ms;
    };
    try {
      // enroll with the stock client: redfish, virtual media, the static address as network_data (1.66)
      await bm.run([
        ...["--os-baremetal-api-version", API, "node", "create", "--name", node.name],
        ...["--driver", "redfish", "--boot-interface", "redfish-virtual-media"],
        ...["--console-interface", "redfish-serial"],
        ...["--driver-info", `redfish_address=${state.bmc.url}`],
        ...["--driver-info", `redfish_system_id=${node.systemId}`],
        ...["--driver-info", `redfish_username=${state.bmc.username}`],
        ...["--network-data", node.networkDataFile],
      ]);
      // the password through the API, never argv (the stock client only takes it as an argument)
      const patched = await fetch(`${url}/v1/nodes/${node.name}`, {
        method: "PATCH",
        headers: { "content-type": "application/json", "X-OpenStack-Ironic-API-Version": API },
        body: JSON.stringify([
          {
            op: "add",
            path: "/driver_info/redfish_password",
            value: await readFile(state.bmc.passwordFile, "utf8"),
          },
        ]),
      });
      expect(patched.status).toBe(200);
      const shown = await bm.json([
        ...["--os-baremetal-api-version", API, "node", "show", node.name],
        ...["--fields", "uuid", "network_data", "boot_interface", "driver", "console_interface"],
      ]);
      expect(shown).toMatchObject({
        driver: "redfish",
        boot_interface: "redfish-virtual-media",
        console_interface: "redfish-serial",
      });
      expect(shown.network_data).toEqual(JSON.parse(await readFile(node.networkDataFile, "utf8")));
      const uuid = String(shown.uuid);

      await provision("manage");
      expect(await bm.node(node.name)).toMatchObject({
        provision_state: "manageable",
        power_state: "power off",
      });

      // out of band: the BMC's System, no boot
      await provision("inspect");
      expect(countPowerActions(await hookLog()).on).toBe(0);
      const properties = (await bm.json(["node", "show", node.name, "--fields", "properties"])).properties;
      expect(properties).toMatchObject({ cpus: node.vcpus, memory_mb: node.memoryMb, cpu_arch: "x86_64" });
      const ports = await bm.run(["port", "list", "--node", node.name, "-f", "value", "-c", "Address"]);
      expect(ports.trim().split("\n")).toContain(node.mac);

      // in band: the ramdisk from the ISO, configured from network_data, reports the VM's own inventory
      await bm.run(["node", "set", node.name, "--inspect-interface", "agent"]);
      await provision("inspect");
      const inventory = (await (
        await fetch(`${url}/v1/nodes/${uuid}/inventory`, {
          headers: { "X-OpenStack-Ironic-API-Version": API },
        })
      ).json()) as {
        inventory: { disks: { serial: string | null }[]; interfaces: { mac_address: string }[] };
      };
      expect(inventory.inventory.disks.map((d) => d.serial)).toContain(node.disks[0]?.serial);
      expect(inventory.inventory.interfaces.map((i) => i.mac_address)).toContain(node.mac);
      let console_ = await serial();
      expect(console_).toMatch(/vmedia: network configured from network_data\.json/);
      expect(console_).toContain(`${node.ip}`);

      // provide: automated cleaning boots the ISO again; the agent reaches the conductor without DHCP
      await provision("provide");
      expect(await bm.node(node.name)).toMatchObject({
        provision_state: "available",
        power_state: "power off",
      });

      // deploy the lab's test image
      const sums = await readFile(join(state.imageRoot, "test-images", "anvil-test.sha256sums"), "utf8");
      const sha256 = sums
        .split("\n")
        .find((l) => l.trim().endsWith("  anvil-test.qcow2"))
        ?.split(/\s+/)[0];
      expect(sha256).toMatch(/^[0-9a-f]{64}$/);
      await bm.run([
        ...["node", "set", node.name],
        ...[
          "--instance-info",
          `image_source=file://${join(state.imageRoot, "test-images", "anvil-test.qcow2")}`,
        ],
        ...[
          "--instance-info",
          "image_os_hash_algo=sha256",
          "--instance-info",
          `image_os_hash_value=${sha256}`,
        ],
      ]);
      const deployedAt = Date.now();
      const deployed = provision("deploy");
      deployed.catch(() => undefined); // awaited below; a failure must not go unhandled meanwhile
      // during the deploy, once the node waits for its ramdisk: the console on, through the API
      const apiCall = (path: string, init: { method?: string; body?: unknown } = {}) =>
        fetch(`${url}/v1/nodes/${uuid}${path}`, {
          method: init.method ?? "GET",
          headers: { "content-type": "application/json", "X-OpenStack-Ironic-API-Version": API },
          ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) }),
        });
      const provisionState = async () =>
        ((await (await apiCall("")).json()) as { provision_state: string }).provision_state;
      for (let s = await provisionState(); s !== "wait call-back"; s = await provisionState()) {
        if (s === "active" || s === "deploy failed") throw new Error(`the deploy went to ${s} first`);
        await sleep(200);
      }
      const consoleAsked = Date.now();
      // the deploy takes the node's lock again when the agent calls back: a 409 then is retried
      for (let put = await apiCall("/states/console", { method: "PUT", body: { enabled: true } }); ;) {
        if (put.status === 202) break;
        expect(put.status, await put.text()).toBe(409);
        await sleep(200);
        put = await apiCall("/states/console", { method: "PUT", body: { enabled: true } });
      }
      type ConsoleState = { console_enabled: boolean; console_info: { type: string; url: string } | null };
      let consoleState: ConsoleState = { console_enabled: false, console_info: null };
      for (const deadline = Date.now() + 30_000; !consoleState.console_enabled; await sleep(200)) {
        if (Date.now() > deadline) throw new Error("the console was not enabled within 30 s");
        consoleState = (await (await apiCall("/states/console")).json()) as ConsoleState;
      }
      expect(consoleState.console_info?.type).toBe("websocket");
      const viewer = new WebSocket(consoleState.console_info!.url);
      const seen: Buffer[] = [];
      const consoleText = () => Buffer.concat(seen).toString("latin1");
      let ramdiskSeenAt = 0;
      viewer.on("message", (data: Buffer) => {
        seen.push(data);
        if (ramdiskSeenAt === 0 && RAMDISK_LINE.test(consoleText())) ramdiskSeenAt = Date.now();
      });
      viewer.on("error", () => undefined);
      await new Promise((resolve, reject) => viewer.once("open", resolve).once("error", reject));
      steps["wait call-back → console open"] = seconds(Date.now() - consoleAsked);
      await deployed;
      const activeAt = Date.parse(
        events.filter((e) => e.type === "provision" && e.provision_state === "active").at(-1)?.at ?? "",
      );
      // the ramdisk's own line came through the API's console before the node was active
      expect(ramdiskSeenAt, consoleText().slice(-3000)).toBeGreaterThan(0);
      expect(ramdiskSeenAt).toBeLessThan(activeAt);
      await waitForSerial(new RegExp(MARKER), 1, 180_000);
      // the same Telnet session carries on across the power cycle into the instance
      for (const deadline = Date.now() + 60_000; !consoleText().includes(MARKER); await sleep(500))
        if (Date.now() > deadline)
          throw new Error(`no ${MARKER} on the console WebSocket:\n${consoleText().slice(-3000)}`);
      steps["console bytes read through the API"] = `${Buffer.concat(seen).length}`;
      const viewerClosed = new Promise<void>((resolve) => viewer.once("close", () => resolve()));
      expect((await apiCall("/states/console", { method: "PUT", body: { enabled: false } })).status).toBe(
        202,
      );
      await viewerClosed;
      for (const deadline = Date.now() + 30_000; consoleState.console_enabled; await sleep(200)) {
        if (Date.now() > deadline) throw new Error("the console was not disabled within 30 s");
        consoleState = (await (await apiCall("/states/console")).json()) as ConsoleState;
      }
      const bootedMs = Date.now() - started;
      steps["deploy started → marker on the console"] = seconds(Date.now() - deployedAt);
      // the CD is empty once the node runs its instance, and the ISO is gone from the BMC and the conductor
      expect(await virtualCd(state)).toMatchObject({ Inserted: false, Image: null });
      expect(existsSync(join(vm, "vmedia.iso"))).toBe(false);
      const isos = (await readdir(join(state.dir, "conductor", "vmedia")).catch(() => [])).filter((f) =>
        f.endsWith(".iso"),
      );
      expect(isos).toEqual([]);

      // power through Redfish: the image powers itself off after its marker; on again, then a reboot
      const waitOff = async () => {
        const deadline = Date.now() + 120_000;
        while (!/^\d+ exited /.test((await hookLog()).at(-1) ?? "")) {
          if (Date.now() > deadline) throw new Error("the test image did not power itself off");
          await sleep(500);
        }
      };
      await waitOff();
      let t = Date.now();
      await bm.run(["node", "power", "on", node.name, "--power-timeout", "120"]);
      await waitForSerial(new RegExp(MARKER), 2, 180_000);
      steps["power on → marker"] = seconds(Date.now() - t);
      await waitOff();
      t = Date.now();
      await bm.run(["node", "reboot", node.name, "--power-timeout", "120"]);
      await waitForSerial(new RegExp(MARKER), 3, 180_000);
      steps["reboot → marker"] = seconds(Date.now() - t);
      await waitOff();
      await bm.run(["node", "power", "off", node.name, "--power-timeout", "120"]);
      expect(await bm.node(node.name)).toMatchObject({ provision_state: "active", power_state: "power off" });

      await provision("undeploy");
      expect(await bm.node(node.name)).toMatchObject({ provision_state: "available", last_error: null });
      expect(await virtualCd(state)).toMatchObject({ Inserted: false, Image: null });

      expect(provisionStates(events)).toEqual([
        "verifying",
        "manageable",
        "inspecting",
        "manageable",
        "inspecting",
        "inspect wait",
        "inspecting",
        "manageable",
        "cleaning",
        "clean wait",
        "cleaning",
        "available",
        "deploying",
        "wait call-back",
        "deploying",
        "active",
        "deleting",
        "cleaning",
        "clean wait",
        "cleaning",
        "available",
      ]);

      // every ramdisk boot came from the CD and configured itself from network_data, never from DHCP
      const log = await hookLog();
      const starts = log.flatMap((line) => {
        const m = /^(\d+) (?:power|reset) start order=(\w)/.exec(line);
        return m ? [{ at: Number(m[1]), order: m[2] }] : [];
      });
      const cdBoots = starts.filter((s) => s.order === "d");
      expect(cdBoots).toHaveLength(4); // in-band inspection, clean, deploy, clean
      expect(starts.some((s) => s.order === "n")).toBe(false);
      console_ = await serial();
      expect(count(console_, /vmedia: network configured from network_data\.json/)).toBe(4);
      expect(console_).not.toMatch(/falling back to DHCP/);
      const connects = events
        .filter((e) => e.type === "agent" && e.connected === true)
        .map((e) => Date.parse(e.at));
      const toAgent = cdBoots.flatMap((boot) => {
        const next = connects.find((at) => at >= boot.at);
        return next === undefined ? [] : [next - boot.at];
      });
      const inserts = log.flatMap((line) => {
        const m = /^(\d+) media insert \S+ fetch-ms=(\d+) bytes=(\d+)/.exec(line);
        return m ? [{ at: Number(m[1]), fetchMs: Number(m[2]), bytes: Number(m[3]) }] : [];
      });
      expect(inserts).toHaveLength(4);
      // from the provision state that asked for the ramdisk to the ISO in the CD: ISO build (or reuse),
      // eject, insert (the BMC's fetch included)
      const stateTimes = events.filter((e) => e.type === "provision").map((e) => Date.parse(e.at));
      const toInsert = inserts.map((insert) => {
        const asked = stateTimes.filter((at) => at <= insert.at).at(-1) ?? insert.at;
        return insert.at - asked;
      });

      recorder.stop();
      await redfishLabDown(DIR);

      // the bridge's capture: the node talked (to the conductor) but no DHCP frame crossed the wire at all
      const frames = async (filter: string): Promise<number> => {
        const result = await exec(
          "tshark",
          ["-r", state.capture.file, "-Y", filter, "-T", "fields", "-e", "frame.number"],
          {
            timeoutMs: 120_000,
          },
        );
        expect(result.code, result.stderr).toBe(0);
        return result.stdout.split("\n").filter((l) => l.trim() !== "").length;
      };
      const fromNode = await frames(`eth.src == ${node.mac} && ip.src == ${node.ip}`);
      const dhcp = await frames("dhcp || dhcpv6");
      // (the capture saw the node at all: 124 frames in the first run, GRO makes them few)
      expect(fromNode).toBeGreaterThan(10);
      expect(dhcp).toBe(0);

      console.log(
        [
          "\nredfish-vmedia e2e: one node over Redfish virtual media, no DHCP (QEMU TCG)",
          ...Object.entries({
            ...steps,
            "state change → ISO in the CD (build, eject, insert)": toInsert.map(seconds).join(", "),
            "↳ the BMC's fetch of the ISO": inserts.map((i) => seconds(i.fetchMs)).join(", "),
            "ISO size": `${((inserts[0]?.bytes ?? 0) / 1024 ** 2).toFixed(1)} MiB`,
            "CD power on → agent connected": toAgent.map(seconds).join(", "),
            "frames from the node / DHCP frames on the bridge": `${fromNode} / ${dhcp}`,
            "enroll → image booted": seconds(bootedMs),
            total: seconds(Date.now() - started),
          }).map(([k, v]) => `  ${k.padEnd(48)} ${v}`),
        ].join("\n"),
      );
    } finally {
      recorder.stop();
    }
  });
});
