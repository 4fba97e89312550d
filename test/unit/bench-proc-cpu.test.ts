import { spawnSync } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { processCpu, processCpuMs, serverCpuMs } from "../../scripts/bench/proc-cpu.ts";

describe("a process's CPU from /proc (the benches' one reader)", () => {
  it("counts this process's own CPU as it works, and its reaped children's apart", () => {
    const before = processCpu("self");
    // spin until the kernel counts 100 ms of CPU (not of wall time: a loaded machine gives less)
    const start = process.cpuUsage();
    let spin = 0;
    for (let used = 0; used < 100_000; spin++) {
      const u = process.cpuUsage(start);
      used = u.user + u.system;
    }
    // a child that does the same, reaped before this returns
    const child =
      "const s = process.cpuUsage(); for (let u = 0; u < 100000; ) { const c = process.cpuUsage(s); u = c.user + c.system; }";
    spawnSync(process.execPath, ["-e", child]);
    const after = processCpu("self");
    expect(spin).toBeGreaterThan(0);
    expect(after.own - before.own).toBeGreaterThanOrEqual(80);
    expect(after.children - before.children).toBeGreaterThanOrEqual(80);
    expect(processCpuMs(process.pid)).toBe(processCpu(process.pid).own);
  });

  it("a process that is gone counts 0", () => {
    const gone = spawnSync(process.execPath, ["-e", "process.pid"]).pid!;
    expect(processCpuMs(gone)).toBe(0);
  });
});

describe("a PostgreSQL server's CPU (its postmaster and backends)", () => {
  it("keeps a backend's CPU once it has ended and been reaped", async () => {
    // this process stands for the postmaster: the backend it forks works 100 ms of CPU, then ends
    const dataDir = await mkdtemp(join(tmpdir(), "anvil-proc-cpu-"));
    try {
      await writeFile(join(dataDir, "postmaster.pid"), `${process.pid}\n${dataDir}\n`);
      const before = serverCpuMs(dataDir);
      const backend =
        "const s = process.cpuUsage(); for (let u = 0; u < 100000; ) { const c = process.cpuUsage(s); u = c.user + c.system; }";
      spawnSync(process.execPath, ["-e", backend]);
      expect(serverCpuMs(dataDir) - before).toBeGreaterThanOrEqual(80);
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});
