import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { startConductor, waitForState } from "../helpers/conductor.ts";
import { ensureAgentBuilt, type AgentProcess } from "../helpers/agent.ts";
import { startHttpImageServer, type HttpImageServer } from "../helpers/http-image-server.ts";
import { readRange, sha256, sparseCopyWithBlockMap } from "../helpers/disk.ts";
import { enrollSimulatedNode } from "../helpers/simulated-node.ts";

const BIN = resolve(import.meta.dirname, "../../bin/anvil");
const MiB = 1024 * 1024;

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a command to its end, collecting its output (the CLI as a child process, as an operator runs it). */
function run(command: string, args: string[], env: Record<string, string>): Promise<Run> {
  return new Promise((done, fail) => {
    const child = spawn(command, args, { cwd: "/", env: { ...process.env, ...env } });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    child.on("error", fail);
    child.on("close", (code) => done({ code, stdout, stderr }));
  });
}

/** The "a -> b" pairs of a wait's output, in order. */
const transitions = (output: string): string[] =>
  [
    ...output.matchAll(
      /\d\d:\d\d:\d\dZ {2}([a-z][a-z -]*) -> ([a-z][a-z -]*?)(?: \(target: [a-z -]+\))?\r?$/gm,
    ),
  ].map((m) => `${m[1]} -> ${m[2]}`);

/**
 * `anvil node deploy --wait` through the real agent executable (simulated hardware, the disk a file), the
 * image from a real HTTP server: the CLI shows every state change and the write progress from the event stream.
 */
