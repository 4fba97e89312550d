import { chmod, mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "vitest";
import { exec } from "../../shared/system/exec.ts";
import { REPO_ROOT } from "../../scripts/lab/lab.ts";
import { until } from "./wait.ts";

/**
 * The lab cloud (scripts/cloud/cloud.sh) as the e2e tests drive it: up and down, and the stock `openstack`
 * CLI with the admin's Keystone credentials.
 */

const CLOUD = join(REPO_ROOT, "scripts", "cloud", "cloud.sh");
// NOTE: generous: on the shared 2-core machine one `openstack` command takes 2–12 s.
const CLI_TIMEOUT_MS = 5 * 60_000;

export const seconds = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;

/** KEY=VALUE lines (with or without `export`), as cloud.sh writes admin-openrc and cloud.env. */
export function parseEnvFile(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split("\n")) {
    const m = /^(?:export )?([A-Z_0-9]+)=(.*)$/.exec(line.trim());
    if (m?.[1] !== undefined && m[2] !== undefined) out[m[1]] = m[2];
  }
  return out;
}

export interface LabCloud {
  /** The state directory (ANVIL_CLOUD_DIR). */
  dir: string;
  /** admin-openrc: the admin's Keystone credentials. */
  env: Record<string, string>;
  /** cloud.env: ports, START_MS, LAB_DIR. */
  cloudEnv: Record<string, string>;
  /** Whether down() stops it (false for a cloud the caller started). */
  owned: boolean;
}

/** Runs cloud.sh on the cloud's directory; resolves with its stderr (the log). */
export async function cloudScript(dir: string, args: string[], timeoutMs = 20 * 60_000): Promise<string> {
  const r = await exec("bash", [CLOUD, ...args], { env: { ANVIL_CLOUD_DIR: dir }, timeoutMs });
  expect(r.code, `cloud.sh ${args.join(" ")}: ${r.stderr.slice(-3000)}`).toBe(0);
  return r.stderr;
}

async function read(dir: string, owned: boolean): Promise<LabCloud> {
  return {
    dir,
    owned,
    env: parseEnvFile(await readFile(join(dir, "admin-openrc"), "utf8")),
    cloudEnv: parseEnvFile(await readFile(join(dir, "cloud.env"), "utf8")),
  };
}

/**
 * `cloud.sh up ARGS` in a fresh directory under /tmp, or the cloud already up in `reuse` (left up after).
 * Resolves with the cloud and the script's log; a failed start is taken down before the error is thrown.
 */
export async function cloudUp(args: string[], reuse?: string): Promise<{ cloud: LabCloud; log: string }> {
  if (reuse) return { cloud: await read(reuse, false), log: "" };
  // NOTE: under /tmp, not .tmp/: PostgreSQL runs as its own user and must be able to enter the directory.
  const parent = await mkdtemp(join(tmpdir(), "anvil-cloud-e2e-"));
  await chmod(parent, 0o755);
  const dir = join(parent, "cloud");
  try {
    const log = await cloudScript(dir, ["up", ...args]);
    return { cloud: await read(dir, true), log };
  } catch (error) {
    // a half-started cloud: stop what did start (by its pids), then report why it failed
    await cloudScript(dir, ["down"], 2 * 60_000).catch(() => undefined);
    await rm(parent, { recursive: true, force: true });
    throw error;
  }
}

export async function cloudDown(cloud: LabCloud): Promise<void> {
  if (!cloud.owned) return;
  await cloudScript(cloud.dir, ["down"], 2 * 60_000);
  await rm(join(cloud.dir, ".."), { recursive: true, force: true });
}

/**
 * The stock CLI with the admin's Keystone credentials (in the environment, never argv). Bare-metal commands
 * go system scoped, as an operator administers Ironic's fleet (a project-scoped admin is only its
 * project's owner to Anvil's policy, as in Ironic's new defaults); the rest project scoped.
 */
export async function openstack(cloud: LabCloud, args: string[]): Promise<string> {
  const { OS_PROJECT_NAME: _project, OS_PROJECT_DOMAIN_NAME: _domain, ...unscoped } = cloud.env;
  const scoped = args[0] === "baremetal" ? { ...unscoped, OS_SYSTEM_SCOPE: "all" } : cloud.env;
  const r = await exec("openstack", args, { env: scoped, timeoutMs: CLI_TIMEOUT_MS });
  expect(r.code, `openstack ${args.join(" ")}: ${r.stderr.slice(-2000)}`).toBe(0);
  return r.stdout;
}

export async function openstackJson<T>(cloud: LabCloud, args: string[]): Promise<T> {
  return JSON.parse(await openstack(cloud, [...args, "-f", "json"])) as T;
}

/**
 * Polls through the shared helper every 2 s, riding over a probe's failures (an `openstack` command that
 * fails while a service restarts or a compute settles); the last failure is named on timeout.
 */
export async function settle<T>(
  what: string,
  probe: () => Promise<T | undefined>,
  timeoutMs: number,
): Promise<T> {
  let last: unknown;
  try {
    return await until(
      async () => {
        try {
          return await probe();
        } catch (error) {
          last = error;
          return undefined;
        }
      },
      { what, timeoutMs, intervalMs: 2000 },
    );
  } catch (error) {
    throw new Error(`${String(error)} (last failure: ${String(last)})`);
  }
}

