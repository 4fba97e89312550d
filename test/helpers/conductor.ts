import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { defaultConfig, type ConductorConfig } from "../../conductor/config.ts";
import { createConductor, type Conductor } from "../../conductor/server.ts";
import type { DriverRegistry } from "../../conductor/drivers/hardware-type.ts";
import { silentLogger, type Logger } from "../../shared/log.ts";
import { until } from "./wait.ts";

type ConfigInput = Parameters<typeof defaultConfig>[0];

/** A conductor in this process on a free loopback port, with its own temp data dir. */
export async function startConductor(
  overrides: ConfigInput = {},
  options: { logger?: Logger; drivers?: DriverRegistry } = {},
): Promise<{ conductor: Conductor; url: string; config: ConductorConfig; stop(): Promise<void> }> {
  const dir = mkdtempSync(join(tmpdir(), "anvil-test-"));
  const config = defaultConfig({
    port: 0,
    dataDir: dir,
    databasePath: join(dir, "anvil.sqlite"),
    powerSync: { intervalS: 0 },
    stopGraceS: 0,
    ...overrides,
  });
  const conductor = createConductor(config, {
    logger: options.logger ?? silentLogger,
    drivers: options.drivers,
  });
  const url = await conductor.start();
  return {
    conductor,
    url,
    config,
    async stop() {
      await conductor.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A conductor as its own process (restart and crash tests); resolves once it listens. */
export async function spawnConductor(args: string[]): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, ["--import", "tsx", "conductor/main.ts", "--port", "0", ...args], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  const url = await new Promise<string>((resolve, reject) => {
    const lines = createInterface({ input: child.stderr! });
    const timer = setTimeout(() => reject(new Error("conductor did not start")), 30_000);
    lines.on("line", (line) => {
      const match = /"url":"(http:\/\/[^"]+)"/.exec(line);
      if (match?.[1]) {
        clearTimeout(timer);
        resolve(match[1]);
      }
    });
    child.on("exit", (code) => reject(new Error(`conductor exited with ${code}`)));
  });
  return { child, url };
}

/** JSON over HTTP against the API, as a client would. */
export async function api(
  url: string,
  init: { method?: string; body?: unknown; raw?: string; headers?: Record<string, string> } = {},
): Promise<{ status: number; body: unknown; headers: Headers }> {
  const response = await fetch(url, {
    method: init.method ?? "GET",
    headers: {
      "Content-Type": "application/json",
      "X-OpenStack-Ironic-API-Version": "1.78",
      ...init.headers,
    },
    body: init.raw ?? (init.body === undefined ? undefined : JSON.stringify(init.body)),
  });
  const text = await response.text();
  let body: unknown = text;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    // not JSON: keep the text
  }
  return { status: response.status, body, headers: response.headers };
}

/** The faultstring inside Ironic's double-encoded error envelope. */
export function faultOf(body: unknown): string {
  const envelope = body as { error_message?: string };
  if (typeof envelope?.error_message !== "string")
    throw new Error(`not an Ironic error body: ${JSON.stringify(body)}`);
  const inner = JSON.parse(envelope.error_message) as { faultstring?: string; description?: string };
  return inner.faultstring ?? inner.description ?? "";
}

/**
 * Whether every one of `members` sees all of them alive and knows the URL each serves. Alive alone is not
 * enough: a member read before it registered its URL cannot be forwarded to, so a call is served where it
 * lands until the next heartbeat (a loaded CI machine showed it).
 */
export function clusterFormed(members: readonly { conductor: Conductor }[]): boolean {
  return members.every((c) => {
    const alive = c.conductor.membership.alive();
    return alive.length === members.length && alive.every((r) => r.url !== null);
  });
}

/** Where to poll a node: a conductor's base URL, or the URL with the caller's credentials. */
export type NodeTarget = string | { url: string; headers: Record<string, string> };

