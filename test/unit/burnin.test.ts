import { existsSync } from "node:fs";
import { readdir, readFile } from "node:fs/promises";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { burninCpu } from "../../agent/commands/burnin-cpu.ts";
import { burninDisk } from "../../agent/commands/burnin-disk.ts";
import { burninMemory } from "../../agent/commands/burnin-memory.ts";
import { burninNetwork } from "../../agent/commands/burnin-network.ts";
import type { CommandContext } from "../../agent/commands/command.ts";
import { LinuxBurninTools } from "../../agent/hardware/burnin-tools.ts";
import type { BurninTools } from "../../agent/hardware/burnin-tools.ts";
import {
  badblocksFigures,
  parseBadblocks,
  parseFioJson,
  parseStressNg,
} from "../../agent/hardware/burnin-output.ts";
import type { SimulatedBurnin } from "../../agent/hardware/simulated/burnin-tools.ts";
import { SimulatedBackend } from "../../agent/hardware/simulated/simulated-backend.ts";
import { simulatedInventory } from "../../agent/hardware/simulated/sample-inventory.ts";
import { AGENT_STEPS } from "../../shared/agent-steps.ts";
import { BurninNetworkArgs, VmBytesSchema, burninArgs } from "../../shared/burnin.ts";
import { silentLogger } from "../../shared/log.ts";
import { burninRun } from "../../conductor/drivers/deploy/burnin.ts";
import type { DriverTask } from "../../conductor/drivers/task-context.ts";

const DISKS = ["/tmp/anvil-burnin-a.disk", "/tmp/anvil-burnin-b.disk"];

function context(
  failing: SimulatedBurnin[] = [],
  options: { fio?: boolean; fioDelayMs?: number } = {},
): CommandContext & { argv: string[][]; fioSignals: AbortSignal[] } {
  const backend = new SimulatedBackend({
    inventory: simulatedInventory({
      macs: ["52:54:00:aa:bb:02"],
      disks: DISKS.map((name, i) => ({ name, size: 1024 ** 3, serial: `B${i}` })),
    }),
    burninFailing: failing,
  });
  const argv: string[][] = [];
  const fioSignals: AbortSignal[] = [];
  const tools = backend.burnin;
  const recording: BurninTools = {
    stressNg: (args) => (argv.push(["stress-ng", ...args]), tools.stressNg(args)),
    fio: async (args, call) => {
      argv.push(["fio", ...args]);
      if (call.signal) fioSignals.push(call.signal);
      if (options.fio === false) {
        // what spawn rejects with when the program is not on PATH
        throw Object.assign(new Error("spawn fio ENOENT"), { code: "ENOENT" });
      }
      if (options.fioDelayMs !== undefined) await new Promise((r) => setTimeout(r, options.fioDelayMs));
      return tools.fio(args, call);
    },
    badblocks: (args, call) => (argv.push(["badblocks", ...args]), tools.badblocks(args, call)),
    ioCompleted: tools.ioCompleted.bind(tools),
  };
  Object.defineProperty(backend, "burnin", { value: recording });
  return {
    backend,
    signal: new AbortController().signal,
    logger: silentLogger,
    progress: () => undefined,
    afterResult: () => undefined,
    argv,
    fioSignals,
  };
}

// stress-ng 0.15.06's own output (Debian bookworm), from `stress-ng --cpu 1 --timeout 2 --metrics-brief`
const REAL_CPU = `stress-ng: info:  [27187] setting to a 2 second run per stressor
stress-ng: info:  [27187] dispatching hogs: 1 cpu
stress-ng: metrc: [27187] stressor       bogo ops real time  usr time  sys time   bogo ops/s     bogo ops/s
stress-ng: metrc: [27187]                           (secs)    (secs)    (secs)   (real time) (usr+sys time)
stress-ng: metrc: [27187] cpu                 744      2.01      0.66      0.00       369.90        1128.32
stress-ng: info:  [27187] successful run completed in 2.03s
`;

