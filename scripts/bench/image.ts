/**
 * Image write benchmark (not a test): the agent's writeImage against `curl | dd oflag=direct`, same loopback
 * HTTP server, same target file. Prints MB/s, ratios and the writer's peak RSS (it runs in a child process).
 *   (a) 2 GiB raw of random data, sha256 verified        goal: >= 0.95x dd
 *   (b) 4 GiB raw with 10% data (sparse)                  goal: >= 5x dd
 *       streamed whole, and with the bmaptool block map published beside it (only mapped ranges fetched)
 *   (c) the (b) image as qcow2, zstd and xz               goal: writer RSS <= 128 MB
 *   (e) a qcow2 of 20,000 512-byte clusters (every other guest cluster) in reversed order, onto a target that does not read
 *       zeros, against the same clusters in guest order: out-of-order work must stay linear
 *   (d) the HTTP client alone, end to end (socket → sha256 → writer → disk): Anvil's reader against undici,
 *       same images, same server, same writer, runs interleaved. undici replaces the reader only if it is
 *       within 5 % (the decision and the figures are in docs/images.md).
 * Usage: node --import tsx scripts/bench/image.ts [--small] [--clients | --reversed | --writers]
 *   --small: 1/8 sizes, for a quick look; --clients: only (d); --reversed: only (e); --writers: only (a)–(c)
 * BENCH_ONLY=<regex>: only the (a)–(c) images whose label matches it (e.g. qcow2, or ^writeImage$ for (a)).
 * BENCH_BASELINE_REV=<revision>: that revision's writer (its own copy of this script, extracted with git
 * archive and bundled the same way) writes every (a)–(c) image too, in BENCH_ROUNDS interleaved rounds (default
 * 2: baseline first, then this checkout first, …); every image's throughput is printed per round, and at the end
 * the medians and the median per-round ratio of all of them, with the load average.
 */
