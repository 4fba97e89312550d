/**
 * Image deploy through the API (not a test): what a user waits for, `PUT …/states/provision {"target":
 * "active"}` → `active`, against `curl -s URL | dd of=TARGET bs=4M oflag=direct` onto the same target, in the
 * same run. A conductor process (SQLite, fast track, fake power) drives the real agent executable on simulated
 * hardware whose disk is a file; the images come from a loopback HTTP server: `--server node` (the default) the
 * test helper's node:http server in this process, `--server nginx` Debian's nginx (sendfile, its own process), as a
 * real deployment serves images from nginx, Swift or Glance. Both `curl | dd` and the deploys read that server.
 *   dense: 2 GiB of random data, raw, sha256 verified                 goal: >= 1.5x curl | dd
 *   qcow2: a 4 GiB image with 10 % data, as qcow2, sha256 verified    goal: >= 10x curl | dd of its raw form
 * Every round also measures the machine's limits: dd from /dev/zero onto the target (disk write), sha256 of
 * the dense image in Node (hash), curl of the dense image to /dev/null from each server (loopback HTTP: the node
 * server's and nginx's, whichever serves the deploys; nginx's only when it is installed). Each deploy is split
 * into phases from the event stream (`GET /v1/events`): accepted, agent's write_image step started, write
 * started (first progress frame), write_image done, active; with the agent's own write time (deploy_result).
 * Usage: node --import tsx scripts/bench/deploy-image.ts [--small] [--rounds 3] [--only dense|qcow2] [--profile] [--boot]
 *   [--server node|nginx] [--timeline] [--fast-track]
 *   --fast-track: the conductor runs with fast track and each deploy goes to the agent that cleaned the node
 *   --timeline: prints one deploy per image and side (the last round's) as a timeline in ms from the PUT: the
 *   event stream's events, the conductor's log lines and the agent's (JSON lines with their own clocks)
 *   --small: 1/8 sizes; --profile: this checkout's conductor and its agent (from source) run with --cpu-prof
 *   (written to .tmp/bench-prof);
 *   --boot: the default now (see BOOT): every deploy boots the "ramdisk" (the agent process starts at wait
 *   call-back and stops once the node is active), so the call-back, lookup and step discovery are in the figure
 * BENCH_BASELINE_REV=<revision>: that revision's conductor and agent (git archive; its agent executable built
 * from it) deploy the same images onto their own simulated node in the same interleaved rounds (AB, BA, …);
 * the medians and the median per-round ratio are printed at the end.
 */
import { execFileSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { symlinkSync } from "node:fs";
import { mkdir, rm, stat, truncate, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { performance } from "node:perf_hooks";
import { createInterface } from "node:readline";
import { parseArgs } from "node:util";
import { ensureAgentBuilt, type AgentProcess } from "../../test/helpers/agent.ts";
import { api } from "../../test/helpers/conductor.ts";
import { startHttpImageServer } from "../../test/helpers/http-image-server.ts";
import { runOk } from "../../test/helpers/run.ts";
import { enrollSimulatedNode } from "../../test/helpers/simulated-node.ts";
import { makeSparseImage } from "./bench-images.ts";
import { startBenchConductor } from "./conductor-process.ts";
import { startThrowawayNginx } from "./throwaway-nginx.ts";
import {
  type Figure,
  type PairedRound,
  compareRounds,
  loadNow,
  median,
  printLoad,
  roundOrder,
} from "./interleave.ts";

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;
/** The simulated node's disk (a sparse file, made fresh before every write). */
const DISK_BYTES = 20 * GiB;
const BASELINE_REV = process.env.BENCH_BASELINE_REV;

const { values } = parseArgs({
  options: {
    small: { type: "boolean", default: false },
    rounds: { type: "string", default: "3" },
    only: { type: "string" },
    profile: { type: "boolean", default: false },
    boot: { type: "boolean", default: false },
    server: { type: "string", default: "node" },
    timeline: { type: "boolean", default: false },
    "fast-track": { type: "boolean", default: false },
  },
});
if (values.server !== "node" && values.server !== "nginx") throw new Error("--server node|nginx");
const SERVER = values.server;
const ROUNDS = Number(values.rounds);
/**
 * By default every deploy boots the "ramdisk" (its agent starts at wait call-back). `--fast-track` is Ironic's
 * fast track as an operator runs it: the conductor keeps the agent that cleaned the node, so the deploy goes
 * to a running agent. Fast track asks the power state (as Ironic's does), so the undeploy between deploys
 * cleans (automated_clean): the node boots the ramdisk for cleaning and stays on it, available. `--boot` is
 * kept as a no-op.
 */
const FAST_TRACK = values["fast-track"];
const BOOT = !FAST_TRACK;
const must = (command: string, args: string[]): Promise<string> =>
  runOk(command, args, { timeoutMs: 30 * 60_000 });
const seconds = (from: number, to = performance.now()): number => (to - from) / 1000;

/** One event of the stream, with the time this process read it. */
interface Seen {
  type: string;
  data: Record<string, unknown>;
  at: number;
}

/** A reader of `GET /v1/events?node=…`: keeps every event and wakes whoever waits for one. */
class EventStream {
  readonly seen: Seen[] = [];
  private readonly waiters = new Set<() => void>();
  private readonly abort = new AbortController();

  static async open(url: string, node: string): Promise<EventStream> {
    const stream = new EventStream();
    const response = await fetch(`${url}/v1/events?node=${node}`, {
      headers: { "X-OpenStack-Ironic-API-Version": "latest" },
      signal: stream.abort.signal,
    });
    if (!response.ok || !response.body) throw new Error(`GET /v1/events: ${response.status}`);
    void stream.read(response.body).catch(() => undefined);
    return stream;
  }

  private async read(body: ReadableStream<Uint8Array>): Promise<void> {
    const decoder = new TextDecoder();
    let text = "";
    for await (const chunk of body) {
      text += decoder.decode(chunk, { stream: true });
      let end: number;
      while ((end = text.indexOf("\n\n")) >= 0) {
        const frame = text.slice(0, end);
        text = text.slice(end + 2);
        const type = /^event: (.*)$/m.exec(frame)?.[1];
        const data = /^data: (.*)$/m.exec(frame)?.[1];
        if (type === undefined || data === undefined) continue;
        this.seen.push({ type, data: JSON.parse(data) as Record<string, unknown>, at: performance.now() });
        for (const wake of this.waiters) wake();
      }
    }
  }

  /** Resolves with the first event from `index` on that `match` accepts. */
  async waitFor(index: number, match: (event: Seen) => boolean, timeoutMs = 30 * 60_000): Promise<Seen> {
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      const found = this.seen.slice(index).find(match);
      if (found) return found;
      if (performance.now() > deadline) throw new Error("timed out waiting for an event");
      await new Promise<void>((wake) => {
        const done = (): void => {
          this.waiters.delete(done);
          clearTimeout(timer);
          wake();
        };
        const timer = setTimeout(done, 1_000);
        this.waiters.add(done);
      });
    }
  }

  close(): void {
    this.abort.abort();
  }
}

/** A conductor with one simulated node whose agent stays connected between deploys (fast track). */
interface Side {
  name: string;
  url: string;
  stop: () => Promise<void>;
  uuid: string;
  disk: string;
  events: EventStream;
  agent?: AgentProcess;
  /** Starts the node's agent as a boot into the ramdisk would (a fresh boot id). */
  boot: () => AgentProcess;
  /** The conductor's log lines (JSON, with their `time`), for --timeline. */
  log: string[];
}

/** The image a deploy writes, with what the user passes and how many bytes land on the disk. */
interface Image {
  label: string;
  url: string;
  sha256: string;
  /** The disk bytes the image stands for (its virtual size): the MB/s of both sides count these. */
  bytes: number;
  /** What curl | dd writes for the same disk: the raw form. */
  rawUrl: string;
}

/** One deploy's phases, seconds from the PUT. */
interface DeployRun {
  total: number;
  accepted: number;
  stepStart: number;
  writeStart: number;
  writeDone: number;
  agentWrite: number;
  /** --boot: the node waits for its agent (wait call-back), and the agent's hello lands (NaN with fast track) */
  waiting: number;
  connected: number;
  /** --timeline: the deploy's events and log lines, ms from the PUT. */
  timeline: string[];
}

const provision = (side: Side, target: string) =>
  api(`${side.url}/v1/nodes/${side.uuid}/states/provision`, { method: "PUT", body: { target } });

/** Waits for the node's provision state `state`; @throws with last_error when it lands in a failed one. */
async function reach(side: Side, from: number, state: string): Promise<Seen> {
  const event = await side.events
    .waitFor(
      from,
      (e) =>
        e.type === "provision" &&
        (e.data.provision_state === state || String(e.data.provision_state).endsWith("failed")),
      10 * 60_000,
    )
    .catch((error: unknown) => {
      throw new Error(
        `${side.name}: never reached ${state}; agent's log: ${side.agent?.stderr() ?? "(none)"}`,
        {
          cause: error,
        },
      );
    });
  if (event.data.provision_state !== state) {
    const node = (await api(`${side.url}/v1/nodes/${side.uuid}`)).body as { last_error?: string };
    throw new Error(`${side.name}: ${String(event.data.provision_state)}: ${node.last_error}`);
  }
  return event;
}

/** Events and JSON log lines (epoch-ms `time`) as `+ms source what`, sorted, from the PUT at `t0` (performance.now()). */
function timeline(t0: number, events: Seen[], logLines: string[]): string[] {
  const t0Epoch = performance.timeOrigin + t0;
  const rows: [number, string][] = events.map((e) => {
    const { node: _node, ...data } = e.data;
    return [e.at - t0, `event ${e.type} ${JSON.stringify(data)}`];
  });
  for (const line of logLines) {
    if (!line.startsWith("{")) continue;
    const entry = JSON.parse(line) as Record<string, unknown>;
    const { time, msg, name, level: _level, pid: _pid, hostname: _host, ...rest } = entry;
    if (typeof time !== "number") continue;
    rows.push([time - t0Epoch, `${String(name ?? "log")} ${String(msg)} ${JSON.stringify(rest)}`]);
  }
  return rows
    .filter(([ms]) => ms >= -5)
    .sort((a, b) => a[0] - b[0])
    .map(([ms, what]) => `${ms.toFixed(1).padStart(8)} ms  ${what.slice(0, 220)}`);
}

async function freshDisk(disk: string): Promise<void> {
  await truncate(disk, 0);
  await truncate(disk, DISK_BYTES);
}

async function setImage(side: Side, image: Image): Promise<void> {
  const patch = await api(`${side.url}/v1/nodes/${side.uuid}`, {
    method: "PATCH",
    body: [
      { op: "add", path: "/instance_info/image_source", value: image.url },
      { op: "add", path: "/instance_info/image_os_hash_algo", value: "sha256" },
      { op: "add", path: "/instance_info/image_os_hash_value", value: image.sha256 },
    ],
  });
  if (patch.status !== 200)
    throw new Error(`${side.name}: PATCH ${patch.status} ${JSON.stringify(patch.body)}`);
}

/** Deploy as a user does, timed from the PUT to the `active` event; then undeploy (not timed). */
async function deployOnce(side: Side, image: Image): Promise<DeployRun> {
  await freshDisk(side.disk);
  await setImage(side, image);
  const from = side.events.seen.length;
  const logFrom = side.log.length;
  const t0 = performance.now();
  const put = await provision(side, "active");
  const accepted = seconds(t0);
  if (put.status !== 202)
    throw new Error(`${side.name}: PUT active ${put.status} ${JSON.stringify(put.body)}`);
  if (BOOT) {
    // the machine powers on into the ramdisk: its agent starts when the node waits for it
    await reach(side, from, "wait call-back");
    side.agent = side.boot();
  }
  const active = await reach(side, from, "active");
  const events = side.events.seen.slice(from);
  const at = (match: (e: Seen) => boolean): number => {
    const found = events.find(match);
    return found ? seconds(t0, found.at) : NaN;
  };
  const isWrite = (e: Seen): boolean => String(e.data.step).includes("write_image");
  const node = (await api(`${side.url}/v1/nodes/${side.uuid}`)).body as {
    driver_internal_info: { deploy_result?: { duration_ms?: number } };
  };
  const run: DeployRun = {
    total: seconds(t0, active.at),
    accepted,
    stepStart: at((e) => e.type === "step" && isWrite(e) && e.data.status === "start"),
    writeStart: at((e) => e.type === "progress" && isWrite(e)),
    writeDone: at((e) => e.type === "step" && isWrite(e) && e.data.status === "done"),
    agentWrite: (node.driver_internal_info.deploy_result?.duration_ms ?? NaN) / 1000,
    waiting: at((e) => e.type === "provision" && e.data.provision_state === "wait call-back"),
    connected: at((e) => e.type === "agent" && e.data.connected === true),
    timeline: [],
  };
  // the instance boots: the ramdisk's agent is gone
  const agentLog = (await side.agent?.stop())?.stderr ?? "";
  side.agent = undefined;
  if (values.timeline)
    run.timeline = timeline(t0, events, [...side.log.slice(logFrom), ...agentLog.split("\n")]);
  await undeploy(side);
  return run;
}

/** Undeploy (not timed). With fast track it cleans on a fresh ramdisk boot whose agent stays for the next deploy. */
async function undeploy(side: Side): Promise<void> {
  const back = side.events.seen.length;
  const answer = await provision(side, "deleted");
  if (answer.status !== 202) throw new Error(`${side.name}: undeploy ${answer.status}`);
  if (FAST_TRACK) {
    await reach(side, back, "clean wait");
    side.agent = side.boot();
  }
  await reach(side, back, "available");
}

/** A conductor (this checkout's, or `cwd`'s) with one node enrolled, available, its agent connected. */
async function startSide(options: {
  name: string;
  dir: string;
  cwd?: string;
  executable: string;
  warmup: Image;
  mac: string;
  nodeArgs?: string[];
}): Promise<Side> {
  const { name, dir, executable } = options;
  await mkdir(dir, { recursive: true });
  const { child, url } = await startBenchConductor(dir, {
    name,
    args: BOOT ? [] : ["--fast-track"],
    ...(options.cwd ? { cwd: options.cwd } : {}),
    ...(options.nodeArgs ? { nodeArgs: options.nodeArgs } : {}),
  });
  // awaited: a conductor under --cpu-prof writes its profile as it exits
  const stop = async (): Promise<void> => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((done) => child.once("exit", done));
    child.kill("SIGTERM");
    await exited;
  };
  try {
    // without fast track, automated_clean false: an undeploy goes back to available at once
    const node = await enrollSimulatedNode({
      url,
      dir,
      name: "bench-1",
      mac: options.mac,
      executable,
      body: { automated_clean: FAST_TRACK },
    });
    const log: string[] = [];
    if (values.timeline) createInterface({ input: child.stderr! }).on("line", (line) => log.push(line));
    const side: Side = {
      name,
      url,
      log,
      stop,
      uuid: node.uuid,
      disk: node.disk,
      events: await EventStream.open(url, node.uuid),
      boot: node.boot,
    };
    for (const [target, state] of [
      ["manage", "manageable"],
      ["provide", "available"],
    ] as const) {
      const from = side.events.seen.length;
      const answer = await provision(side, target);
      if (answer.status !== 202) throw new Error(`${name}: ${target}: ${answer.status}`);
      if (target === "provide" && FAST_TRACK) {
        // cleaning boots the "ramdisk"; with fast track its agent stays for the deploy
        await reach(side, from, "clean wait");
        side.agent = node.boot();
      }
      await reach(side, from, state);
    }
    // the warm-up deploy: without fast track it boots the "ramdisk" (the agent starts when the node waits)
    await setImage(side, options.warmup);
    const from = side.events.seen.length;
    await provision(side, "active");
    if (BOOT) {
      await reach(side, from, "wait call-back");
      side.agent = node.boot();
    }
    await reach(side, from, "active");
    await side.agent?.stop();
    side.agent = undefined;
    await undeploy(side);
    return side;
  } catch (error) {
    await stop();
    throw error;
  }
}

