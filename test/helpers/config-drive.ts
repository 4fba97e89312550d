import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import { exec } from "../../shared/system/exec.ts";

/** The files of a config-2 drive a test looks at (openstack/latest/...), parsed; absent ones are null. */
export interface ConfigDriveFiles {
  label: string;
  meta_data: Record<string, unknown> | null;
  network_data: Record<string, unknown> | null;
  user_data: string | null;
}

async function member(iso: string, path: string): Promise<string | null> {
  const result = await exec("isoinfo", ["-R", "-i", iso, "-x", path], { timeoutMs: 30_000 });
  // isoinfo prints nothing (and exits 0) for a path the image does not hold
  return result.code === 0 && result.stdout.length > 0 ? result.stdout : null;
}

/** Reads a config drive ISO image file with isoinfo (genisoimage's reader, as Ironic's tests use). */
export async function readConfigDriveIso(iso: string): Promise<ConfigDriveFiles> {
  const pvd = await exec("isoinfo", ["-d", "-i", iso], { timeoutMs: 30_000 });
  const label = /^Volume id:\s*(.*)$/m.exec(pvd.stdout)?.[1]?.trim() ?? "";
  const json = async (path: string) => {
    const text = await member(iso, path);
    return text === null ? null : (JSON.parse(text) as Record<string, unknown>);
  };
  return {
    label,
    meta_data: await json("/openstack/latest/meta_data.json"),
    network_data: await json("/openstack/latest/network_data.json"),
    user_data: await member(iso, "/openstack/latest/user_data"),
  };
}

/** Reads a config drive as Ironic stores and sends it: base64 of the gzipped ISO. */
export async function readConfigDrive(stored: string): Promise<ConfigDriveFiles> {
  const dir = await mkdtemp(join(tmpdir(), "anvil-cd-read-"));
  try {
    const iso = join(dir, "cd.iso");
    await writeFile(iso, gunzipSync(Buffer.from(stored, "base64")));
    return await readConfigDriveIso(iso);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
