import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CodedError } from "../../shared/errors.ts";
import { exec } from "../../shared/system/exec.ts";
import type { CommandHandler } from "./command.ts";

/** Files copied as they are; missing ones are skipped. */
const FILES: Record<string, string> = {
  "cmdline.txt": "/proc/cmdline",
  "meminfo.txt": "/proc/meminfo",
  "mounts.txt": "/proc/mounts",
  "partitions.txt": "/proc/partitions",
  "mdstat.txt": "/proc/mdstat",
};

/** Commands whose output is kept; absent tools are skipped (a ramdisk carries only some of them). */
const COMMANDS: Record<string, [string, string[]]> = {
  "dmesg.txt": ["dmesg", []],
  "ip-addr.txt": ["ip", ["addr"]],
  "lsblk.txt": ["lsblk", ["--all", "--output-all", "--json"]],
  "ps.txt": ["ps", []],
};

/**
 * The machine's logs as IPA's collect_system_logs returns them: a base64 gzipped tarball, which the
 * conductor stores with the node's deploy logs. The inventory goes in too, as the backend sees it, and the
 * agent's own recent log lines (agent.log, JSON lines: the ramdisk has no journal).
 */
export const collectLogs: CommandHandler<"collect_logs"> = async (_args, { backend, signal, recentLog }) => {
  const dir = await mkdtemp(join(tmpdir(), "anvil-logs-"));
  try {
    const logs = join(dir, "logs");
    await mkdir(logs);
    await writeFile(join(logs, "inventory.json"), JSON.stringify(await backend.inventory(), null, 2));
    if (recentLog) await writeFile(join(logs, "agent.log"), recentLog());
    for (const [name, path] of Object.entries(FILES)) {
      const text = await readFile(path, "utf8").catch(() => null);
      if (text !== null) await writeFile(join(logs, name), text);
    }
    for (const [name, [command, args]] of Object.entries(COMMANDS)) {
      const result = await exec(command, args, { signal, timeoutMs: 30_000 }).catch(() => null);
      if (result !== null) await writeFile(join(logs, name), result.stdout + result.stderr);
    }
    const archive = join(dir, "logs.tar.gz");
    const tar = await exec("tar", ["czf", archive, "-C", logs, "."], { signal, timeoutMs: 60_000 });
    if (tar.code !== 0) throw new CodedError("COMMAND_FAILED", `tar failed: ${tar.stderr.trim()}`);
    return { logs: (await readFile(archive)).toString("base64") };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
};