/** Polls until the node reaches `state`. @throws Error when it lands in a failed state, or after 60 s */
export async function waitForState(
  target: NodeTarget,
  node: string,
  state: string,
): Promise<Record<string, unknown>> {
  const { url, headers } = typeof target === "string" ? { url: target, headers: {} } : target;
  let last: Record<string, unknown> = {};
  try {
    return await until(
      async () => {
        last = (await api(`${url}/v1/nodes/${node}`, { headers })).body as Record<string, unknown>;
        if (last.provision_state === state) return last;
        const current = String(last.provision_state);
        if (current.endsWith("failed") || current === "error") {
          throw new Error(
            `node ${node} landed in "${current}" instead of "${state}": ${String(last.last_error)}`,
          );
        }
        return undefined;
      },
      { what: `${node} to reach ${state}` },
    );
  } catch (error) {
    if (error instanceof Error && error.message.startsWith("timed out")) {
      throw new Error(`node ${node} never reached ${state}; last: ${JSON.stringify(last).slice(0, 400)}`);
    }
    throw error;
  }
}

/**
 * Waits until nobody holds the node's lock (`reservation` null). A flow writes its state before it releases the
 * lock (on PostgreSQL two round trips apart), so a change sent as soon as the state shows can be refused 409
 * NodeLocked. A node that is not found counts as released: the change sent next reports the 404.
 */
export async function released(target: NodeTarget, node: string): Promise<void> {
  const { url, headers } = typeof target === "string" ? { url: target, headers: {} } : target;
  await until(
    async () => {
      const body = (await api(`${url}/v1/nodes/${node}`, { headers })).body as Record<string, unknown>;
      return typeof body.reservation === "string" ? undefined : true;
    },
    { what: `${node} to be released` },
  );
}

/** A provision request: the target alone, or the whole body (clean_steps, configdrive, service_steps...). */
export type ProvisionRequest = string | { readonly target: string; readonly [field: string]: unknown };

/**
 * PUTs each provision request in turn, each once the node is `released`, each answered 202 (else it throws with
 * the answer), and waits for the state it leads to.
 */
export async function provisionThrough(
  target: NodeTarget,
  node: string,
  steps: ReadonlyArray<readonly [request: ProvisionRequest, state: string]>,
): Promise<void> {
  const { url, headers } = typeof target === "string" ? { url: target, headers: {} } : target;
  for (const [request, state] of steps) {
    const body = typeof request === "string" ? { target: request } : request;
    await released(target, node);
    const put = await api(`${url}/v1/nodes/${node}/states/provision`, { method: "PUT", body, headers });
    if (put.status !== 202)
      throw new Error(`${body.target} ${node}: ${put.status} ${JSON.stringify(put.body)}`);
    await waitForState(target, node, state);
  }
}

/**
 * Powers a node off and waits for the change to land and the node's lock to be released. fake-hardware, as Ironic's, has no power state until
 * a power action, and allocations skip a node without one: what devstack does to its fake nodes.
 */
export async function powerOff(target: NodeTarget, node: string): Promise<void> {
  const { url, headers } = typeof target === "string" ? { url: target, headers: {} } : target;
  const r = await api(`${url}/v1/nodes/${node}/states/power`, {
    method: "PUT",
    body: { target: "power off" },
    headers,
  });
  if (r.status !== 202) throw new Error(`power off ${node}: ${r.status} ${JSON.stringify(r.body)}`);
  await powerSettled(target, node, "power off");
}

/**
 * Waits until a power change has landed (`power_state` is `state`, no target) and the task that made it let
 * go of the node: the driver is called before the task releases its lock, so an action sent as soon as the
 * driver has been called may still get 409 NodeLocked.
 */
export async function powerSettled(target: NodeTarget, node: string, state: string): Promise<void> {
  const { url, headers } = typeof target === "string" ? { url: target, headers: {} } : target;
  await until(
    async () => {
      const body = (await api(`${url}/v1/nodes/${node}`, { headers })).body as Record<string, unknown>;
      const settled = body.power_state === state && body.target_power_state === null;
      return settled && body.reservation === null ? true : undefined;
    },
    { what: `${node} to be ${state} and released` },
  );
}
