// The serial console end to end with the real parts: ipmi_sim's Serial-over-LAN fed by a TCP socket this test
// holds (the "serial port"), the conductor's real ipmitool `sol activate`, and the console WebSocket.
import { randomBytes } from "node:crypto";
import { createServer, type Server, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { observeSpawns } from "../../shared/system/exec.ts";
import { api, startConductor } from "../helpers/conductor.ts";
import { startIpmiSim, type IpmiSim } from "../helpers/ipmi-sim.ts";
import { waitFor } from "../helpers/wait.ts";

const PASSWORD = "s0l-Pa55-not-argv";
let ctx: Awaited<ReturnType<typeof startConductor>>;
let sim: IpmiSim;
let serialServer: Server;
let serial: Socket | undefined;
const fromKeyboard: Buffer[] = [];
const argvs: string[][] = [];
const stopObserving = observeSpawns((command, args) => argvs.push([command, ...args]));

beforeAll(async () => {
  serialServer = createServer((socket) => {
    serial = socket;
    socket.on("data", (chunk) => fromKeyboard.push(chunk));
    socket.on("error", () => undefined);
  });
  await new Promise<void>((resolve) => serialServer.listen(0, "127.0.0.1", resolve));
  const { port } = serialServer.address() as { port: number };
  sim = await startIpmiSim({ password: PASSWORD, sol: `tcp:127.0.0.1:${port}` });
  ctx = await startConductor();
  const created = await api(`${ctx.url}/v1/nodes`, {
    method: "POST",
    body: {
      name: "sol-1",
      driver: "ipmi",
      driver_info: sim.driverInfo(),
      console_interface: "ipmitool-socat",
    },
  });
  expect(created.status).toBe(201);
  await waitFor(() => serial !== undefined, { what: "ipmi_sim to dial the serial socket" });
});
afterAll(async () => {
  stopObserving();
  await ctx?.stop();
  await sim?.stop();
  serial?.destroy();
  await new Promise((resolve) => serialServer?.close(resolve));
});

async function consoleState(): Promise<{
  console_enabled: boolean;
  console_info: { type: string; url: string } | null;
}> {
  const response = await api(`${ctx.url}/v1/nodes/sol-1/states/console`);
  expect(response.status).toBe(200);
  return response.body as { console_enabled: boolean; console_info: { type: string; url: string } | null };
}

describe("IPMI Serial-over-LAN through the console WebSocket", () => {
  it("streams serial output to a viewer and its keystrokes back to the serial port", async () => {
    expect(await consoleState()).toEqual({ console_enabled: false, console_info: null });
    const put = await api(`${ctx.url}/v1/nodes/sol-1/states/console`, {
      method: "PUT",
      body: { enabled: true },
    });
    expect(put.status).toBe(202);
    expect(put.headers.get("location")).toMatch(/\/v1\/nodes\/[0-9a-f-]{36}\/states\/console$/);
    await waitFor(async () => (await consoleState()).console_enabled, { what: "the console to be enabled" });
    const { console_info: info } = await consoleState();
    expect(info?.type).toBe("websocket");
    expect(info?.url).toMatch(
      /^ws:\/\/127\.0\.0\.1:\d+\/v1\/console\/[0-9a-f-]{36}\?anvil_expires=\d+&anvil_sig=/,
    );

    const ws = new WebSocket(info!.url);
    const received: Buffer[] = [];
    ws.on("message", (data: Buffer) => received.push(data));
    await new Promise((resolve, reject) => ws.once("open", resolve).once("error", reject));
    // SOL carries what the serial port says once the session is up: keep saying it until it arrives
    const marker = `boot-${randomBytes(4).toString("hex")}`;
    await waitFor(
      () => {
        serial!.write(`${marker}\r\n`);
        return Buffer.concat(received).toString().includes(marker);
      },
      { what: "serial output at the WebSocket", intervalMs: 200, timeoutMs: 15_000 },
    );
    const typed = `root-${randomBytes(4).toString("hex")}\r`;
    ws.send(Buffer.from(typed));
    await waitFor(() => Buffer.concat(fromKeyboard).toString().includes(typed), {
      what: "keystrokes at the serial port",
      timeoutMs: 15_000,
    });

    // a second viewer starts with the scrollback
    const late = new WebSocket((await consoleState()).console_info!.url);
    const lateReceived: Buffer[] = [];
    late.on("message", (data: Buffer) => lateReceived.push(data));
    await waitFor(() => Buffer.concat(lateReceived).toString().includes(marker), { what: "the scrollback" });

    const closed = new Promise<number>((resolve) => ws.once("close", (code) => resolve(code)));
    const off = await api(`${ctx.url}/v1/nodes/sol-1/states/console`, {
      method: "PUT",
      body: { enabled: false },
    });
    expect(off.status).toBe(202);
    expect(await closed).toBe(1000);
    // viewers are closed as the session stops; console_enabled is written just after
    await waitFor(async () => !(await consoleState()).console_enabled, {
      what: "the console to be disabled",
    });
    expect(await consoleState()).toEqual({ console_enabled: false, console_info: null });
    late.terminate();
  });

  it("ran ipmitool with the password in its environment only", () => {
    const sol = argvs.filter((argv) => argv.includes("sol"));
    expect(sol.some((argv) => argv.includes("activate"))).toBe(true);
    expect(sol.some((argv) => argv.includes("deactivate"))).toBe(true);
    expect(argvs.flat().some((word) => word.includes(PASSWORD))).toBe(false);
  });

  it("refuses the WebSocket without a valid signed link for that node", async () => {
    const put = await api(`${ctx.url}/v1/nodes/sol-1/states/console`, {
      method: "PUT",
      body: { enabled: true },
    });
    expect(put.status).toBe(202);
    await waitFor(async () => (await consoleState()).console_enabled);
    const url = new URL((await consoleState()).console_info!.url);
    const sig = url.searchParams.get("anvil_sig")!;
    const expires = Number(url.searchParams.get("anvil_expires"));
    const variants: ((u: URL) => void)[] = [
      (u) => (u.search = ""),
      (u) => u.searchParams.set("anvil_sig", sig.slice(0, -1) + (sig.endsWith("A") ? "B" : "A")),
      (u) => u.searchParams.set("anvil_expires", String(expires + 60)),
      // the signature covers the path: another node's console stays shut
      (u) => (u.pathname = u.pathname.replace(/[0-9a-f]{12}$/, "000000000000")),
    ];
    for (const change of variants) {
      const bad = new URL(url);
      change(bad);
      const status = await new Promise<number>((resolve) => {
        const ws = new WebSocket(bad);
        ws.on("unexpected-response", (_req, res) => resolve(res.statusCode ?? 0));
        ws.on("open", () => resolve(101));
        ws.on("error", () => undefined);
      });
      expect(status).toBe(401);
    }
    await api(`${ctx.url}/v1/nodes/sol-1/states/console`, { method: "PUT", body: { enabled: false } });
  });
});
