import { mkdirSync, statfsSync } from "node:fs";
import { join } from "node:path";
import { REPO_ROOT } from "../../scripts/lab/lab.ts";

/** What two lab files at a time need in .tmp/e2e (disks stay sparse; measured peak of the RAID walk: 0.2 GiB). */
const NEEDED_BYTES = 1024 ** 3;

/**
 * Refuses to start the lab tests on a disk that cannot hold them: a full disk shows up much later and
 * elsewhere (a qemu-img error, a failed write in the guest), after minutes of booting VMs.
 */
export default function setup(): void {
  const dir = join(REPO_ROOT, ".tmp", "e2e");
  mkdirSync(dir, { recursive: true });
  const fs = statfsSync(dir);
  const free = fs.bavail * fs.bsize;
  const gib = (bytes: number) => `${(bytes / 1024 ** 3).toFixed(1)} GiB`;
  console.log(`lab e2e: ${gib(free)} free in ${dir}`);
  if (free < NEEDED_BYTES)
    throw new Error(`only ${gib(free)} free in ${dir}; the lab tests need ${gib(NEEDED_BYTES)}`);
}
