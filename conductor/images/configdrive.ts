import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
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

/** The config drive as Ironic stores and sends it: base64 of the gzipped ISO. @throws ConfigDriveError */
export async function buildConfigDrive(content: ConfigDriveContent, signal?: AbortSignal): Promise<string> {
  return gzipSync(await buildConfigDriveIso(content, signal), { level: 9 }).toString("base64");
}