describe("the burn-in steps in the catalogue", () => {
  it("are IPA's: deploy interface, priority 0, abortable; burnin_disk is no service step", () => {
    const burnin = AGENT_STEPS.filter((s) => s.step.startsWith("burnin_")).map(
      (s) => `${s.kind}:${s.interface}.${s.step}:${s.priority}:${s.abortable}`,
    );
    expect(burnin.sort()).toEqual(
      [
        "clean:deploy.burnin_cpu:0:true",
        "clean:deploy.burnin_disk:0:true",
        "clean:deploy.burnin_memory:0:true",
        "clean:deploy.burnin_network:0:true",
        "service:deploy.burnin_cpu:0:true",
        "service:deploy.burnin_memory:0:true",
        "service:deploy.burnin_network:0:true",
      ].sort(),
    );
    // one SMART step, under the name
    expect(AGENT_STEPS.filter((s) => /smart/.test(s.step)).map((s) => `${s.kind}:${s.step}`)).toEqual([
      "clean:smart_check",
      "service:smart_check",
    ]);
  });
});

describe("burninArgs: driver_info knobs, then the step's args", () => {
  it("reads IPA's agent_burnin_* keys (numbers given as strings too) and lets step args win", () => {
    const info = {
      agent_burnin_cpu_timeout: "120",
      agent_burnin_vm_timeout: 30,
      "agent_burnin_vm_vm-bytes": "10%",
      agent_burnin_fio_disk_loops: 2,
      agent_burnin_fio_network_config: JSON.stringify({ role: "reader", partner: "192.0.2.9" }),
      agent_burnin_fio_network_runtime: 60,
    };
    expect(burninArgs("burnin_cpu", info, {})).toEqual({ timeout: 120 });
    expect(burninArgs("burnin_cpu", info, { timeout: 5 })).toEqual({ timeout: 5 });
    expect(burninArgs("burnin_memory", info, {})).toEqual({ timeout: 30, vm_bytes: "10%" });
    expect(burninArgs("burnin_disk", info, { runtime: 3 })).toEqual({ loops: 2, runtime: 3 });
    expect(burninArgs("burnin_disk", { agent_burnin_fio_disk_stall_timeout: "90" }, {})).toEqual({
      stall_timeout: 90,
    });
    expect(BurninNetworkArgs.parse(burninArgs("burnin_network", info, {}))).toEqual({
      role: "reader",
      partner: "192.0.2.9",
      runtime: 60,
    });
  });

  it("vm-bytes and partners that could be read as options are refused", () => {
    expect(VmBytesSchema.safeParse("98%").success).toBe(true);
    expect(VmBytesSchema.safeParse("512m").success).toBe(true);
    expect(VmBytesSchema.safeParse("--help").success).toBe(false);
    expect(VmBytesSchema.safeParse("101%").success).toBe(false);
    expect(BurninNetworkArgs.safeParse({ role: "writer", partner: "-listen" }).success).toBe(false);
    expect(BurninNetworkArgs.safeParse({ role: "writer", partner: "a b" }).success).toBe(false);
  });
});

describe("parseStressNg", () => {
  it("reads stress-ng's metrics rows (0.15's metrc: tag and older info:) and its fail: lines", () => {
    expect(parseStressNg(REAL_CPU)).toEqual({
      metrics: [{ stressor: "cpu", bogo_ops: 744, real_time_s: 2.01, bogo_ops_per_s: 369.9 }],
      failures: [],
    });
    const older = REAL_CPU.replaceAll("metrc:", "info: ").concat(
      "stress-ng: fail:  [27190] vm: detected 3 bit errors while verifying\n",
    );
    expect(parseStressNg(older)).toEqual({
      metrics: [{ stressor: "cpu", bogo_ops: 744, real_time_s: 2.01, bogo_ops_per_s: 369.9 }],
      failures: ["vm: detected 3 bit errors while verifying"],
    });
  });

  it("never throws, and reports only well-formed non-negative figures, on any output", () => {
    const line = fc.oneof(
      fc.string(),
      fc
        .tuple(
          fc.stringMatching(/^[a-z]{1,8}$/),
          fc.array(fc.float({ min: 0, max: 1e6, noNaN: true }), { minLength: 6, maxLength: 6 }),
        )
        .map(([name, n]) => `stress-ng: metrc: [1] ${name} ${n.map((x) => x.toFixed(2)).join(" ")}`),
      fc.constantFrom(...REAL_CPU.split("\n")),
    );
    fc.assert(
      fc.property(fc.array(line, { maxLength: 30 }), (lines) => {
        const out = parseStressNg(lines.join("\n"));
        for (const m of out.metrics) {
          expect(m.stressor).toMatch(/^[a-z][a-z0-9-]*$/);
          for (const x of [m.bogo_ops, m.real_time_s, m.bogo_ops_per_s])
            expect(Number.isFinite(x) && x >= 0).toBe(true);
        }
        expect(out.failures.length).toBeLessThanOrEqual(20);
      }),
    );
  });
});

