// A redfish node's serial console end to end without QEMU: the lab Redfish BMC (its SerialConsole advertised
// on the System, its Telnet port relaying the machine's serial port) with a TCP socket this test holds as the
// machine's serial port, the conductor's redfish-serial console, and the API's console WebSocket.
import { randomBytes } from "node:crypto";
import { createServer, type Server, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { MemoryMachine } from "../../scripts/lab/redfish/machine.ts";
import { startRedfishBmc, type RedfishBmc } from "../../scripts/lab/redfish/server.ts";
import { api, startConductor } from "../helpers/conductor.ts";
import { until, waitFor } from "../helpers/wait.ts";

const PASSWORD = "rf-c0nsole-s3cret";
let ctx: Awaited<ReturnType<typeof startConductor>>;
let bmc: RedfishBmc;
let serialServer: Server;
let serial: Socket | undefined;
const fromKeyboard: Buffer[] = [];

async function createNode(name: string, systemId: string): Promise<void> {
  const created = await api(`${ctx.url}/v1/nodes`, {
    method: "POST",
    body: {
      name,
      driver: "redfish",
      deploy_interface: "fake",
      console_interface: "redfish-serial",
      driver_info: {
        redfish_address: bmc.url,
        redfish_system_id: `/redfish/v1/Systems/${systemId}`,
        redfish_username: "admin",
        redfish_password: PASSWORD,
      },
    },
  });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
}

beforeAll(async () => {
  serialServer = createServer((socket) => {
    serial = socket;
    socket.on("data", (chunk) => fromKeyboard.push(chunk));
    socket.on("error", () => undefined);
  });
  await new Promise<void>((resolve) => serialServer.listen(0, "127.0.0.1", resolve));
  const { port } = serialServer.address() as { port: number };
  bmc = await startRedfishBmc({
    password: PASSWORD,
    systems: [
      { id: "node-1", machine: new MemoryMachine({ serial: { host: "127.0.0.1", port } }) },
      { id: "node-sol", serialConsole: "ipmi" },
    ],
  });
  ctx = await startConductor({ fakeDelayMs: 0 });
  await createNode("rf-console", "node-1");
  await createNode("rf-sol-only", "node-sol");
});
afterAll(async () => {
  await ctx?.stop();
  await bmc?.stop();
  serial?.destroy();
  await new Promise((resolve) => serialServer?.close(resolve));
});

interface ConsoleState {
  console_enabled: boolean;
  console_info: { type: string; url: string } | null;
}

async function consoleState(node: string): Promise<ConsoleState> {
  const response = await api(`${ctx.url}/v1/nodes/${node}/states/console`);
  expect(response.status).toBe(200);
  return response.body as ConsoleState;
}

async function setConsole(node: string, enabled: boolean): Promise<void> {
  const put = await api(`${ctx.url}/v1/nodes/${node}/states/console`, { method: "PUT", body: { enabled } });
  expect(put.status, JSON.stringify(put.body)).toBe(202);
}

describe("a redfish node's serial console through the BMC's Telnet port", () => {
  it("is offered by the redfish hardware type", async () => {
    const driver = await api(`${ctx.url}/v1/drivers/redfish`, {
      headers: { "X-OpenStack-Ironic-API-Version": "1.81" },
    });
    expect(driver.status).toBe(200);
    expect(driver.body).toMatchObject({
      default_console_interface: "no-console",
      enabled_console_interfaces: ["no-console", "redfish-serial"],
    });
  });

  it("streams the serial port's output to a viewer and its keystrokes back, 0xFF included", async () => {
    await setConsole("rf-console", true);
    await waitFor(async () => (await consoleState("rf-console")).console_enabled, {
      what: "the console to be enabled",
    });
    // the BMC dials the machine's serial port once the conductor's Telnet session is open
    await waitFor(() => serial !== undefined, { what: "the BMC to dial the serial port" });
    const { console_info: info } = await consoleState("rf-console");
    expect(info?.type).toBe("websocket");
    const ws = new WebSocket(info!.url);
    const received: Buffer[] = [];
    ws.on("message", (data: Buffer) => received.push(data));
    await new Promise((resolve, reject) => ws.once("open", resolve).once("error", reject));

    // a byte 0xFF crosses two Telnet hops (BMC → conductor): escaped there, one byte again here
    const marker = `ramdisk-${randomBytes(4).toString("hex")}`;
    const line = Buffer.concat([
      Buffer.from(`${marker} `),
      Buffer.from([0xff, 0x00, 0xfb]),
      Buffer.from("\r\n"),
    ]);
    serial!.write(line);
    await waitFor(() => Buffer.concat(received).includes(line), {
      what: "serial output at the WebSocket",
      timeoutMs: 15_000,
    });
    // the BMC's greeting (IAC WILL ECHO, IAC WILL SGA) never reaches the viewer
    expect(Buffer.concat(received).includes(Buffer.from([0xff, 0xfb, 0x01]))).toBe(false);

    const typed = Buffer.concat([
      Buffer.from(`root-${randomBytes(4).toString("hex")}`),
      Buffer.from([0xff, 0x0d]),
    ]);
    ws.send(typed);
    await waitFor(() => Buffer.concat(fromKeyboard).includes(typed), {
      what: "keystrokes at the serial port",
      timeoutMs: 15_000,
    });
    // the conductor's refusals of the BMC's options went to the BMC, not to the serial port
    expect(Buffer.concat(fromKeyboard).includes(Buffer.from([0xff, 0xfe]))).toBe(false);
    expect(bmc.systems.get("node-1")!.serial!.service.sessionCount).toBe(1);

    // the machine's serial port goes away (QEMU restarted for a power cycle) and comes back: the BMC redials
    // it and the viewer keeps reading on the same Telnet session, as on a BMC whose host reboots
    const before = serial!;
    before.destroy();
    await waitFor(() => serial !== before, { what: "the BMC to redial the serial port" });
    const after = `instance-${randomBytes(4).toString("hex")}`;
    serial!.write(`${after}\r\n`);
    await waitFor(() => Buffer.concat(received).toString("latin1").includes(after), {
      what: "output after the serial port came back",
      timeoutMs: 15_000,
    });
    expect(bmc.systems.get("node-1")!.serial!.service.sessionCount).toBe(1);
    expect(Buffer.concat(received).toString("latin1")).not.toContain("console connection lost");

    const closed = new Promise<number>((resolve) => ws.once("close", (code) => resolve(code)));
    await setConsole("rf-console", false);
    expect(await closed).toBe(1000);
    await waitFor(async () => !(await consoleState("rf-console")).console_enabled, {
      what: "the console to be disabled",
    });
    // the Telnet session is closed, and with it the BMC's line to the serial port
    await waitFor(() => bmc.systems.get("node-1")!.serial!.service.sessionCount === 0, {
      what: "the BMC's Telnet session to close",
    });
    await waitFor(() => serial!.destroyed || serial!.readableEnded, { what: "the serial line to drop" });
  });

  it("says so when the BMC offers only IPMI Serial-over-LAN, and leaves the console disabled", async () => {
    await setConsole("rf-sol-only", true);
    const node = await until(
      async () => {
        const body = (await api(`${ctx.url}/v1/nodes/rf-sol-only`)).body as {
          last_error: string | null;
          console_enabled: boolean;
        };
        return body.last_error ? body : undefined;
      },
      { what: "the console's failure in last_error", timeoutMs: 15_000 },
    );
    expect(node.console_enabled).toBe(false);
    expect(node.last_error).toMatch(/Error enabling the console on node .*only as IPMI Serial-over-LAN/);
    expect(node.last_error).toMatch(/ipmitool-socat/);
    expect(await consoleState("rf-sol-only")).toEqual({ console_enabled: false, console_info: null });
  });
});
