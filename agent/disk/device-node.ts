import { readFile, realpath, stat } from "node:fs/promises";
import { basename } from "node:path";
import { exec } from "../../shared/system/exec.ts";

/**
 * Makes sure /dev/NAME exists for a block device the kernel lists in sysfs. With devtmpfs the kernel made it
 * already; without it (and without udev, as in a container) the node is created from sysfs's major:minor.
 * @throws Error when sysfs does not know the device or mknod fails
 */
export async function ensureDeviceNode(name: string, signal?: AbortSignal): Promise<string> {
  const path = `/dev/${name}`;
  const exists = await stat(path).then(
    (info) => info.isBlockDevice(),
    () => false,
  );
  if (exists) return path;
  const [major, minor] = (await readFile(`/sys/class/block/${name}/dev`, "utf8")).trim().split(":");
  if (major === undefined || minor === undefined) throw new Error(`sysfs has no device number for ${name}`);
  const result = await exec("mknod", [path, "b", major, minor], { signal, timeoutMs: 10_000 });
  if (result.code !== 0) throw new Error(`mknod ${path} failed: ${result.stderr.trim()}`);
  return path;
}

/**
 * The sysfs directory of a block device given by any path to it (/dev/disk/by-path/… links to the kernel's
 * name, and sysfs keeps the device under that name). @throws Error when the path does not resolve
 */
export async function sysfsBlockDir(device: string): Promise<{ name: string; dir: string }> {
  const name = basename(await realpath(device));
  return { name, dir: `/sys/class/block/${name}` };
}