async function curlDd(url: string, target: string): Promise<number> {
  await freshDisk(target);
  const t0 = performance.now();
  // Positional parameters, not interpolation: the shell only wires the pipe. notrunc keeps the disk's size.
  await must("sh", [
    "-c",
    'curl -sf "$1" | dd of="$2" bs=4M oflag=direct conv=notrunc status=none',
    "sh",
    url,
    target,
  ]);
  return seconds(t0);
}

/** The machine's limits this round: disk write (O_DIRECT), sha256 in Node, loopback HTTP. Seconds each. */
const HASH_BLOCK = randomBytes(64 * MiB);

/** The machine's limits; `loopback` by server name (curl -o /dev/null of the dense image from each). */
interface Limits {
  disk: number;
  sha: number;
  loopback: Record<string, number>;
}

async function limits(
  dense: { urls: Record<string, string>; bytes: number },
  target: string,
): Promise<Limits> {
  await freshDisk(target);
  let t0 = performance.now();
  await must("dd", [
    "if=/dev/zero",
    `of=${target}`,
    "bs=4M",
    `count=${dense.bytes / (4 * MiB)}`,
    "oflag=direct",
    "conv=notrunc",
    "status=none",
  ]);
  const disk = seconds(t0);
  t0 = performance.now();
  // the hash alone, from memory: 64 MiB of random bytes hashed over and over, as many bytes as the image
  const hash = createHash("sha256");
  for (let done = 0; done < dense.bytes; done += HASH_BLOCK.length) hash.update(HASH_BLOCK);
  hash.digest();
  const sha = seconds(t0);
  const loopback: Record<string, number> = {};
  for (const [server, url] of Object.entries(dense.urls)) {
    t0 = performance.now();
    await must("curl", ["-sf", "-o", "/dev/null", url]);
    loopback[server] = seconds(t0);
  }
  return { disk, sha, loopback };
}

