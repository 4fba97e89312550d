/**
 * Builds the agent as one Node single executable (SEA): esbuild bundle (CommonJS) → SEA blob → a copy
 * of this node binary, stripped, with the blob injected by postject. Prints the result's size.
 * For another architecture (--arch arm64) the blob goes into the official Node binary of the same version
 * for that architecture, from the npm registry (node-binary.ts), and is built without V8's code cache,
 * which only the architecture that made it can use.
 * Usage: npm run build:agent [-- --out build/anvil-agent] [--arch arm64]
 */
import { copyFile, mkdir, readFile, readdir, rm, stat, writeFile } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { build } from "esbuild";
import { exec } from "../../shared/system/exec.ts";
import { agentArchOf, foreignNodeBinary } from "./node-binary.ts";
import type { AgentArch } from "./node-binary.ts";

const SEA_FUSE = "NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2";
const ROOT = resolve(dirname(new URL(import.meta.url).pathname), "../..");

export interface BuildAgentResult {
  executable: string;
  bundleBytes: number;
  executableBytes: number;
  durationMs: number;
}

/** @throws Error when a step fails (esbuild, the SEA blob, postject), with the tool's stderr. */
export async function buildAgent(
  options: { out?: string; strip?: boolean; arch?: AgentArch } = {},
): Promise<BuildAgentResult> {
  const started = Date.now();
  const arch = options.arch ?? agentArchOf(process.arch);
  const native = arch === agentArchOf(process.arch);
  const executable = resolve(ROOT, options.out ?? "build/anvil-agent");
  const work = join(dirname(executable), "agent-sea");
  await rm(work, { recursive: true, force: true });
  await mkdir(work, { recursive: true });
  const bundle = join(work, "anvil-agent.cjs");
  const blob = join(work, "sea-prep.blob");
  const version = await agentVersion();

  const result = await build({
    entryPoints: [join(ROOT, "agent/main.ts")],
    outfile: bundle,
    bundle: true,
    platform: "node",
    target: "node20",
    format: "cjs",
    minify: true,
    legalComments: "none",
    logLevel: "warning",
    define: {
      // ws probes for these optional native addons at start-up; a SEA can't load them, so say so up front.
      "process.env.WS_NO_BUFFER_UTIL": '"1"',
      "process.env.WS_NO_UTF_8_VALIDATE": '"1"',
      "process.env.ANVIL_AGENT_VERSION": JSON.stringify(version),
    },
    external: ["bufferutil", "utf-8-validate"],
  });
  if (result.errors.length > 0) throw new Error(`esbuild failed: ${result.errors.map((e) => e.text).join("; ")}`);

  const seaConfig = join(work, "sea-config.json");
  await writeFile(
    seaConfig,
    // NOTE: V8's code cache is machine code for the host: a foreign binary gets the architecture-independent
    // blob (no code cache, no snapshot), which it compiles at start.
    JSON.stringify({
      main: bundle,
      output: blob,
      disableExperimentalSEAWarning: true,
      useCodeCache: native,
      useSnapshot: false,
    }),
  );
  await run(process.execPath, ["--experimental-sea-config", seaConfig]);

  const base = native
    ? process.execPath
    : await foreignNodeBinary({
        arch,
        version: process.versions.node,
        cacheDir: join(ROOT, ".tmp/cache/node"),
      });
  const staged = `${executable}.tmp`;
  await copyFile(base, staged);
  // NOTE: strip before injecting: stripping afterwards would drop the injected blob's note. The host's
  // strip knows only its own architecture; binutils' cross strip (or LLVM's) does the others.
  if (options.strip ?? true) await stripAny(staged, native);
  await run(join(ROOT, "node_modules/.bin/postject"), [staged, "NODE_SEA_BLOB", blob, "--sentinel-fuse", SEA_FUSE]);
  await exec("chmod", ["0755", staged]);
  await rm(executable, { force: true });
  await exec("mv", [staged, executable]);

  return {
    executable,
    bundleBytes: (await stat(bundle)).size,
    executableBytes: (await stat(executable)).size,
    durationMs: Date.now() - started,
  };
}

async function stripAny(file: string, native: boolean): Promise<void> {
  const strips = native ? ["strip"] : ["aarch64-linux-gnu-strip", "llvm-strip"];
  for (const strip of strips) {
    const stripped = await exec(strip, [file], { cwd: ROOT, timeoutMs: 300_000 }).catch(() => null);
    if (stripped?.code === 0) return;
  }
}

/** Sources that end up in the executable; the build is stale when any is newer than it. */
const SOURCE_DIRS = ["agent", "shared"];
const SOURCE_FILES = [
  "package-lock.json",
  "scripts/build/agent.ts",
  "scripts/build/node-binary.ts",
  "scripts/build/node-binaries.json",
];

/** True when the executable is missing or older than any source it is built from. */
export async function agentIsStale(out = "build/anvil-agent"): Promise<boolean> {
  const built = await stat(resolve(ROOT, out)).catch(() => null);
  if (built === null) return true;
  const files = [...SOURCE_FILES.map((file) => join(ROOT, file))];
  for (const dir of SOURCE_DIRS) {
    const entries = await readdir(join(ROOT, dir), { recursive: true, withFileTypes: true });
    for (const entry of entries) {
      if (entry.isFile() && entry.name.endsWith(".ts")) files.push(join(entry.parentPath, entry.name));
    }
  }
  const times = await Promise.all(files.map((file) => stat(file).then((s) => s.mtimeMs, () => 0)));
  return times.some((time) => time > built.mtimeMs);
}

async function agentVersion(): Promise<string> {
  const pkg = JSON.parse(await readFile(join(ROOT, "package.json"), "utf8")) as { version: string };
  const head = await exec("git", ["rev-parse", "--short", "HEAD"], { cwd: ROOT }).catch(() => null);
  const sha = head?.code === 0 ? head.stdout.trim() : "";
  return sha === "" ? pkg.version : `${pkg.version}+${sha}`;
}

async function run(command: string, args: string[]): Promise<void> {
  const result = await exec(command, args, { cwd: ROOT, timeoutMs: 300_000 });
  if (result.code !== 0) {
    throw new Error(`${command} ${args.join(" ")} exited ${result.code}: ${result.stderr.trim().slice(-2000)}`);
  }
}

function mib(bytes: number): string {
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === resolve(ROOT, "scripts/build/agent.ts")) {
  const { values } = parseArgs({
    options: {
      out: { type: "string" },
      "no-strip": { type: "boolean", default: false },
      "if-stale": { type: "boolean", default: false },
      arch: { type: "string" },
    },
  });
  const arch = values.arch === undefined ? undefined : agentArchOf(values.arch);
  const skip = values["if-stale"] ? agentIsStale(values.out).then((stale) => !stale) : Promise.resolve(false);
  skip.then(async (fresh) => {
    if (fresh) {
      process.stdout.write(`${values.out ?? "build/anvil-agent"} is up to date\n`);
      return;
    }
    const built = await buildAgent({ out: values.out, strip: !values["no-strip"], arch });
    process.stdout.write(
      `${built.executable}: ${mib(built.executableBytes)} (bundle ${mib(built.bundleBytes)}), built in ${(built.durationMs / 1000).toFixed(1)} s\n`,
    );
  }).then(
    () => undefined,
    (error: unknown) => {
      process.stderr.write(`build:agent failed: ${error instanceof Error ? error.message : String(error)}\n`);
      process.exitCode = 1;
    },
  );
}