describe("parseFioJson", () => {
  const report = (jobs: object[]) => JSON.stringify({ "fio version": "fio-3.33", jobs }, null, 2);
  const job = {
    jobname: "/dev/loop0",
    error: 0,
    total_err: 0,
    job_runtime: 3000,
    read: { io_bytes: 544_083_968, bw: 177_110, iops: 44_277.67, runtime: 3000 },
    write: { io_bytes: 277_008_384, bw: 116_601, iops: 22_000.2, runtime: 2500 },
  };

  it("reads each job's bytes, MB/s, IOPS and errors, after the lines fio's net engine prints first", () => {
    const expected = {
      name: "/dev/loop0",
      read_bytes: 544_083_968,
      write_bytes: 277_008_384,
      read_mb_s: 181.36,
      write_mb_s: 110.8,
      read_iops: 44_278,
      write_iops: 22_000,
      runtime_ms: 3000,
      error: 0,
      total_errors: 0,
    };
    expect(parseFioJson(report([job]))).toEqual([expected]);
    expect(
      parseFioJson(`fio: waiting for connection\nfio: waiting for connection\n${report([job])}`),
    ).toEqual([expected]);
    expect(parseFioJson("fio: pid=0, err=22/file:filesetup.c:1155")).toBeNull();
    expect(parseFioJson("")).toBeNull();
  });

  it("gives a group-reported job the run time its bandwidth is over, not the sum over its jobs", () => {
    // the shape of burnin_network's writer in the lab: 16 streams for ~10 s, fio's job_runtime their sum
    const group = {
      jobname: "writer",
      error: 0,
      total_err: 0,
      job_runtime: 161_808,
      read: { io_bytes: 0, bw: 0, iops: 0, runtime: 0 },
      write: { io_bytes: 1_503_238_553, bw: 145_107, iops: 1_134.2, runtime: 10_117 },
    };
    expect(parseFioJson(report([group]))?.[0]).toMatchObject({ runtime_ms: 10_117, write_mb_s: 148.59 });
    // a job with no I/O still says how long it ran
    const idle = { ...group, write: { ...group.write, io_bytes: 0, runtime: 0 }, job_runtime: 42 };
    expect(parseFioJson(report([idle]))?.[0]?.runtime_ms).toBe(42);
  });

  it("never throws on any output, and its figures are finite and non-negative", () => {
    const direction = fc.record({
      io_bytes: fc.oneof(fc.nat(), fc.double(), fc.string()),
      bw: fc.oneof(fc.nat(), fc.constant(-1)),
      iops: fc.double({ min: 0, max: 1e9, noNaN: true }),
      runtime: fc.oneof(fc.nat(), fc.constant(null)),
    });
    const fioJob = fc.record({
      jobname: fc.string(),
      error: fc.integer(),
      read: direction,
      write: direction,
    });
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string(),
          fc.jsonValue().map((v) => JSON.stringify(v)),
          fc.array(fioJob, { maxLength: 4 }).map((jobs) => `fio: waiting\n${report(jobs)}`),
        ),
        (stdout) => {
          const jobs = parseFioJson(stdout);
          for (const j of jobs ?? []) {
            for (const x of [
              j.read_bytes,
              j.write_bytes,
              j.read_mb_s,
              j.write_mb_s,
              j.read_iops,
              j.write_iops,
            ]) {
              expect(Number.isFinite(x) && x >= 0).toBe(true);
            }
          }
        },
      ),
    );
  });
});

// badblocks 1.47.0's own output (Debian bookworm), `badblocks -w -v -b 4096 -c 256 -t 0xaa -t 0x55` on a
// 4 GiB file, interrupted (SIGINT) in the second pass's read
const REAL_BADBLOCKS_INTERRUPTED = `Checking for bad blocks in read-write mode
From block 0 to 1048575
Testing with pattern 0xaa: done                                                 
Reading and comparing: 

Interrupted at block 303360
`;
const REAL_BADBLOCKS_DONE = `Checking for bad blocks in read-write mode
From block 0 to 8191
Testing with pattern 0xaa: done                                                 
Reading and comparing: done                                                 
Pass completed, 0 bad blocks found. (0/0/0 errors)
`;