describe("anvil node deploy --wait with the agent", () => {
  const dir = mkdtempSync(join(tmpdir(), "anvil-cli-deploy-"));
  let executable = "";
  let images: HttpImageServer;
  let ctx: Awaited<ReturnType<typeof startConductor>>;
  const image = Buffer.alloc(24 * MiB);
  let imageSha = "";
  const agents: AgentProcess[] = [];
  let macCounter = 0x20;

  beforeAll(async () => {
    executable = await ensureAgentBuilt();
    images = await startHttpImageServer();
    randomBytes(4 * MiB).copy(image, 0);
    randomBytes(2 * MiB).copy(image, 16 * MiB);
    imageSha = sha256(image);
    await writeFile(join(dir, "disk.raw"), image);
    images.serve("/disk.raw", join(dir, "disk.raw"));
    // A sparse copy and bmaptool's block map of it: 6 of its 24 MiB hold data.
    await sparseCopyWithBlockMap(join(dir, "disk.raw"), join(dir, "sparse.raw"), join(dir, "sparse.bmap"));
    images.serve("/sparse.raw", join(dir, "sparse.raw"));
    images.serve("/sparse.bmap", join(dir, "sparse.bmap"));
    ctx = await startConductor({ timeoutCheckIntervalS: 1000 });
  }, 300_000);
  afterEach(async () => {
    for (const agent of agents.splice(0)) await agent.stop();
  });
  afterAll(async () => {
    await ctx.stop();
    await images.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** An available node with the agent's deploy interface, and a way to "boot" its ramdisk (start the agent). */
  async function availableNode(name: string) {
    const mac = `52:54:00:00:02:${(macCounter++).toString(16).padStart(2, "0")}`;
    const { disk, boot } = await enrollSimulatedNode({
      url: ctx.url,
      dir,
      name,
      mac,
      executable,
      body: { automated_clean: false },
    });
    const env = { ANVIL_URL: ctx.url };
    expect((await run(BIN, ["node", "manage", name, "--wait"], env)).code).toBe(0);
    expect((await run(BIN, ["node", "provide", name, "--wait"], env)).code).toBe(0);
    /** Once the node waits for its agent, start one (what the PXE boot would do). */
    const bootWhenWaiting = async (): Promise<void> => {
      await waitForState(ctx.url, name, "wait call-back");
      agents.push(boot());
    };
    return { disk, bootWhenWaiting, env };
  }

  it("prints each state change and the write progress, exits 0 at active; the disk holds the image", async () => {
    const { disk, bootWhenWaiting, env } = await availableNode("c1");
    const [deploy] = await Promise.all([
      run(
        BIN,
        [
          "node",
          "deploy",
          "c1",
          "--image",
          `${images.url}/disk.raw`,
          "--checksum",
          `sha256:${imageSha}`,
          "--wait",
          "--timeout",
          "120",
        ],
        env,
      ),
      bootWhenWaiting(),
    ]);
    expect(deploy.stderr).toBe("");
    expect(deploy.code).toBe(0);
    expect(transitions(deploy.stdout)).toEqual([
      "available -> deploying",
      "deploying -> wait call-back",
      "wait call-back -> deploying",
      "deploying -> active",
    ]);
    // stdout is a pipe: plain progress lines, the last one complete
    expect(deploy.stdout).toMatch(
      /write_image {2}24\.0 MiB \/ 24\.0 MiB {2}100% {2}\S+ \S+\/s {2}ETA 0:00$/m,
    );
    expect(deploy.stdout).not.toContain("\x1b[");
    const progressAt = deploy.stdout.indexOf("write_image  ");
    expect(progressAt).toBeGreaterThan(deploy.stdout.indexOf("wait call-back -> deploying"));
    expect(progressAt).toBeLessThan(deploy.stdout.indexOf("deploying -> active"));
    expect(sha256(await readRange(disk, 0, image.length))).toBe(imageSha);
  });

  it("on a terminal the progress line is redrawn in place", async () => {
    const { bootWhenWaiting, env } = await availableNode("c2");
    const command = [BIN, "node", "deploy", "c2", "--image", `${images.url}/disk.raw`, "--wait"].join(" ");
    // script(1) gives the CLI a pseudo-terminal as stdout
    const [deploy] = await Promise.all([
      run("script", ["-qfec", command, "/dev/null"], env),
      bootWhenWaiting(),
    ]);
    expect(deploy.code).toBe(0);
    // carriage return + erase line (ESC [2K) before each redraw
    expect(deploy.stdout).toContain("\r\x1b[2Kwrite_image  24.0 MiB / 24.0 MiB  100%");
    // the redrawn line is ended before the next state line
    expect(deploy.stdout).toMatch(/100%[^\n]*\r?\n\d\d:\d\d:\d\dZ {2}deploying -> active/);
  });

  it("--bmap: only the block map's 6 MiB are fetched, and the disk still holds the whole image", async () => {
    const { disk, bootWhenWaiting, env } = await availableNode("c4");
    const args = ["node", "deploy", "c4", "--image", `${images.url}/sparse.raw`];
    args.push("--bmap", `${images.url}/sparse.bmap`, "--checksum", `sha256:${imageSha}`, "--wait");
    const [deploy] = await Promise.all([run(BIN, args, env), bootWhenWaiting()]);
    expect(deploy.stderr).toBe("");
    expect(deploy.code).toBe(0);
    expect(deploy.stdout).toMatch(/write_image {2}6\.0 MiB \/ 6\.0 MiB {2}100%/);
    expect(sha256(await readRange(disk, 0, image.length))).toBe(imageSha);
  });

  it("a checksum mismatch: exits 1 with the node's last_error", async () => {
    const { bootWhenWaiting, env } = await availableNode("c3");
    const [deploy] = await Promise.all([
      run(
        BIN,
        [
          "node",
          "deploy",
          "c3",
          "--image",
          `${images.url}/disk.raw`,
          "--checksum",
          `sha256:${"0".repeat(64)}`,
          "--wait",
        ],
        env,
      ),
      bootWhenWaiting(),
    ]);
    expect(deploy.code).toBe(1);
    expect(deploy.stderr).toMatch(/^c3: node is in "deploy failed": .*sha256 mismatch/m);
    expect(transitions(deploy.stdout).at(-1)).toBe("deploying -> deploy failed");
  });
});
