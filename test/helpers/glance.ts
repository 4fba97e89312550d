import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, openSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freeLoopbackPort } from "./free-port.ts";
import { runOk } from "./run.ts";

/** A throwaway Debian glance-api on loopback (scripts/setup/glance.sh): trusted headers, file store, SQLite. */
export interface ThrowawayGlance {
  url: string;
  /** Where Glance keeps image bytes (its file store): `${storeDir}/${id}`. */
  storeDir: string;
  /** The headers a caller in `project` with `roles` sends (what keystonemiddleware would set). */
  headers(project: string, roles?: string): Record<string, string>;
  /** Creates and uploads an image as `project`; resolves with its id. */
  createImage(options: {
    project: string;
    data: Buffer;
    visibility?: "public" | "private" | "shared" | "community";
    diskFormat?: string;
  }): Promise<string>;
  /** How many times Glance has served GET /v2/images/{id}/file (its access log). */
  fileGets(id: string): number;
  stop(): Promise<void>;
}

/** Starts Glance; ~20 s on a busy 2-core machine (database creation, then eventlet's start). */
export async function startGlance(): Promise<ThrowawayGlance> {
  const dir = mkdtempSync(join(tmpdir(), "anvil-glance-"));
  const port = await freeLoopbackPort();
  await runOk("bash", ["scripts/setup/glance.sh", dir, String(port)]);
  const log = join(dir, "api.log");
  const out = openSync(log, "a");
  const child: ChildProcess = spawn("glance-api", ["--config-file", join(dir, "glance-api.conf")], {
    stdio: ["ignore", out, out],
    detached: true,
  });
  const url = `http://127.0.0.1:${port}`;
  const headers = (project: string, roles = "admin,member,reader") => ({
    "X-Identity-Status": "Confirmed",
    "X-Project-Id": project,
    "X-User-Id": `user-${project}`,
    "X-Roles": roles,
  });
  const deadline = Date.now() + 90_000;
  for (;;) {
    if (child.exitCode !== null)
      throw new Error(`glance-api exited: ${readFileSync(log, "utf8").slice(-2000)}`);
    const ok = await fetch(`${url}/v2/images`, { headers: headers("probe") })
      .then((r) => r.ok)
      .catch(() => false);
    if (ok) break;
    if (Date.now() > deadline)
      throw new Error(`glance-api did not answer: ${readFileSync(log, "utf8").slice(-2000)}`);
    await new Promise((r) => setTimeout(r, 300));
  }
  return {
    url,
    storeDir: join(dir, "images"),
    headers,
    async createImage(options) {
      const created = await fetch(`${url}/v2/images`, {
        method: "POST",
        headers: { ...headers(options.project), "Content-Type": "application/json" },
        body: JSON.stringify({
          name: `test-${Date.now()}`,
          disk_format: options.diskFormat ?? "raw",
          container_format: "bare",
          visibility: options.visibility ?? "private",
        }),
      });
      if (created.status !== 201) throw new Error(`image create: ${created.status} ${await created.text()}`);
      const { id } = (await created.json()) as { id: string };
      const upload = await fetch(`${url}/v2/images/${id}/file`, {
        method: "PUT",
        headers: { ...headers(options.project), "Content-Type": "application/octet-stream" },
        body: options.data,
      });
      if (upload.status !== 204) throw new Error(`image upload: ${upload.status} ${await upload.text()}`);
      return id;
    },
    fileGets(id) {
      const pattern = new RegExp(`"GET /v2/images/${id}/file HTTP/1\\.1" 200`, "g");
      return (readFileSync(log, "utf8").match(pattern) ?? []).length;
    },
    async stop() {
      if (child.exitCode === null && child.pid !== undefined) {
        const exited = new Promise((r) => child.once("exit", r));
        process.kill(-child.pid, "SIGTERM");
        await Promise.race([exited, new Promise((r) => setTimeout(r, 10_000))]);
        if (child.exitCode === null) process.kill(-child.pid, "SIGKILL");
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