describe("parseBadblocks and badblocksFigures", () => {
  const run = { device: "/dev/sdb", blockSize: 4096, ioBytes: 1 << 20, elapsedMs: 2000 };

  it("counts whole patterns written and read back, and the interrupted phase up to its block", () => {
    const done = parseBadblocks(REAL_BADBLOCKS_DONE, "");
    expect(done).toMatchObject({ first: 0, last: 8191, writesDone: 1, readsDone: 1, interrupted: null });
    expect(done.errors).toEqual({ read: 0, write: 0, corruption: 0 });
    expect(badblocksFigures(done, run)).toEqual({
      name: "/dev/sdb",
      read_bytes: 32 << 20,
      write_bytes: 32 << 20,
      read_mb_s: 16.78,
      write_mb_s: 16.78,
      read_iops: 16,
      write_iops: 16,
      runtime_ms: 2000,
      error: 0,
      total_errors: 0,
    });
    const stopped = parseBadblocks(REAL_BADBLOCKS_INTERRUPTED, "");
    expect(stopped).toMatchObject({
      writesDone: 1,
      readsDone: 0,
      interrupted: { phase: "read", block: 303_360 },
      errors: null,
    });
    const figures = badblocksFigures(stopped, run);
    expect(figures.write_bytes).toBe(4 * 1024 ** 3);
    expect(figures.read_bytes).toBe(303_360 * 4096);
  });

  it("counts the bad blocks listed on stdout and the closing error counts", () => {
    const report = parseBadblocks(
      REAL_BADBLOCKS_DONE.replace("0 bad blocks found. (0/0/0", "3 bad blocks found. (1/0/2"),
      "17\n18\n4096\n",
    );
    expect(report).toMatchObject({ badBlocks: 3, firstBadBlocks: [17, 18, 4096] });
    expect(report.errors).toEqual({ read: 1, write: 0, corruption: 2 });
    expect(badblocksFigures(report, run).total_errors).toBe(3);
    expect(
      parseBadblocks("badblocks: No such file or directory while trying to determine device size\n", ""),
    ).toMatchObject({ first: null, writesDone: 0, badBlocks: 0 });
  });

  it("never throws on any output, and its figures are finite, non-negative and within the range tested", () => {
    const line = fc.oneof(
      fc.string(),
      fc.constantFrom(...REAL_BADBLOCKS_INTERRUPTED.split("\n"), ...REAL_BADBLOCKS_DONE.split("\n")),
      fc
        .tuple(fc.bigInt({ min: 0n, max: 10n ** 20n }), fc.bigInt({ min: 0n, max: 10n ** 20n }))
        .map(([a, b]) => `From block ${a} to ${b}`),
      fc.bigInt({ min: 0n, max: 10n ** 20n }).map((n) => `Interrupted at block ${n}`),
      fc.constantFrom(
        "Testing with pattern 0xff: done",
        "Testing with random pattern: ",
        "Reading and comparing: done",
      ),
    );
    fc.assert(
      fc.property(
        fc.array(line, { maxLength: 30 }),
        fc.array(fc.oneof(fc.nat().map(String), fc.string()), { maxLength: 30 }),
        fc.nat({ max: 1e7 }),
        (stderr, stdout, elapsedMs) => {
          const report = parseBadblocks(stderr.join("\n"), stdout.join("\n"));
          const job = badblocksFigures(report, { ...run, elapsedMs });
          const phases = report.writesDone + report.readsDone + 1;
          const blocks = report.first !== null && report.last !== null ? report.last - report.first + 1 : 0;
          for (const x of [
            job.read_bytes,
            job.write_bytes,
            job.read_mb_s,
            job.write_mb_s,
            job.read_iops,
            job.write_iops,
            job.total_errors,
          ]) {
            expect(Number.isFinite(x) && x >= 0).toBe(true);
          }
          expect(job.read_bytes + job.write_bytes).toBeLessThanOrEqual(Math.max(blocks, 0) * 4096 * phases);
          expect(report.firstBadBlocks.length).toBeLessThanOrEqual(20);
        },
      ),
    );
  });
});

