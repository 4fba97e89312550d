/**
 * The virtual lab under TCG: ramdisk size, power-on (PXE) to agent connected, inspect time, and the deploy
 * of a 1 GiB image (qcow2, all data: no holes to skip), with the power actions it took. Printed beside the
 * seed's figures for Ironic (a deploy takes "a minimum of ten minutes", two power cycles). One VM; minutes.
 * Usage: node --import tsx scripts/bench/lab.ts [--image-mib 1024] [--fast-track]
 */
import { createHash, randomBytes } from "node:crypto";
import { createReadStream, createWriteStream, linkSync, mkdirSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { exec } from "../../shared/system/exec.ts";
import { labDown, labUp, REPO_ROOT } from "../lab/lab.ts";
import { provision, setInstanceImage, startToAgent, startWalk } from "../lab/walk.ts";

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

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { "image-mib": { type: "string", default: "1024" }, "fast-track": { type: "boolean" } },
  });
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