const mbps = (bytes: number, s: number): number => bytes / 1e6 / s;
const fmt = (n: number, digits = 2): string => (Number.isFinite(n) ? n.toFixed(digits) : "-");

function printPhases(label: string, runs: DeployRun[]): void {
  const m = (of: (r: DeployRun) => number): string => fmt(median(runs.map(of)));
  if (BOOT)
    console.log(
      `  ${label}: median of ${runs.length}: wait call-back ${m((r) => r.waiting)} s; agent connected ${m((r) => r.connected)} s ` +
        `(its process started at wait call-back: the ramdisk's boot, here only a process start)`,
    );
  console.log(
    `  ${label}: median of ${runs.length}: PUT answered ${m((r) => r.accepted)} s; write_image step started ${m((r) => r.stepStart)} s; ` +
      `first write progress ${m((r) => r.writeStart)} s; write_image done ${m((r) => r.writeDone)} s ` +
      `(agent's own write ${m((r) => r.agentWrite)} s); active ${m((r) => r.total)} s`,
  );
  console.log(
    `  ${label}: outside the agent's write: ${m((r) => r.total - r.agentWrite)} s ` +
      `(before the step ${m((r) => r.stepStart)} s, step → agent ${m((r) => r.writeDone - r.stepStart - r.agentWrite)} s, ` +
      `after write_image ${m((r) => r.total - r.writeDone)} s)`,
  );
}