describe("the burn-in commands on the simulated machine", () => {
  it("burnin_cpu runs IPA's stress-ng command and returns its bogo ops", async () => {
    const ctx = context();
    expect(await burninCpu({ timeout: 3 }, ctx)).toEqual({
      tool: "stress-ng",
      stressor: "cpu",
      timeout_s: 3,
      metrics: [{ stressor: "cpu", bogo_ops: 1200, real_time_s: 3, bogo_ops_per_s: 400 }],
    });
    expect(ctx.argv).toEqual([["stress-ng", "--cpu", "0", "--timeout", "3", "--metrics-brief"]]);
  });

  it("burnin_memory defaults to IPA's 98 % and a day, and fails on a verification error", async () => {
    const ctx = context();
    await burninMemory({}, ctx);
    expect(ctx.argv[0]).toEqual([
      "stress-ng",
      "--vm",
      "0",
      "--timeout",
      "86400",
      "--vm-bytes",
      "98%",
      "--metrics-brief",
    ]);
    await expect(burninMemory({ timeout: 1 }, context(["memory"]))).rejects.toMatchObject({
      code: "COMMAND_FAILED",
      message: "burnin_memory: stress-ng (vm) failed: vm: detected 3 bit errors while verifying",
    });
  });

  it("burnin_disk runs one fio job per disk and fails naming the disks with errors", async () => {
    const ctx = context();
    const result = (await burninDisk({ loops: 1, runtime: 2 }, ctx)) as { devices: { name: string }[] };
    expect(result.devices.map((d) => d.name)).toEqual(DISKS);
    expect(ctx.argv[0]).toEqual(
      expect.arrayContaining(["--verify=crc32c", "--loops=1", "--runtime=2", `--name=${DISKS[0]}`]),
    );
    await expect(burninDisk({ devices: [DISKS[1]!] }, context(["disk"]))).rejects.toMatchObject({
      code: "COMMAND_FAILED",
      message: `burnin_disk: fio found errors on ${DISKS[1]} (error 5, 12 I/O or verify errors)`,
    });
    await expect(burninDisk({ devices: ["/dev/nope"] }, context())).rejects.toMatchObject({
      code: "BAD_ARGS",
    });
  });

  it("burnin_disk stops a fio whose disks complete no I/O for stall_timeout, and fails naming them", async () => {
    const ctx = context(["disk-stall"]);
    const started = Date.now();
    await expect(burninDisk({ loops: 1, stall_timeout: 1 }, ctx)).rejects.toMatchObject({
      code: "COMMAND_FAILED",
      message: `burnin_disk: no I/O completed on ${DISKS.join(", ")} for 1 s; fio was stopped (the disk or its controller stopped answering)`,
    });
    // stopped by the watch, not by the step's own signal
    expect(ctx.fioSignals[0]?.aborted).toBe(true);
    expect(ctx.signal.aborted).toBe(false);
    expect(Date.now() - started).toBeGreaterThanOrEqual(1000);
  });

  it("burnin_disk without fio stops badblocks on disks that complete no I/O, with the same failure", async () => {
    const ctx = context(["disk-stall"], { fio: false });
    await expect(burninDisk({ loops: 1, stall_timeout: 1 }, ctx)).rejects.toMatchObject({
      code: "COMMAND_FAILED",
      message: `burnin_disk: no I/O completed on ${DISKS.join(", ")} for 1 s; badblocks was stopped (the disk or its controller stopped answering)`,
    });
    expect(ctx.argv.filter((argv) => argv[0] === "badblocks")).toHaveLength(DISKS.length);
  });

  it("burnin_disk leaves a slow fio alone while its disks complete I/O", async () => {
    const ctx = context([], { fioDelayMs: 2500 });
    const result = (await burninDisk({ loops: 1, stall_timeout: 1 }, ctx)) as { devices: unknown[] };
    expect(result.devices).toHaveLength(DISKS.length);
    expect(ctx.fioSignals[0]?.aborted).toBe(false);
  });

  it("the stall watch counts Linux's completed reads and writes from sysfs, and gives null where it cannot", async () => {
    const tools = new LinuxBurninTools();
    // every Linux machine lists block devices (loop devices at least) with their /dev nodes
    const names = await readdir("/sys/class/block");
    const name = names.find((n) => existsSync(`/dev/${n}`));
    expect(name, names.join(" ")).toBeDefined();
    const fields = (await readFile(`/sys/class/block/${name}/stat`, "utf8")).trim().split(/\s+/);
    const before = Number(fields[0]) + Number(fields[4]);
    const counted = await tools.ioCompleted([`/dev/${name}`]);
    expect(counted).toBeGreaterThanOrEqual(before);
    expect(await tools.ioCompleted(["/dev/anvil-no-such-disk"])).toBeNull();
  });

  it("burnin_disk without fio runs badblocks' write-read-verify test, a pattern per loop, on every disk", async () => {
    const ctx = context([], { fio: false });
    const result = (await burninDisk({ loops: 6 }, ctx)) as {
      tool: string;
      patterns: string[];
      devices: { name: string; write_bytes: number; read_bytes: number; total_errors: number }[];
    };
    expect(result.tool).toBe("badblocks");
    expect(result.patterns).toEqual(["0xaa", "0x55", "0xff", "0x00", "0xaa", "0x55"]);
    // six patterns over the simulated 64 MiB: each written once and read back once
    expect(result.devices).toEqual(
      DISKS.map((name) =>
        expect.objectContaining({
          name,
          write_bytes: 6 * 64 * 2 ** 20,
          read_bytes: 6 * 64 * 2 ** 20,
          total_errors: 0,
        }),
      ),
    );
    const badblocksRuns = ctx.argv.filter((argv) => argv[0] === "badblocks");
    expect(badblocksRuns.map((argv) => argv.at(-1))).toEqual(DISKS);
    expect(badblocksRuns[0]).toEqual(expect.arrayContaining(["-w", "-b", "4096", "-e", "1000"]));
    await expect(
      burninDisk({ devices: [DISKS[1]!], loops: 1 }, context(["disk"], { fio: false })),
    ).rejects.toMatchObject({
      code: "COMMAND_FAILED",
      message: `burnin_disk: badblocks found errors on ${DISKS[1]}: 3 bad blocks (0/0/3 read/write/compare errors), first 1024, 1025, 40000`,
    });
  });

  it("burnin_network runs both directions, its role first", async () => {
    const ctx = context();
    const result = (await burninNetwork({ role: "reader", partner: "192.0.2.9", runtime: 5 }, ctx)) as {
      directions: { role: string; read_mb_s: number; write_mb_s: number }[];
    };
    expect(result.directions.map((d) => d.role)).toEqual(["reader", "writer"]);
    expect(ctx.argv[0]).toEqual(expect.arrayContaining(["--hostname=192.0.2.9", "--rw=read"]));
    expect(ctx.argv[1]).toEqual(expect.arrayContaining(["--listen", "--rw=write", "--runtime=5"]));
    await expect(
      burninNetwork({ role: "writer", partner: "192.0.2.9", runtime: 5 }, context(["network"])),
    ).rejects.toMatchObject({
      code: "COMMAND_FAILED",
      message: expect.stringMatching(/^burnin_network: fio \(network\) as writer/),
    });
  });

  it("burnin_network's reader retries while its writer is not listening (fio's errno in the JSON report)", async () => {
    const ctx = context();
    const tools = ctx.backend.burnin;
    let refused = 0;
    Object.defineProperty(ctx.backend, "burnin", {
      value: {
        ...tools,
        fio: async (args: readonly string[], options: Parameters<BurninTools["fio"]>[1]) => {
          if (args.includes("--rw=read") && refused < 2) {
            refused += 1;
            // fio 3.33 with --output-format=json: the error lines on stdout, before the report; stderr empty
            const report = { "fio version": "fio-3.33", jobs: [{ jobname: "reader", error: 111 }] };
            return {
              code: 2,
              signal: null,
              stdout: `fio: pid=9888, err=111/file:engines/net.c:800, func=connect, error=Connection refused\n${JSON.stringify(report)}`,
              stderr: "",
            };
          }
          return tools.fio(args, options);
        },
      },
    });
    const result = (await burninNetwork(
      { role: "reader", partner: "192.0.2.9", runtime: 5, retry_interval: 1 },
      ctx,
    )) as { directions: { role: string }[] };
    expect(refused).toBe(2);
    expect(result.directions.map((d) => d.role)).toEqual(["reader", "writer"]);
  });
});

describe("the conductor's side of a burn-in step", () => {
  it("refuses bad knobs before the agent is asked, and says how burnin_network pairs", async () => {
    const task = (driverInfo: Record<string, unknown>) =>
      ({ node: { driver_info: driverInfo } }) as unknown as DriverTask;
    await expect(
      burninRun("burnin_network")(task({ agent_burnin_fio_network_config: { role: "writer" } }), {
        runtime: 5,
      }),
    ).rejects.toThrow(
      /burnin_network: invalid burn-in settings: partner: .*agent_burnin_fio_network_config.*or neither for the conductor to pair the node/,
    );
    await expect(burninRun("burnin_cpu")(task({ agent_burnin_cpu_timeout: "soon" }), {})).rejects.toThrow(
      /^burnin_cpu: invalid burn-in settings: timeout: /,
    );
  });
});
