import { spawn, type ChildProcess } from "node:child_process";
import { mkdir, rm, symlink, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { join } from "node:path";

/**
 * Debian's nginx (nginx-light, scripts/setup/system-deps.sh) serving a directory's files on loopback, as a real
 * deployment's image store does (nginx, Swift and Glance's file store all send with sendfile): a bench's own
 * process, with its own configuration, temp and log paths under `dir`, removed by stop().
 */
export interface ThrowawayNginx {
  /** Base URL, e.g. http://127.0.0.1:PORT */
  readonly url: string;
  /** Serves `file` at `/name` (a symbolic link in the served directory). */
  serve(name: string, file: string): Promise<void>;
  /** Stops nginx and removes its directory; never throws. */
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((done) => probe.listen(0, "127.0.0.1", done));
  const address = probe.address();
  await new Promise((done) => probe.close(done));
  if (address === null || typeof address === "string") throw new Error("no port");
  return address.port;
}

/**
 * One nginx process (`master_process off`: no privilege drop, no worker to fork; the node server it is compared
 * with is one process too), sendfile on, access log off. @throws when nginx is not installed or does not start.
 */
export async function startThrowawayNginx(dir: string): Promise<ThrowawayNginx> {
  const root = join(dir, "root");
  await mkdir(root, { recursive: true });
  const port = await freePort();
  const config = join(dir, "nginx.conf");
  await writeFile(
    config,
    [
      "daemon off;",
      "master_process off;",
      `pid ${join(dir, "nginx.pid")};`,
      `error_log ${join(dir, "error.log")} warn;`,
      "events { worker_connections 64; }",
      "http {",
      "  access_log off;",
      "  sendfile on;",
      "  tcp_nopush on;",
      "  default_type application/octet-stream;",
      ...["client_body", "proxy", "fastcgi", "uwsgi", "scgi"].map(
        (kind) => `  ${kind}_temp_path ${join(dir, kind)};`,
      ),
      `  server { listen 127.0.0.1:${port}; root ${root}; }`,
      "}",
      "",
    ].join("\n"),
  );
  const child: ChildProcess = spawn("nginx", ["-c", config, "-p", dir, "-e", join(dir, "error.log")], {
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  child.stderr?.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<void>((done) => child.once("exit", () => done()));
  const spawned = new Promise<void>((done, fail) => {
    child.once("error", fail);
    child.once("spawn", done);
  });
  await spawned;
  const url = `http://127.0.0.1:${port}`;
  // up once it answers (a 404 for a path it does not hold)
  for (let attempt = 0; ; attempt += 1) {
    if (child.exitCode !== null) throw new Error(`nginx exited ${child.exitCode}: ${stderr}`);
    const answer = await fetch(`${url}/-`).catch(() => undefined);
    if (answer) {
      await answer.body?.cancel();
      break;
    }
    if (attempt > 100) throw new Error(`nginx did not answer on ${url}: ${stderr}`);
    await new Promise((done) => setTimeout(done, 50));
  }
  return {
    url,
    serve: (name, file) => symlink(file, join(root, name)),
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill("SIGTERM");
        await exited;
      }
      await rm(dir, { recursive: true, force: true });
    },
  };
}