/**
 * What the computes were doing, for a failed wait on Nova: from each nova-compute's log its errors, warnings
 * and hash ring lines (the ironic driver logs its members at debug, cloud.sh turns that on) and its last lines,
 * then `cloud.sh status` (which processes still run; each compute up or not, mapped or not, its node count),
 * last because a CI log keeps the end.
 */
export async function computesDiagnosis(cloud: LabCloud): Promise<string> {
  const out: string[] = [];
  for (let i = 1; i <= Number(cloud.cloudEnv.COMPUTES ?? 0); i++) {
    const lines = (await readFile(join(cloud.dir, "log", `nova-compute-${i}.log`), "utf8").catch(() => ""))
      .split("\n")
      .filter((line) => line !== "");
    const notable = lines.filter((l) =>
      / (ERROR|WARNING) |Traceback|Hash ring members|available node/.test(l),
    );
    out.push(
      `nova-compute-${i}.log (${lines.length} lines), notable (last 40):`,
      ...notable.slice(-40),
      `nova-compute-${i}.log, last 15:`,
      ...lines.slice(-15),
    );
  }
  const status = await exec("bash", [CLOUD, "status"], {
    env: { ANVIL_CLOUD_DIR: cloud.dir },
    timeoutMs: 60_000,
  });
  out.push(`cloud.sh status:\n${status.stdout.trim()}`);
  return out.join("\n");
}

/** A Keystone token for direct reads of Nova's and Placement's APIs (what the CLI would print). */
export async function token(cloud: LabCloud): Promise<string> {
  return (await openstackJson<{ id: string }>(cloud, ["token", "issue"])).id;
}

export async function api<T>(url: string, tok: string, microversion?: string): Promise<T> {
  const headers: Record<string, string> = { "X-Auth-Token": tok, Accept: "application/json" };
  if (microversion) headers["OpenStack-API-Version"] = microversion;
  const res = await fetch(url, { headers });
  expect(res.status, `${url}: ${await res.clone().text()}`).toBe(200);
  return (await res.json()) as T;
}

export interface Hypervisor {
  id: string;
  hypervisor_hostname: string;
  state: string;
  service: { host: string };
}

export async function hypervisors(cloud: LabCloud, tok: string): Promise<Hypervisor[]> {
  const url = `http://127.0.0.1:${cloud.cloudEnv.NOVA_PORT}/v2.1/os-hypervisors/detail`;
  return (await api<{ hypervisors: Hypervisor[] }>(url, tok, "compute 2.53")).hypervisors;
}

export interface BaremetalNode {
  uuid: string;
  provision_state: string;
  power_state: string | null;
  instance_uuid: string | null;
}

export const node = (cloud: LabCloud, id: string): Promise<BaremetalNode> =>
  openstackJson<BaremetalNode>(cloud, ["baremetal", "node", "show", id]);
export const server = (cloud: LabCloud, id: string): Promise<Record<string, string>> =>
  openstackJson<Record<string, string>>(cloud, ["server", "show", id]);

/** Waits for the server's status, then for the node it runs on to show the power state; returns the node. */
export async function serverSettles(
  cloud: LabCloud,
  id: string,
  want: { status: string; powerState: string },
): Promise<BaremetalNode> {
  const nodeId = await settle(
    `server ${id} ${want.status}`,
    async () => {
      const s = await server(cloud, id);
      expect(s.status).not.toBe("ERROR");
      return s.status === want.status ? s["OS-EXT-SRV-ATTR:hypervisor_hostname"] : undefined;
    },
    5 * 60_000,
  );
  return settle(
    `node ${nodeId} ${want.powerState}`,
    async () => {
      const n = await node(cloud, nodeId);
      return n.power_state === want.powerState ? n : undefined;
    },
    2 * 60_000,
  );
}

export async function nodeAvailable(cloud: LabCloud, nodeId: string): Promise<BaremetalNode> {
  return settle(
    `node ${nodeId} available`,
    async () => {
      const n = await node(cloud, nodeId);
      return n.provision_state === "available" && n.instance_uuid === null ? n : undefined;
    },
    5 * 60_000,
  );
}

/** Creates an image from a file and waits until Glance marks it active; resolves with its id. */
export async function createImage(cloud: LabCloud, file: string, name: string): Promise<string> {
  const img = await openstackJson<{ id: string }>(cloud, [
    "image", "create", "--public", "--disk-format", "qcow2", "--container-format", "bare", "--file", file, name,
  ]); // prettier-ignore
  // The CLI prints the image as created, before its upload; Glance then marks it active.
  await settle(
    `image ${name} active`,
    async () => {
      const shown = await openstackJson<{ status: string }>(cloud, ["image", "show", img.id]);
      return shown.status === "active" ? shown.status : undefined;
    },
    2 * 60_000,
  );
  return img.id;
}

/**
 * The bare-metal flavor as Ironic's install guide makes it: one of the nodes' resource class (Placement's
 * CUSTOM_ name for it), no VCPU/RAM/disk.
 */
export async function createBaremetalFlavor(
  cloud: LabCloud,
  name: string,
  resourceClass = "baremetal",
): Promise<void> {
  const custom = `CUSTOM_${resourceClass.toUpperCase().replace(/[^A-Z0-9]/g, "_")}`;
  await openstack(cloud, [
    "flavor", "create", "--ram", "768", "--vcpus", "1", "--disk", "1",
    "--property", `resources:${custom}=1`, "--property", "resources:VCPU=0",
    "--property", "resources:MEMORY_MB=0", "--property", "resources:DISK_GB=0", name,
  ]); // prettier-ignore
}