async function main(): Promise<void> {
  printLoad("at start");
  const scale = values.small ? 8 : 1;
  const dir = resolve(".tmp/bench-deploy");
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir, { recursive: true });
  const executable = await ensureAgentBuilt();
  const server = await startHttpImageServer();
  // nginx serves when asked to; otherwise only its loopback limit is measured, when it is installed
  const nginx = await startThrowawayNginx(join(dir, "nginx")).catch((error: unknown) => {
    if (SERVER === "nginx") throw error;
    return undefined;
  });
  const bases: Record<string, string> = { node: server.url, ...(nginx ? { nginx: nginx.url } : {}) };
  const sides: Side[] = [];
  try {
    const denseBytes = (2 * GiB) / scale;
    const densePath = join(dir, "dense.raw");
    await must("dd", [
      "if=/dev/urandom",
      `of=${densePath}`,
      "bs=4M",
      `count=${denseBytes / (4 * MiB)}`,
      "iflag=fullblock",
      "status=none",
    ]);
    const sparseBytes = (4 * GiB) / scale;
    const sparsePath = join(dir, "sparse.raw");
    await makeSparseImage(sparsePath, sparseBytes, 0.1);
    await must("qemu-img", ["convert", "-f", "raw", "-O", "qcow2", sparsePath, join(dir, "sparse.qcow2")]);
    for (const f of ["dense.raw", "sparse.raw", "sparse.qcow2"]) {
      server.serve(`/${f}`, join(dir, f));
      await nginx?.serve(f, join(dir, f));
    }
    const shaOf = async (f: string): Promise<string> =>
      (await must("sha256sum", [join(dir, f)])).split(" ")[0] ?? "";
    const url = (f: string): string => `${bases[SERVER]}/${f}`;
    const dense: Image = {
      label: `dense raw ${denseBytes / MiB} MiB`,
      url: url("dense.raw"),
      sha256: await shaOf("dense.raw"),
      bytes: denseBytes,
      rawUrl: url("dense.raw"),
    };
    const qcow2Size = (await stat(join(dir, "sparse.qcow2"))).size;
    const qcow2: Image = {
      label: `qcow2 ${sparseBytes / MiB} MiB, 10 % data (${(qcow2Size / MiB).toFixed(0)} MiB file)`,
      url: url("sparse.qcow2"),
      sha256: await shaOf("sparse.qcow2"),
      bytes: sparseBytes,
      rawUrl: url("sparse.raw"),
    };
    const images = [dense, qcow2].filter((i) => !values.only || i.url.includes(values.only!));

    if (BASELINE_REV) {
      const base = join(dir, "baseline-src");
      await mkdir(base, { recursive: true });
      execFileSync("bash", ["-c", 'git archive "$1" | tar -x -C "$2"', "bash", BASELINE_REV, base]);
      symlinkSync(resolve("node_modules"), join(base, "node_modules"));
      // the baseline's own agent: the deploy's bytes go through its image pipeline, not this checkout's
      const baseAgent = join(base, "build/anvil-agent");
      execFileSync(process.execPath, ["--import", "tsx", "scripts/build/agent.ts", "--out", baseAgent], {
        cwd: base,
        stdio: "ignore",
      });
      sides.push(
        await startSide({
          name: `baseline ${BASELINE_REV}`,
          dir: join(dir, "baseline"),
          cwd: base,
          executable: baseAgent,
          warmup: qcow2,
          mac: "52:54:00:28:00:01",
        }),
      );
    }
    const profileDir = resolve(".tmp/bench-prof");
    // profiled, the agent runs from source under node --cpu-prof (the executable takes no node flags)
    const agentWrapper = join(dir, "agent-profiled.sh");
    if (values.profile) {
      const main = resolve("agent/main.ts");
      await writeFile(
        agentWrapper,
        `#!/bin/sh\nexec "${process.execPath}" --cpu-prof --cpu-prof-dir="${profileDir}/agent" --import tsx "${main}" "$@"\n`,
        { mode: 0o755 },
      );
    }
    sides.push(
      await startSide({
        name: "this checkout",
        dir: join(dir, "here"),
        executable: values.profile ? agentWrapper : executable,
        warmup: qcow2,
        mac: "52:54:00:28:00:02",
        ...(values.profile ? { nodeArgs: ["--cpu-prof", `--cpu-prof-dir=${profileDir}`] } : {}),
      }),
    );
    const here = sides.at(-1)!;
    console.log(
      `node ${process.version}; ${values.small ? "1/8" : "full"} sizes; ${ROUNDS} interleaved round(s); ` +
        `images served by ${SERVER === "nginx" ? "nginx (sendfile, its own process)" : "node:http in this process"}; ` +
        `sides: curl | dd, ${sides.map((s) => s.name).join(", ")}`,
    );

    const limitRuns: Limits[] = [];
    const results = new Map<string, { dd: number[]; deploys: DeployRun[][]; load: [number, number][] }>();
    for (const image of images) results.set(image.label, { dd: [], deploys: sides.map(() => []), load: [] });
    for (let round = 0; round < ROUNDS; round += 1) {
      const urls = Object.fromEntries(
        Object.entries(bases).map(([name, base]) => [name, `${base}/dense.raw`]),
      );
      const lim = await limits({ urls, bytes: denseBytes }, here.disk);
      limitRuns.push(lim);
      const loopbacks = Object.entries(lim.loopback).map(
        ([name, s]) => `${name} ${fmt(mbps(denseBytes, s), 0)}`,
      );
      console.log(
        `round ${round + 1} limits: disk write ${fmt(mbps(denseBytes, lim.disk), 0)} MB/s, sha256 ${fmt(mbps(denseBytes, lim.sha), 0)} MB/s, ` +
          `loopback HTTP ${loopbacks.join(", ")} MB/s; load ${fmt(loadNow())}`,
      );
      for (const image of images) {
        const record = results.get(image.label)!;
        const load0 = loadNow();
        const order = roundOrder(["dd", ...sides.keys()] as const, round);
        const line: string[] = [];
        for (const who of order) {
          if (who === "dd") {
            const s = await curlDd(image.rawUrl, here.disk);
            record.dd.push(s);
            line.push(`curl|dd ${fmt(s)} s`);
          } else {
            const side = sides[who]!;
            const run = await deployOnce(side, image);
            record.deploys[who]!.push(run);
            line.push(`${side.name} ${fmt(run.total)} s (agent ${fmt(run.agentWrite)} s)`);
          }
        }
        record.load.push([load0, loadNow()]);
        console.log(`round ${round + 1} ${image.label}: ${line.join(", ")}`);
      }
    }

    console.log(`\n== the machine's limits (median of ${ROUNDS}, ${denseBytes / MiB} MiB) ==`);
    const limitRows: [string, (l: Limits) => number][] = [
      ["disk write, dd if=/dev/zero oflag=direct", (l) => l.disk],
      ["sha256 in Node (from memory)", (l) => l.sha],
      ...Object.keys(bases).map((name): [string, (l: Limits) => number] => [
        `loopback HTTP, curl -o /dev/null, ${name}${name === SERVER ? " (serving)" : ""}`,
        (l) => l.loopback[name] ?? NaN,
      ]),
    ];
    for (const [name, of] of limitRows)
      console.log(`  ${name.padEnd(52)} ${fmt(mbps(denseBytes, median(limitRuns.map(of))), 0)} MB/s`);

    console.log(`\n== deploy through the API (PUT active → active event) against curl | dd, same target ==`);
    for (const image of images) {
      const record = results.get(image.label)!;
      const dd = median(record.dd);
      console.log(
        `${image.label}: curl | dd ${fmt(dd)} s = ${fmt(mbps(image.bytes, dd), 0)} MB/s of disk bytes`,
      );
      for (const [i, side] of sides.entries()) {
        const runs = record.deploys[i]!;
        const ratios = runs.map((r, k) => record.dd[k]! / r.total);
        console.log(
          `  ${side.name}: deploy ${fmt(median(runs.map((r) => r.total)))} s = ${fmt(mbps(image.bytes, median(runs.map((r) => r.total))), 0)} MB/s; ` +
            `×${fmt(median(ratios))} curl|dd (per round ${ratios.map((r) => `×${fmt(r)}`).join(" ")})`,
        );
        printPhases(`  ${side.name}`, runs);
        if (values.timeline) {
          console.log(`    ${side.name}: the last deploy's timeline (ms from the PUT):`);
          for (const row of runs.at(-1)?.timeline ?? []) console.log(`      ${row}`);
        }
      }
    }
    if (sides.length > 1) {
      const figures: Figure<Record<string, number>>[] = images.flatMap((image) => [
        {
          name: `${image.label.split(" (")[0]} deploy`,
          unit: "s",
          digits: 2,
          of: (r) => r[`${image.label}:total`] ?? NaN,
        },
        {
          name: `${image.label.split(" (")[0]} outside write`,
          unit: "s",
          digits: 2,
          of: (r) => r[`${image.label}:outside`] ?? NaN,
        },
      ]);
      const pick = (i: number, round: number): Record<string, number> =>
        Object.fromEntries(
          images.flatMap((image) => {
            const run = results.get(image.label)!.deploys[i]![round]!;
            return [
              [`${image.label}:total`, run.total],
              [`${image.label}:outside`, run.total - run.agentWrite],
            ];
          }),
        );
      const rounds: PairedRound<Record<string, number>>[] = Array.from({ length: ROUNDS }, (_, round) => ({
        base: pick(0, round),
        here: pick(1, round),
        load: [
          Math.min(...images.map((i) => results.get(i.label)!.load[round]![0])),
          Math.max(...images.map((i) => results.get(i.label)!.load[round]![1])),
        ],
      }));
      compareRounds(figures, rounds, { title: "deploy through the API", baseline: BASELINE_REV ?? "" });
    }
  } finally {
    printLoad("at end");
    for (const side of sides) {
      side.events.close();
      await side.agent?.stop();
      await side.stop();
    }
    await server.close();
    await nginx?.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

await main();
