import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect } from "node:net";
import { afterAll, describe, expect, it } from "vitest";
import { TelnetFilter } from "../../conductor/drivers/console/telnet.ts";
import { QemuMachine, bootOrderOf, qmp } from "../../scripts/lab/redfish/qmp.ts";
import { startRedfishBmc } from "../../scripts/lab/redfish/server.ts";
import { RedfishConnections } from "../../conductor/drivers/redfish/client.ts";
import { RedfishPower } from "../../conductor/drivers/redfish/power.ts";
import { until, waitFor } from "../helpers/wait.ts";

/** The lab BMC's QEMU machine, through QMP, on a QEMU with no guest at all (-machine none). */
describe("the lab's Redfish BMC driving QEMU through QMP", { timeout: 120_000 }, () => {
  const dir = mkdtempSync(join(tmpdir(), "anvil-rf-qmp-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("maps boot sources to QEMU's boot order", () => {
    expect(["Pxe", "Cd", "Hdd", "None"].map(bootOrderOf)).toEqual(["n", "d", "c", "c"]);
  });

  it("starts QEMU on power on, reads query-status, and quits it on ForceOff", async () => {
    const machine = new QemuMachine({
      argv: ["-machine", "none", "-nodefaults", "-display", "none", "-S"],
      qmpSocket: join(dir, "qmp.sock"),
      virtualCd: false,
    });
    const bmc = await startRedfishBmc({ systems: [{ id: "vm", machine }] });
    const conn = new RedfishConnections({ backoffMs: 1 });
    try {
      const power = new RedfishPower({ connections: conn, pollIntervalMs: 50, powerTimeoutMs: 30_000 });
      const node = {
        uuid: "0d0c5a2e-7c53-4d5e-8f2b-3f6f1d1c8a90",
        name: null,
        driver_info: { redfish_address: bmc.url, redfish_username: "admin", redfish_password: "password" },
        properties: {},
        instance_info: {},
        driver_internal_info: {},
        ports: [],
      };
      expect(await power.getPowerState(node)).toBe("power off");
      await power.setPowerState(node, "power on");
      await until(async () => ((await machine.power()) === "On" ? true : undefined), { timeoutMs: 30_000 });
      expect(await power.getPowerState(node)).toBe("power on");
      await power.setPowerState(node, "power off");
      expect(await machine.power()).toBe("Off");
    } finally {
      await conn.close();
      await bmc.stop();
    }
  });

  it("puts an inserted image's fetched file in the running VM's CD drive and ejects it", async () => {
    const iso = join(dir, "served.iso");
    writeFileSync(iso, Buffer.alloc(64 * 2048, 1));
    const server = createServer((request, response) => {
      void readFile(iso).then((bytes) => response.end(bytes));
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const address = server.address() as { port: number };
    const socket = join(dir, "cd", "qmp.sock");
    rmSync(join(dir, "cd"), { recursive: true, force: true });
    await import("node:fs/promises").then((fs) => fs.mkdir(join(dir, "cd")));
    const machine = new QemuMachine({
      argv: ["-machine", "pc", "-nodefaults", "-display", "none", "-S"],
      qmpSocket: socket,
    });
    const bmc = await startRedfishBmc({ systems: [{ id: "vm", machine }] });
    const auth = `Basic ${Buffer.from("admin:password").toString("base64")}`;
    const post = (action: string, body: unknown) =>
      fetch(`${bmc.url}/redfish/v1/Systems/vm/VirtualMedia`, { headers: { authorization: auth } })
        .then(() =>
          fetch(`${bmc.url}/redfish/v1/Managers/BMC/VirtualMedia/vm/Actions/VirtualMedia.${action}`, {
            method: "POST",
            headers: { authorization: auth, "content-type": "application/json" },
            body: JSON.stringify(body),
          }),
        )
        .then((r) => r.status);
    const cd = async () => {
      const blocks = (await qmp(socket, "query-block")) as {
        qdev?: string;
        inserted?: { file: string };
      }[];
      return blocks.find((b) => b.qdev === "vmedia-cd");
    };
    try {
      await machine.reset("On", "Cd");
      await until(async () => ((await machine.power()) === "On" ? true : undefined), { timeoutMs: 30_000 });
      expect((await cd())?.inserted).toBeUndefined();
      const url = `http://127.0.0.1:${address.port}/vmedia/x.iso?anvil_expires=1&anvil_sig=y`;
      expect(await post("InsertMedia", { Image: url, Inserted: true })).toBe(204);
      expect((await cd())?.inserted?.file).toBe(join(dir, "cd", "vmedia.iso"));
      expect(await readFile(join(dir, "cd", "vmedia.iso"))).toEqual(await readFile(iso));
      expect(await post("EjectMedia", {})).toBe(204);
      expect((await cd())?.inserted).toBeUndefined();
    } finally {
      await machine.close();
      await bmc.stop();
      server.close();
    }
  });

  it("serves the VM's serial chardev on its Telnet port across a power cycle, and logs it", async () => {
    const vm = join(dir, "serial");
    await import("node:fs/promises").then((fs) => fs.mkdir(vm, { recursive: true }));
    const log = join(vm, "serial.log");
    // the serial chardev as labVmArgs writes it; SeaBIOS prints its banner there under -nographic
    const machine = new QemuMachine({
      argv: [
        ...["-machine", "pc", "-m", "64", "-nographic", "-monitor", "none", "-net", "none"],
        "-chardev",
        `socket,id=console,path=${join(vm, "serial.sock")},server=on,wait=off,logfile=${log},logappend=on`,
        ...["-serial", "chardev:console"],
      ],
      qmpSocket: join(vm, "qmp.sock"),
      serialSocket: join(vm, "serial.sock"),
      virtualCd: false,
    });
    const bmc = await startRedfishBmc({ systems: [{ id: "vm", machine }] });
    const auth = `Basic ${Buffer.from("admin:password").toString("base64")}`;
    const system = (await (
      await fetch(`${bmc.url}/redfish/v1/Systems/vm`, { headers: { authorization: auth } })
    ).json()) as { SerialConsole: { Telnet: { ServiceEnabled: boolean; Port: number } } };
    expect(system.SerialConsole.Telnet.ServiceEnabled).toBe(true);
    // a Telnet session opened while the machine is off stays open and gets each boot's output
    const telnet = connect(system.SerialConsole.Telnet.Port, "127.0.0.1");
    const filter = new TelnetFilter();
    let text = "";
    telnet.on("data", (chunk: Buffer) => (text += filter.push(chunk).data.toString("latin1")));
    // what QEMU prints before the BMC's line reaches the new socket (a few ms after a start) is only in the log:
    // SeaBIOS's last line is what every boot's console must show
    const ends = () => text.split("No bootable device.").length - 1;
    try {
      await machine.reset("On", "Hdd");
      await waitFor(() => ends() === 1, { what: "SeaBIOS on the Telnet port", timeoutMs: 30_000 });
      await machine.reset("ForceRestart", "Hdd");
      await waitFor(() => ends() === 2, { what: "SeaBIOS again after a restart", timeoutMs: 30_000 });
      expect((await readFile(log, "utf8")).split("SeaBIOS (version").length - 1).toBe(2);
    } finally {
      telnet.destroy();
      await machine.close();
      await bmc.stop();
    }
  });
});