import { execFileSync } from "node:child_process";
import { symlinkSync } from "node:fs";
import { mkdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { join, resolve } from "node:path";
import { HashingTap } from "../../agent/image/checksum.ts";
import { ImageDownload } from "../../agent/image/fetch.ts";
import { writeImage } from "../../agent/image/write-image.ts";
import { ImageWriter } from "../../agent/image/writer.ts";
import { Qcow2Converter } from "../../agent/image/qcow2.ts";
import { buildQcow2 } from "../../test/helpers/qcow2.ts";
import type { WriteImageRequest, WriteImageResult } from "../../shared/image.ts";
import { runOk } from "../../test/helpers/run.ts";
import { makeSparseImage } from "./bench-images.ts";
import {
  type Figure,
  type PairedRound,
  compareRounds,
  loadNow,
  printLoad,
  roundOrder,
} from "./interleave.ts";
import { startHttpImageServer } from "../../test/helpers/http-image-server.ts";

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;
const self = fileURLToPath(import.meta.url);
const BASELINE_REV = process.env.BENCH_BASELINE_REV;
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
/** BENCH_ONLY=<regex>: only the (a)–(c) writer runs whose label matches it (e.g. "qcow2", "^writeImage$"). */
const ONLY = process.env.BENCH_ONLY === undefined ? undefined : new RegExp(process.env.BENCH_ONLY);

/** Per image (its label), each writer's throughput (MB/s) in each round, and the load around each round. */
const perRound = new Map<string, { mbps: number[][]; load: [number, number][] }>();
const must = (command: string, args: string[]): Promise<string> =>
  runOk(command, args, { timeoutMs: 30 * 60_000 });

/** Child mode: write one image, print the result and this process's peak RSS. */
async function child(json: string): Promise<void> {
  const { request, target } = JSON.parse(json) as { request: WriteImageRequest; target: string };
  const result = await writeImage(request, { target });
  process.stdout.write(JSON.stringify({ result, maxRssKiB: process.resourceUsage().maxRSS }));
}

type Client = "reader" | "undici";

/**
 * undici's body as chunks, with the same timeouts the reader has. Imported only here and left out of the
 * bundle (--external), so the writer's RSS figures do not carry undici's code.
 */
async function* undiciBody(url: string): AsyncGenerator<Buffer> {
  const { Agent, request } = await import("undici");
  const dispatcher = new Agent({ connectTimeout: 15_000, headersTimeout: 60_000, bodyTimeout: 60_000 });
  try {
    const { statusCode, body } = await request(url, {
      dispatcher,
      headers: { "accept-encoding": "identity" },
    });
    if (statusCode !== 200) throw new Error(`HTTP ${statusCode}`);
    for await (const chunk of body) yield chunk as Buffer;
  } finally {
    await dispatcher.close();
  }
}

/** Child mode: one raw image through `client` → sha256 → the writer; prints time, digest and peak RSS. */
async function clientChild(json: string): Promise<void> {
  const { client, url, target } = JSON.parse(json) as { client: Client; url: string; target: string };
  const started = process.hrtime.bigint();
  const tap = new HashingTap("sha256");
  const writer = await ImageWriter.open({ path: target, readsZeroes: true });
  const source = client === "undici" ? undiciBody(url) : new ImageDownload(url);
  let offset = 0;
  for await (const chunk of tap.pass(source)) {
    await writer.write({ offset, data: chunk });
    offset += chunk.length;
  }
  await writer.finish(offset);
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  const maxRssKiB = process.resourceUsage().maxRSS;
  process.stdout.write(JSON.stringify({ seconds, sha: tap.digest().value, maxRssKiB }));
}

async function runClient(
  bundle: string,
  options: { client: Client; url: string; target: string; sha: string },
): Promise<Run> {
  const { client, url, target, sha } = options;
  await rm(target, { force: true });
  await writeFile(target, "");
  const out = await must("node", [bundle, "--client", JSON.stringify({ client, url, target })]);
  const result = JSON.parse(out) as { seconds: number; sha: string; maxRssKiB: number };
  if (result.sha !== sha) throw new Error(`${client}: sha256 ${result.sha}, expected ${sha}`);
  return { seconds: result.seconds, rssMB: result.maxRssKiB / 1024 };
}

/** (d): reader and undici interleaved, `rounds` times each; best of each. */
async function compareClients(
  bundle: string,
  images: { label: string; url: string; sha: string; bytes: number }[],
  target: string,
): Promise<void> {
  const rounds = 3;
  console.log(`(d) HTTP client, end to end (socket → sha256 → writer), best of ${rounds} interleaved runs`);
  for (const image of images) {
    const runs: Record<Client, Run | undefined> = { reader: undefined, undici: undefined };
    for (let round = 0; round < rounds; round += 1) {
      for (const client of ["reader", "undici"] as const) {
        const run = await runClient(bundle, { client, url: image.url, target, sha: image.sha });
        const best = runs[client];
        if (!best || run.seconds < best.seconds) runs[client] = run;
      }
    }
    const reader = runs.reader as Run;
    const undici = runs.undici as Run;
    report(`  ${image.label}: reader`, reader, { bytes: image.bytes });
    report(`  ${image.label}: undici`, undici, { bytes: image.bytes });
    console.log(`  ${image.label}: undici/reader throughput ${(reader.seconds / undici.seconds).toFixed(3)}`);
  }
}

/** (e): convert + write 20k clusters in `order`, onto a file of 0xee bytes (a target that does not read zeros). */
async function reversedRun(
  dir: string,
  order: "guest" | "reversed",
): Promise<{ seconds: number; writes: number }> {
  const n = 20_000;
  // Every other guest cluster: out of order, the covered ranges stay disjoint (the old writer re-sorted them).
  const clusters = Array.from({ length: n }, (_, i) => ({
    guest: 2 * i,
    data: Buffer.alloc(512, 1 + (i % 251)),
  }));
  const { image, guest } = buildQcow2({ clusterBits: 9, virtualSize: 2 * n * 512, clusters, order });
  const path = join(dir, `order-${order}.img`);
  await writeFile(path, Buffer.alloc(2 * n * 512, 0xee));
  const started = process.hrtime.bigint();
  const writer = await ImageWriter.open({ path, readsZeroes: false });
  const converter = new Qcow2Converter();
  async function* chunks(): AsyncGenerator<Buffer> {
    for (let at = 0; at < image.length; at += 256 * 1024)
      yield Buffer.from(image.subarray(at, at + 256 * 1024));
  }
  for await (const extent of converter.extents(chunks())) await writer.write(extent);
  await writer.finish(converter.virtualSize);
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  if (!(await readFile(path)).equals(guest)) throw new Error(`${order}: the disk differs from the image`);
  return { seconds, writes: writer.writeCalls };
}

async function compareOrders(dir: string): Promise<void> {
  console.log(
    "(e) qcow2, 20,000 clusters of 512 bytes (every other one), target that does not read zeros (best of 3)",
  );
  const results: Record<string, { seconds: number; writes: number }> = {};
  for (const order of ["guest", "reversed"] as const) {
    for (let i = 0; i < 3; i += 1) {
      const run = await reversedRun(dir, order);
      if (!results[order] || run.seconds < (results[order]?.seconds ?? Infinity)) results[order] = run;
    }
    const r = results[order] as { seconds: number; writes: number };
    console.log(`  ${order.padEnd(9)} order ${r.seconds.toFixed(2).padStart(7)} s  ${r.writes} write calls`);
  }
  const ratio = (results.reversed?.seconds ?? 0) / (results.guest?.seconds ?? 1);
  console.log(`  reversed / guest order: ${ratio.toFixed(2)}x`);
}

interface Run {
  seconds: number;
  rssMB?: number;
  result?: WriteImageResult;
}

/**
 * The writer runs as the agent does: bundled by esbuild into one file for plain node (no tsx in memory).
 * Its time is writeImage's own duration (the agent is already running when a deploy starts).
 */
async function runWriter(bundle: string, request: WriteImageRequest, target: string): Promise<Run> {
  await rm(target, { force: true });
  await writeFile(target, "");
  const out = await must("node", [bundle, "--child", JSON.stringify({ request, target })]);
  const { result, maxRssKiB } = JSON.parse(out) as { result: WriteImageResult; maxRssKiB: number };
  return { seconds: result.duration_ms / 1000, rssMB: maxRssKiB / 1024, result };
}

async function bundleSelf(dir: string, script = self, name = "writer"): Promise<string> {
  const out = join(dir, `${name}.mjs`);
  await must("npx", [
    "esbuild",
    script,
    "--bundle",
    "--platform=node",
    "--format=esm",
    "--target=node20",
    `--outfile=${out}`,
    "--external:undici",
    "--log-level=warning",
    "--banner:js=import { createRequire } from 'node:module'; const require = createRequire(import.meta.url);",
  ]);
  return out;
}

/** The writers measured: this checkout's bundle, and the baseline revision's when BENCH_BASELINE_REV is set. */
type Writers = [string, string][];

/** The baseline revision's copy of this script, extracted with git archive and bundled beside ours. */
async function baselineBundle(dir: string, rev: string): Promise<string> {
  const base = join(dir, "baseline");
  await mkdir(base, { recursive: true });
  execFileSync("bash", ["-c", 'git archive "$1" | tar -x -C "$2"', "bash", rev, base]);
  symlinkSync(resolve("node_modules"), join(base, "node_modules"));
  return bundleSelf(dir, join(base, "scripts/bench/image.ts"), "baseline-writer");
}

/**
 * Each writer writes the image in BENCH_ROUNDS interleaved rounds (AB, BA, …), so that a disturbed moment hits
 * both alike; prints each round, the best of each and, with a baseline, this checkout's throughput over the
 * baseline's (best of each, and the median of the per-round ratios).
 */
async function compareWriters(
  writers: Writers,
  label: string,
  options: { request: WriteImageRequest; target: string; bytes: number; baseline?: Run },
): Promise<void> {
  if (ONLY !== undefined && !ONLY.test(label)) return;
  const bestOf: (Run | undefined)[] = writers.map(() => undefined);
  const record = { mbps: [] as number[][], load: [] as [number, number][] };
  for (let round = 0; round < ROUNDS; round += 1) {
    const load0 = loadNow();
    const mbpsOf: number[] = [];
    for (const [i, [name, bundle]] of roundOrder([...writers.entries()], round)) {
      const run = await runWriter(bundle, options.request, options.target);
      mbpsOf[i] = options.bytes / 1e6 / run.seconds;
      if (writers.length > 1)
        console.log(
          `    round ${round + 1} ${name}: ${run.seconds.toFixed(2)} s ${mbps(options.bytes, run.seconds)} MB/s`,
        );
      if (!bestOf[i] || run.seconds < bestOf[i].seconds) bestOf[i] = run;
    }
    record.mbps.push(mbpsOf);
    record.load.push([load0, loadNow()]);
  }
  perRound.set(label, record);
  for (const [i, [name]] of writers.entries()) {
    const tag = writers.length > 1 ? ` (${name})` : "";
    report(`  ${label}${tag}`, bestOf[i] as Run, { bytes: options.bytes, baseline: options.baseline });
  }
  if (writers.length > 1) {
    const [base, here] = bestOf as [Run, Run];
    const rss = base.rssMB && here.rssMB ? `, peak RSS ×${(here.rssMB / base.rssMB).toFixed(2)}` : "";
    console.log(
      `  ${label}: this checkout / baseline throughput ×${(base.seconds / here.seconds).toFixed(3)} (best of each)${rss}`,
    );
  }
}

/** Every image's per-round throughput, baseline against this checkout, as the shared comparison prints it. */
function compareAllWriters(baseline: string): void {
  const labels = [...perRound.keys()];
  const figures: Figure<Record<string, number>>[] = labels.map((label) => ({
    name: label.trim(),
    unit: "MB/s",
    digits: 0,
    of: (r) => r[label] ?? NaN,
  }));
  const rounds: PairedRound<Record<string, number>>[] = Array.from({ length: ROUNDS }, (_, round) => ({
    base: Object.fromEntries(labels.map((l) => [l, perRound.get(l)!.mbps[round]![0]!])),
    here: Object.fromEntries(labels.map((l) => [l, perRound.get(l)!.mbps[round]![1]!])),
    load: [
      Math.min(...labels.map((l) => perRound.get(l)!.load[round]![0])),
      Math.max(...labels.map((l) => perRound.get(l)!.load[round]![1])),
    ],
  }));
  compareRounds(figures, rounds, { title: "image writer throughput (a)–(c)", baseline });
}

async function runDd(url: string, target: string): Promise<Run> {
  await rm(target, { force: true });
  const started = process.hrtime.bigint();
  // Positional parameters, not interpolation: the shell only wires the pipe.
  await must("sh", ["-c", 'curl -sf "$1" | dd of="$2" bs=4M oflag=direct status=none', "sh", url, target]);
  return { seconds: Number(process.hrtime.bigint() - started) / 1e9 };
}

async function best(times: number, run: () => Promise<Run>): Promise<Run> {
  let winner: Run | undefined;
  for (let i = 0; i < times; i += 1) {
    const r = await run();
    if (!winner || r.seconds < winner.seconds) winner = r;
  }
  return winner as Run;
}

const mbps = (bytes: number, seconds: number): string => (bytes / 1e6 / seconds).toFixed(0).padStart(6);

function report(label: string, run: Run, against: { bytes: number; baseline?: Run }): void {
  const { bytes, baseline } = against;
  const ratio = baseline ? `  ${(baseline.seconds / run.seconds).toFixed(2)}x dd` : "";
  const rss = run.rssMB === undefined ? "" : `  peak RSS ${run.rssMB.toFixed(0)} MB`;
  const written = run.result ? `  wrote ${(run.result.bytes_written / MiB).toFixed(0)} MiB` : "";
  console.log(
    `${label.padEnd(34)} ${run.seconds.toFixed(2).padStart(7)} s ${mbps(bytes, run.seconds)} MB/s${ratio}${rss}${written}`,
  );
}

async function main(): Promise<void> {
  printLoad("at start");
  const small = process.argv.includes("--small");
  const scale = small ? 8 : 1;
  const dir = resolve(".tmp/bench");
  await mkdir(dir, { recursive: true });
  const server = await startHttpImageServer();
  const target = join(dir, "target.img");
  try {
    if (process.argv.includes("--reversed")) {
      await compareOrders(dir);
      return;
    }
    const bundle = await bundleSelf(dir);
    const writers: Writers = [["this checkout", bundle]];
    if (BASELINE_REV) writers.unshift([`baseline ${BASELINE_REV}`, await baselineBundle(dir, BASELINE_REV)]);
    const idle = JSON.parse(await must("node", [bundle, "--idle"])) as { maxRssKiB: number };
    const denseSize = (2 * GiB) / scale;
    const dense = join(dir, "dense.raw");
    await must("dd", [
      "if=/dev/urandom",
      `of=${dense}`,
      "bs=4M",
      `count=${denseSize / (4 * MiB)}`,
      "iflag=fullblock",
      "status=none",
    ]);
    const denseSha = (await must("sha256sum", [dense])).split(" ")[0] ?? "";
    server.serve("/dense.raw", dense);

    const sparseSize = (4 * GiB) / scale;
    const sparse = join(dir, "sparse.raw");
    await makeSparseImage(sparse, sparseSize, 0.1);
    const clientsOnly = process.argv.includes("--clients");
    if (!clientsOnly) {
      await must("qemu-img", ["convert", "-f", "raw", "-O", "qcow2", sparse, join(dir, "sparse.qcow2")]);
      await must("zstd", ["-q", "-f", "-1", "-T2", sparse, "-o", join(dir, "sparse.raw.zst")]);
      await must("xz", ["-k", "-f", "-0", "-T2", sparse]);
      // The block map an operator publishes beside a raw image, made by the real tool.
      await must("bmaptool", ["create", sparse, "-o", join(dir, "sparse.bmap")]);
    }
    const sparseSha = (await must("sha256sum", [sparse])).split(" ")[0] ?? "";
    for (const f of ["sparse.raw", "sparse.bmap", "sparse.qcow2", "sparse.raw.zst", "sparse.raw.xz"]) {
      server.serve(`/${f}`, join(dir, f));
    }

    const url = (f: string): string => `${server.url}/${f}`;
    const req = (f: string, checksum?: string, blockMap?: string): WriteImageRequest => ({
      image: {
        url: url(f),
        image_type: "whole-disk",
        ...(checksum ? { checksum: { algo: "sha256", value: checksum } } : {}),
        ...(blockMap ? { block_map: url(blockMap) } : {}),
      },
    });

    console.log(
      `node ${process.version}, ${small ? "small (1/8) sizes" : "full sizes"}; best of ${ROUNDS} runs each`,
    );
    if (clientsOnly) {
      await compareClients(
        bundle,
        [
          { label: "dense raw", url: url("dense.raw"), sha: denseSha, bytes: denseSize },
          { label: "sparse raw", url: url("sparse.raw"), sha: sparseSha, bytes: sparseSize },
        ],
        target,
      );
      return;
    }
    console.log(
      `writer process idle RSS (bundle loaded, nothing written): ${(idle.maxRssKiB / 1024).toFixed(0)} MB`,
    );
    console.log("(a) raw, dense, sha256 verified");
    const ddA = await best(2, () => runDd(url("dense.raw"), target));
    report("  curl | dd oflag=direct", ddA, { bytes: denseSize });
    await compareWriters(writers, "writeImage", {
      request: req("dense.raw", denseSha),
      target,
      bytes: denseSize,
      baseline: ddA,
    });

    console.log("(b) raw, 10% data");
    const ddB = await best(2, () => runDd(url("sparse.raw"), target));
    report("  curl | dd oflag=direct", ddB, { bytes: sparseSize });
    const sparseRun = { target, bytes: sparseSize, baseline: ddB };
    await compareWriters(writers, "writeImage, streamed whole", { ...sparseRun, request: req("sparse.raw") });
    await compareWriters(writers, "writeImage + block map", {
      ...sparseRun,
      request: req("sparse.raw", undefined, "sparse.bmap"),
    });
    // With a whole-image checksum the holes' zeros must be hashed too: CPU, not network or disk.
    await compareWriters(writers, "writeImage + block map + sha256", {
      ...sparseRun,
      request: req("sparse.raw", sparseSha, "sparse.bmap"),
    });

    console.log("(c) the (b) image, other encodings (MB/s of image bytes; ratio against (b)'s dd)");
    for (const f of ["sparse.qcow2", "sparse.raw.zst", "sparse.raw.xz"]) {
      const size = (await stat(join(dir, f))).size;
      await compareWriters(writers, `writeImage ${f} (${(size / MiB).toFixed(0)} MiB)`, {
        ...sparseRun,
        request: req(f),
      });
    }
    if (BASELINE_REV) compareAllWriters(BASELINE_REV);
    if (process.argv.includes("--writers")) return;
    await compareClients(
      bundle,
      [
        { label: "dense raw", url: url("dense.raw"), sha: denseSha, bytes: denseSize },
        { label: "sparse raw", url: url("sparse.raw"), sha: sparseSha, bytes: sparseSize },
      ],
      target,
    );
    await compareOrders(dir);
  } finally {
    printLoad("at end");
    await server.close();
    await rm(dir, { recursive: true, force: true });
  }
}

if (process.argv[2] === "--child") await child(process.argv[3] ?? "{}");
else if (process.argv[2] === "--client") await clientChild(process.argv[3] ?? "{}");
else if (process.argv[2] === "--idle")
  process.stdout.write(JSON.stringify({ maxRssKiB: process.resourceUsage().maxRSS }));
else await main();
