/**
 * The virtual lab under TCG: ramdisk size, power-on (PXE) to agent connected, inspect time, and the deploy
 * of a 1 GiB image (qcow2, all data: no holes to skip), with the power actions it took. Printed beside the
 * seed's figures for Ironic (a deploy takes "a minimum of ten minutes", two power cycles). One VM; minutes.
 * Usage: node --import tsx scripts/bench/lab.ts [--image-mib 1024] [--fast-track]
 *
 * `--walk`: the walk a user does, enroll → manage → provide → deploy of the 32 MiB test image → the image
 * booted (its marker on the console), timed end to end with and without fast track, and where the seconds
 * go (iPXE, downloads, kernel, init, agent, each provision step, the image's boot). Variants run
 * interleaved, round after round: `--baseline-ramdisk DIR` (a kernel + initramfs to compare with
 * build/ramdisk), `--append-a`/`--append-b` (the node's kernel_append_params in each),
 * `--fast-track-mode on|off|both` (default both), `--rounds N`, `--timeline` (every milestone of every walk).
 */
import { createHash, randomBytes } from "node:crypto";
import {
  createReadStream,
  createWriteStream,
  linkSync,
  mkdirSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { loadavg } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { parseArgs } from "node:util";
import { exec } from "../../shared/system/exec.ts";
import { labDown, labUp, REPO_ROOT } from "../lab/lab.ts";
import { provision, setInstanceImage, startToAgent, startWalk, testImage, type Walk } from "../lab/walk.ts";
import { splitOf, stampLines, walkMilestones, type Milestone } from "./lab-timeline.ts";

const MiB = 1024 * 1024;

/** A raw image of `mib` MiB of pseudo-random data, converted to qcow2; returns its sha256. */
async function makeImage(dir: string, mib: number): Promise<{ file: string; sha256: string }> {
  const raw = join(dir, "bench.raw");
  const out = createWriteStream(raw);
  for (let written = 0; written < mib * MiB; written += 4 * MiB) {
    const chunk = randomBytes(4 * MiB); // a fresh buffer: the stream still holds the previous one
    if (!out.write(chunk)) await new Promise<void>((r) => out.once("drain", () => r()));
  }
  await new Promise<void>((resolve, reject) => {
    out.once("error", reject);
    out.end(() => resolve());
  });
  const file = join(dir, "bench.qcow2");
  const converted = await exec("qemu-img", ["convert", "-f", "raw", "-O", "qcow2", raw, file], {
    timeoutMs: 600_000,
  });
  if (converted.code !== 0) throw new Error(`qemu-img convert: ${converted.stderr}`);
  rmSync(raw);
  const hash = createHash("sha256");
  for await (const part of createReadStream(file)) hash.update(part as Buffer);
  return { file, sha256: hash.digest("hex") };
}

const s = (ms: number | undefined): string => (ms === undefined ? "n/a" : `${(ms / 1000).toFixed(1)} s`);

const MARKER = /ANVIL-TEST-IMAGE-BOOTED anvil-test/;

interface Variant {
  label: string;
  ramdiskDir: string;
  append: string | undefined;
  fastTrack: boolean;
}

interface WalkResult {
  totalMs: number;
  steps: [string, number][];
  milestones: Milestone[];
  boots: number;
}

/** A fresh image root for one variant: its ramdisk and the test images, hard-linked. */
function imageRootFor(dir: string, variant: Variant): string {
  const root = join(dir, "images");
  rmSync(root, { recursive: true, force: true });
  mkdirSync(join(root, "ramdisk"), { recursive: true });
  mkdirSync(join(root, "test-images"), { recursive: true });
  for (const name of ["anvil.kernel", "anvil.initramfs"])
    linkSync(join(variant.ramdiskDir, name), join(root, "ramdisk", name));
  for (const name of ["anvil-test.qcow2", "anvil-test.sha256sums"])
    linkSync(join(REPO_ROOT, "build", "test-images", name), join(root, "test-images", name));
  return root;
}

/**
 * Runs a provision verb with the stock client, without its --wait (which polls every 10 s for provide and
 * deploy: 0–10 s of the client's on every verb, noise in a before/after), and resolves once the conductor's
 * event stream shows the node in `target` (ms from the command's start to that event).
 * @throws Error when the node lands in a failed state or not within 10 minutes.
 */
async function verbUntil(walk: Walk, verb: string, target: string): Promise<number> {
  const timeoutMs = 600_000;
  const from = walk.events.length;
  const started = Date.now();
  await walk.bm.run(["node", verb, walk.node.name]);
  for (;;) {
    const states = walk.events.slice(from).filter((e) => e.type === "provision");
    const reached = states.find((e) => e.provision_state === target);
    if (reached !== undefined) return Date.parse(reached.at) - started;
    const failed = states.find((e) => /failed$|^error$/.test(String(e.provision_state)));
    if (failed !== undefined) {
      const node = await walk.bm.node(walk.node.name);
      throw new Error(`${verb}: ${walk.node.name} is ${node.provision_state}: ${node.last_error ?? ""}`);
    }
    if (Date.now() - started > timeoutMs) throw new Error(`${verb}: not ${target} after ${timeoutMs} ms`);
    await sleep(50);
  }
}

/** One walk in a lab of its own: enroll → manage → provide → deploy → marker. */
async function walkOnce(dir: string, variant: Variant, consoleOut: string): Promise<WalkResult> {
  const state = await labUp({
    dir: join(dir, "lab"),
    nodes: 1,
    port: 0,
    imageRoot: imageRootFor(dir, variant),
    conductorArgs: variant.fastTrack ? ["--fast-track"] : [],
  });
  const node = state.nodes[0];
  if (node === undefined) throw new Error("no lab node");
  const console_ = stampLines(join(node.dir, "vm", "serial.log"));
  const image = await testImage(state);
  try {
    const started = Date.now();
    const walk = await startWalk(state);
    const steps: [string, number][] = [["enroll (baremetal create)", Date.now() - started]];
    // the variant's own set-up call is not part of the walk: its time comes off the total
    let setUpMs = 0;
    try {
      if (variant.append !== undefined) {
        const set = ["node", "set", node.name, "--driver-info", `kernel_append_params=${variant.append}`];
        const t = Date.now();
        await walk.bm.run(set);
        setUpMs = Date.now() - t;
        steps.push(["set kernel_append_params (not in the total)", setUpMs]);
      }
      steps.push(["manage (credentials checked)", await verbUntil(walk, "manage", "manageable")]);
      steps.push(["provide (cleaning: a ramdisk boot)", await verbUntil(walk, "provide", "available")]);
      let t = Date.now();
      await setInstanceImage(walk, image);
      steps.push(["set instance_info", Date.now() - t]);
      steps.push(["deploy (available → active)", await verbUntil(walk, "deploy", "active")]);
      t = Date.now();
      await walk.probe.waitForSerial(MARKER, 180_000);
      console_.stop();
      const marker = console_.lines.find((l) => l.at >= t - 60_000 && MARKER.test(l.text));
      const bootedAt = Math.min(marker?.at ?? Date.now(), Date.now());
      steps.push(["active → the image's marker", Math.max(0, bootedAt - t)]);
      const milestones = walkMilestones({
        vmStarts: await walk.probe.vmStarts(),
        lines: console_.lines,
        events: walk.events,
        marker: MARKER,
      }).filter((m) => m.at >= started);
      // the whole console, each line with its host-clock stamp since enroll: for reading a boot closely
      writeFileSync(
        consoleOut,
        console_.lines.map((l) => `${((l.at - started) / 1000).toFixed(2).padStart(7)} ${l.text}`).join("\n"),
      );
      return {
        totalMs: bootedAt - started - setUpMs,
        steps,
        milestones,
        boots: (await walk.probe.powerActions()).on,
      };
    } finally {
      walk.stopEvents();
    }
  } finally {
    console_.stop();
    await labDown(state.dir);
  }
}

const table = (rows: string[][]): void => {
  const widths = (rows[0] ?? []).map((_, i) => Math.max(...rows.map((r) => r[i]?.length ?? 0)));
  for (const row of rows)
    console.log(
      row
        .map((cell, i) => cell.padEnd(widths[i] ?? 0))
        .join("  ")
        .trimEnd(),
    );
};

async function walkMain(values: {
  "baseline-ramdisk"?: string;
  "append-a"?: string;
  "append-b"?: string;
  "fast-track-mode"?: string;
  rounds?: string;
  timeline?: boolean;
}): Promise<void> {
  const rounds = Number(values.rounds ?? "1");
  const modes =
    values["fast-track-mode"] === "on"
      ? [true]
      : values["fast-track-mode"] === "off"
        ? [false]
        : [false, true];
  const current = join(REPO_ROOT, "build", "ramdisk");
  const sides: Omit<Variant, "fastTrack" | "label">[] = [];
  if (values["baseline-ramdisk"] !== undefined || values["append-a"] !== undefined)
    sides.push({ ramdiskDir: values["baseline-ramdisk"] ?? current, append: values["append-a"] });
  sides.push({ ramdiskDir: current, append: values["append-b"] });
  const variants: Variant[] = modes.flatMap((fastTrack) =>
    sides.map((side, i) => ({
      ...side,
      fastTrack,
      label: `${sides.length > 1 ? (i === 0 ? "A " : "B ") : ""}${fastTrack ? "fast track" : "no fast track"}`,
    })),
  );
  for (const v of sides)
    console.log(
      `${sides.length > 1 ? (v === sides[0] ? "A" : "B") : "ramdisk"}: ${v.ramdiskDir} ` +
        `(kernel ${(statSync(join(v.ramdiskDir, "anvil.kernel")).size / MiB).toFixed(1)} MiB, initramfs ` +
        `${(statSync(join(v.ramdiskDir, "anvil.initramfs")).size / MiB).toFixed(1)} MiB)` +
        (v.append === undefined ? "" : `, kernel_append_params "${v.append}"`),
    );
  const results = new Map<string, WalkResult[]>(variants.map((v) => [v.label, []]));
  const dir = join(REPO_ROOT, ".tmp", "bench-lab-walk");
  for (let round = 1; round <= rounds; round++) {
    for (const variant of variants) {
      const consoleOut = join(dir, `${variant.label.replaceAll(" ", "-")}.${round}.console.txt`);
      const result = await walkOnce(dir, variant, consoleOut);
      results.get(variant.label)?.push(result);
      console.error(
        `round ${round} ${variant.label}: enroll → image booted ${s(result.totalMs)} ` +
          `(console ${consoleOut}; load ${loadavg()
            .map((l) => l.toFixed(1))
            .join(" ")})`,
      );
      if (values.timeline) {
        const t0 = result.milestones[0]?.at ?? 0;
        let previous = t0;
        for (const m of result.milestones) {
          console.error(`  +${s(m.at - t0).padStart(8)}  (+${s(m.at - previous).padStart(7)})  ${m.what}`);
          previous = m.at;
        }
      }
    }
  }
  const labels = variants.map((v) => v.label);
  const each = (f: (r: WalkResult) => number | undefined) => (label: string) =>
    (results.get(label) ?? []).map((r) => s(f(r))).join(", ");
  const rows: string[][] = [["what", ...labels]];
  rows.push(["enroll → image booted (marker)", ...labels.map(each((r) => r.totalMs))]);
  rows.push([
    "power-ons",
    ...labels.map((l) => (results.get(l) ?? []).map((r) => String(r.boots)).join(", ")),
  ]);
  const stepNames = [...new Set([...results.values()].flat().flatMap((r) => r.steps.map(([n]) => n)))];
  for (const name of stepNames)
    rows.push([`  ${name}`, ...labels.map(each((r) => r.steps.find(([n]) => n === name)?.[1]))]);
  const splitNames = [
    ...new Set([...results.values()].flat().flatMap((r) => [...splitOf(r.milestones).keys()])),
  ];
  rows.push(["where the boots' time goes (summed over the walk's boots):", ...labels.map(() => "")]);
  for (const name of splitNames)
    rows.push([`  ${name}`, ...labels.map(each((r) => splitOf(r.milestones).get(name)))]);
  table(rows);
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      "image-mib": { type: "string", default: "1024" },
      "fast-track": { type: "boolean" },
      walk: { type: "boolean" },
      "fast-track-mode": { type: "string" },
      "baseline-ramdisk": { type: "string" },
      "append-a": { type: "string" },
      "append-b": { type: "string" },
      rounds: { type: "string" },
      timeline: { type: "boolean" },
    },
  });
  if (values.walk) return walkMain(values);
  const mib = Number(values["image-mib"]);
  const dir = join(REPO_ROOT, ".tmp", "bench-lab");
  const images = join(dir, "images");
  rmSync(images, { recursive: true, force: true });
  mkdirSync(join(images, "ramdisk"), { recursive: true });
  for (const name of ["anvil.kernel", "anvil.initramfs"]) {
    linkSync(join(REPO_ROOT, "build", "ramdisk", name), join(images, "ramdisk", name));
  }
  const ramdiskBytes = statSync(join(images, "ramdisk", "anvil.initramfs")).size;
  const kernelBytes = statSync(join(images, "ramdisk", "anvil.kernel")).size;
  const imageStarted = Date.now();
  const image = await makeImage(images, mib);
  const imageBytes = statSync(image.file).size;
  console.error(`image: ${(imageBytes / MiB).toFixed(0)} MiB qcow2 in ${s(Date.now() - imageStarted)}`);

  const state = await labUp({
    dir: join(dir, "lab"),
    nodes: 1,
    port: 0,
    imageRoot: images,
    conductorArgs: values["fast-track"] ? ["--fast-track"] : [],
  });
  const walk = await startWalk(state);
  try {
    const { probe } = walk;
    await provision(walk, ["manage"]);
    const inspectMs = await provision(walk, ["inspect"]);
    const cleanMs = await provision(walk, ["provide"]);
    await setInstanceImage(walk, {
      source: `${state.conductor?.guestUrl}/images/bench.qcow2`,
      sha256: image.sha256,
    });
    const before = await probe.powerActions();
    const deployMs = await provision(walk, ["deploy"], 3600);
    const after = await probe.powerActions();
    const toAgent = startToAgent(await probe.vmStarts(), walk.events);
    const boots = after.on - before.on;
    const rows: [string, string, string][] = [
      ["what", "Anvil (lab, QEMU TCG, 2 shared cores)", "seed: Ironic + IPA"],
      [
        "deploy kernel + ramdisk",
        `${(kernelBytes / MiB).toFixed(1)} + ${(ramdiskBytes / MiB).toFixed(1)} MiB`,
        "IPA ramdisk (not measured here)",
      ],
      ["power on (PXE) → agent connected", toAgent.map(s).join(", "), "n/a"],
      ["inspect (manageable → manageable)", s(inspectMs), "n/a"],
      ["clean: metadata erase (manageable → available)", s(cleanMs), "n/a"],
      [`deploy, ${mib} MiB image (available → active)`, s(deployMs), "a minimum of ten minutes"],
      [
        "power cycles in the deploy",
        `${boots} (on ${after.on - before.on}, off ${after.off - before.off})`,
        "2",
      ],
      ["deploy time ratio (seed's 10 min / ours)", (600_000 / deployMs).toFixed(1) + "x", ""],
    ];
    const widths = [0, 1].map((i) => Math.max(...rows.map((r) => r[i]?.length ?? 0)));
    for (const row of rows)
      console.log(`${row[0].padEnd(widths[0] ?? 0)}  ${row[1].padEnd(widths[1] ?? 0)}  ${row[2]}`);
  } finally {
    walk.stopEvents();
    await labDown(state.dir);
    rmSync(images, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
