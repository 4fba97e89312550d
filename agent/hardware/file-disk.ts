import { constants } from "node:fs";
import { access, stat } from "node:fs/promises";
import type { Disk } from "../../shared/inventory.ts";
import { exec } from "../../shared/system/exec.ts";
import type { DiskCapabilities } from "./disk-tools.ts";

/**
 * A plain file standing in for a disk (the simulated machine; tests): writable unless the mode says no,
 * and "discard" punches a hole, which reads back as zeros on every Linux filesystem that supports it.
 */
export async function fileCapabilities(disk: Disk): Promise<DiskCapabilities> {
  // The inventory may say anything about a stand-in file; its length is the truth.
  const { size } = await stat(disk.name);
  const writable = await access(disk.name, constants.W_OK).then(
    () => true,
    () => false,
  );
  return {
    disk: { ...disk, size },
    kind: "file",
    readOnly: !writable,
    raidArray: false,
    raidMember: false,
    discard: { supported: true, zeroes: true },
    writeZeroes: true,
    nvme: null,
    ata: null,
  };
}

/** Punches a hole over the whole file, keeping its length. @throws Error with fallocate's complaint */
export async function punchHole(path: string, signal?: AbortSignal): Promise<void> {
  const { size } = await stat(path);
  if (size === 0) return;
  const result = await exec("fallocate", ["--punch-hole", "--offset", "0", "--length", String(size), path], {
    signal,
    timeoutMs: 10 * 60_000,
  });
  if (result.code !== 0) throw new Error(`fallocate --punch-hole failed: ${result.stderr.trim()}`);
}
