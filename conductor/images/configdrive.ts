import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setImmediate as nextTurn } from "node:timers/promises";
import { promisify } from "node:util";
import { gzip } from "node:zlib";
import { exec } from "../../shared/system/exec.ts";

import type { ConfigDriveContent } from "../../shared/api.ts";

export class ConfigDriveError extends Error {
  override name = "ConfigDriveError";
}

/**
 * Builds the config-2 ISO 9660 image (Rock Ridge + Joliet, volume label config-2) with
 * openstack/latest/{meta_data.json, user_data, network_data.json, vendor_data.json}.
 * @throws ConfigDriveError when genisoimage fails
 */
export async function buildConfigDriveIso(
  content: ConfigDriveContent,
  signal?: AbortSignal,
): Promise<Buffer> {
  const dir = await mkdtemp(join(tmpdir(), "anvil-configdrive-"));
  try {
    const latest = join(dir, "root", "openstack", "latest");
    await mkdir(latest, { recursive: true });
    await writeFile(join(latest, "meta_data.json"), JSON.stringify(content.meta_data));
    if (content.user_data !== undefined) {
      const data = content.user_data;
      const bytes = typeof data === "string" || Buffer.isBuffer(data) ? data : JSON.stringify(data);
      await writeFile(join(latest, "user_data"), bytes);
    }
    if (content.network_data)
      await writeFile(join(latest, "network_data.json"), JSON.stringify(content.network_data));
    if (content.vendor_data)
      await writeFile(join(latest, "vendor_data.json"), JSON.stringify(content.vendor_data));
    const iso = join(dir, "configdrive.iso");
    const args = [
      "-o",
      iso,
      "-ldots",
      "-allow-lowercase",
      "-allow-multidot",
      "-l",
      "-publisher",
      "anvil",
      "-quiet",
      "-J",
      "-r",
      "-V",
      "config-2",
      join(dir, "root"),
    ];
    const result = await exec("genisoimage", args, { signal, timeoutMs: 60_000 });
    if (result.code !== 0)
      throw new ConfigDriveError(`genisoimage failed (${result.code}): ${result.stderr.trim()}`);
    return await readFile(iso);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

const gzipAsync = promisify(gzip);

/** Base64 is encoded this many input bytes at a time (a multiple of 3, so the pieces concatenate). */
const BASE64_SLICE = 3 * 1024 * 1024;

/**
 * base64 of the gzipped bytes, without holding the event loop: gzip runs on libuv's thread pool and the
 * encoding goes slice by slice, so other requests are served while a 40 MB config drive is packed.
 */
export async function gzipBase64(bytes: Buffer): Promise<string> {
  const packed = await gzipAsync(bytes, { level: 9 });
  const parts: string[] = [];
  for (let offset = 0; offset < packed.length; offset += BASE64_SLICE) {
    parts.push(packed.subarray(offset, offset + BASE64_SLICE).toString("base64"));
    await nextTurn();
  }
  return parts.join("");
}

/** The config drive as Ironic stores and sends it: base64 of the gzipped ISO. @throws ConfigDriveError */
export async function buildConfigDrive(content: ConfigDriveContent, signal?: AbortSignal): Promise<string> {
  return gzipBase64(await buildConfigDriveIso(content, signal));
}
