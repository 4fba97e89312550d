// exec stops what its child forked too: a timeout or an abort used to SIGKILL the leader alone, and fio's
// forked jobs ran on (seen: orphaned fio readers spinning on a core for an hour after a hung test).
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ExecTimeoutError, exec } from "../../shared/system/exec.ts";
import { waitFor } from "../helpers/wait.ts";

const dir = mkdtempSync(join(tmpdir(), "anvil-exec-group-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Alive and not a zombie (an orphan killed but not yet reaped by init still answers kill 0). */
function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
}

/** A shell that forks two sleepers, writes their pids to a file, and waits: a stand-in for fio's jobs. */
function forker(name: string): { args: string[]; pids(): number[] } {
  const file = join(dir, name);
  return {
    args: ["-c", `sleep 30 & a=$!; sleep 30 & echo "$a $!" > ${file}; wait`],
    pids: () => readFileSync(file, "utf8").trim().split(" ").map(Number),
  };
}

describe("exec stops the child's whole process group", () => {
  it("on a timeout", async () => {
    const shell = forker("timeout");
    await expect(exec("sh", shell.args, { timeoutMs: 300 })).rejects.toBeInstanceOf(ExecTimeoutError);
    const pids = shell.pids();
    expect(pids).toHaveLength(2);
    await waitFor(() => pids.every((pid) => !running(pid)), { timeoutMs: 5000 });
  });

  it("on an abort", async () => {
    const shell = forker("abort");
    const controller = new AbortController();
    const run = exec("sh", shell.args, { signal: controller.signal });
    await waitFor(() => {
      try {
        return shell.pids().length === 2;
      } catch {
        return false;
      }
    });
    controller.abort(new Error("stop"));
    await expect(run).rejects.toThrow("stop");
    const pids = shell.pids();
    await waitFor(() => pids.every((pid) => !running(pid)), { timeoutMs: 5000 });
  });

  it("an ordinary run still resolves with its output and status", async () => {
    const result = await exec("sh", ["-c", "echo out; echo err >&2; exit 3"]);
    expect(result).toMatchObject({ code: 3, stdout: "out\n", stderr: "err\n" });
  });
});
