import { randomBytes } from "node:crypto";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { eraseDevices } from "../../agent/disk/erase/erase-devices.ts";
import type { DiskProgress } from "../../agent/disk/erase/erase-disk.ts";
import type {
  DiskCapabilities,
  DiskTools,
  NvmeCapabilities,
  ToolCall,
} from "../../agent/hardware/disk-tools.ts";
import { EraseOptionsSchema } from "../../shared/erase.ts";
import type { EraseOptions } from "../../shared/erase.ts";
import { blankDisk } from "../../shared/inventory.ts";
import { silentLogger } from "../../shared/log.ts";
import { waitFor } from "../helpers/wait.ts";
import type { ExecResult } from "../../shared/system/exec.ts";

const SIZE = 4 * 1024 * 1024;
let dir: string;
let device: string;

const ok = (stdout = ""): ExecResult => ({ code: 0, signal: null, stdout, stderr: "" });
const failed = (stderr: string): ExecResult => ({ code: 5, signal: null, stdout: "", stderr });

/** An ATA drive's security state machine as hdparm drives it; the "disk" is a file it zeroes on erase. */
class FakeAtaDrive {
  enabled = false;
  locked = false;
  frozen = false;
  eraseFails = false;
  eraseKeepsData = false;
  hangOnErase = false;
  /** Set once a security erase has been issued (the password is set by then). */
  eraseStarted = false;

  identify(): string {
    const line = (on: boolean, word: string): string => `${on ? "\t\t" : "\tnot\t"}${word}\n`;
    return (
      `/dev/sdz:\n\nATA device, with non-removable media\nSecurity: \n\tMaster password revision code = 65534\n` +
      line(true, "supported") +
      line(this.enabled, "enabled") +
      line(this.locked, "locked") +
      line(this.frozen, "frozen") +
      "\tnot\texpired: security count\n" +
      line(true, "supported: enhanced erase") +
      "\t2min for SECURITY ERASE UNIT. 2min for ENHANCED SECURITY ERASE UNIT.\nChecksum: correct\n"
    );
  }
}

class FakeTools implements DiskTools {
  readonly calls: string[][] = [];
  ata = new FakeAtaDrive();
  nvmeCaps: NvmeCapabilities | null = null;
  sanitizeLog: string[] = [];
  nvmeFails: string | null = null;

  async capabilities(): Promise<DiskCapabilities> {
    return {
      disk: blankDisk(device, SIZE),
      kind: "block",
      readOnly: false,
      raidArray: false,
      raidMember: false,
      discard: { supported: false, zeroes: false },
      writeZeroes: false,
      nvme: this.nvmeCaps,
      ata: this.nvmeCaps === null ? { ...parseAta(this.ata) } : null,
    };
  }

  async discard(): Promise<void> {
    throw new Error("no discard here");
  }

  async nvme(args: readonly string[]): Promise<ExecResult> {
    this.calls.push(["nvme", ...args]);
    const [verb] = args;
    if (verb === "sanitize-log")
      return ok(this.sanitizeLog.shift() ?? JSON.stringify({ sprog: 65535, sstat: 1 }));
    if (this.nvmeFails !== null) return failed(this.nvmeFails);
    if (verb === "format" || verb === "sanitize") await writeFile(device, Buffer.alloc(SIZE));
    return ok();
  }

  async smartctl(): Promise<ExecResult> {
    throw new Error("erasing never reads SMART");
  }

  async hdparm(args: readonly string[], call: ToolCall): Promise<ExecResult> {
    this.calls.push(["hdparm", ...args]);
    const drive = this.ata;
    const action = args.find((arg) => arg.startsWith("--security-") || arg === "-I");
    switch (action) {
      case "-I":
        return ok(drive.identify());
      case "--security-set-pass":
        drive.enabled = true;
        return ok();
      case "--security-erase":
      case "--security-erase-enhanced":
        drive.eraseStarted = true;
        if (drive.hangOnErase) {
          await new Promise((_, reject) =>
            call.signal?.addEventListener("abort", () => reject(call.signal?.reason)),
          );
        }
        if (drive.eraseFails) return failed("SECURITY_ERASE: Input/output error");
        if (!drive.eraseKeepsData) await writeFile(device, Buffer.alloc(SIZE));
        drive.enabled = false;
        return ok();
      case "--security-unlock":
        drive.locked = false;
        return ok();
      case "--security-disable":
        drive.enabled = false;
        return ok();
      case undefined:
      default:
        return failed(`unexpected hdparm ${args.join(" ")}`);
    }
  }
}

function parseAta(drive: FakeAtaDrive): NonNullable<DiskCapabilities["ata"]> {
  return {
    supported: true,
    enabled: drive.enabled,
    locked: drive.locked,
    frozen: drive.frozen,
    countExpired: false,
    enhancedErase: true,
    eraseMinutes: 2,
    enhancedEraseMinutes: 2,
  };
}

async function run(
  tools: FakeTools,
  overrides: Partial<EraseOptions> = {},
  signal = new AbortController().signal,
) {
  const reports: DiskProgress[] = [];
  const results = await eraseDevices({
    disks: [blankDisk(device, SIZE)],
    mode: "full",
    options: { ...EraseOptionsSchema.parse({}), ...overrides },
    tools,
    signal,
    logger: silentLogger,
    report: (_device, progress) => reports.push(progress),
    pollMs: 1,
  });
  return { results, reports };
}

const nvme = (overrides: Partial<NvmeCapabilities>): NvmeCapabilities => ({
  format: true,
  cryptoFormat: false,
  sanitize: { crypto: false, block: false, overwrite: false },
  lbaf: 0,
  deallocatedReadZero: false,
  ...overrides,
});

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "anvil-erase-firmware-"));
  device = join(dir, "sdz");
});
beforeEach(async () => {
  await writeFile(device, randomBytes(SIZE));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("ATA secure erase through hdparm", () => {
  it("sets the throwaway password, erases enhanced, checks security is off, and verifies the data changed", async () => {
    const tools = new FakeTools();
    const { results } = await run(tools);
    expect(results).toMatchObject([{ method: "ata_secure_erase_enhanced", verified: true }]);
    expect(tools.calls.filter((c) => c[0] === "hdparm").map((c) => c.slice(1).join(" "))).toEqual([
      "-I " + device,
      `--user-master u --security-set-pass NULL ${device}`,
      `--user-master u --security-erase-enhanced NULL ${device}`,
      "-I " + device,
    ]);
    expect(tools.ata.enabled).toBe(false);
  });

  it("a failed erase names disk and method, and leaves no password set", async () => {
    const tools = new FakeTools();
    tools.ata.eraseFails = true;
    await expect(run(tools)).rejects.toThrow(
      new RegExp(
        `^${device}: ata_secure_erase_enhanced failed: hdparm .*--security-erase-enhanced.*Input/output error`,
      ),
    );
    expect(tools.ata.enabled).toBe(false);
    expect(tools.calls.at(-1)).toEqual([
      "hdparm",
      "--user-master",
      "u",
      "--security-disable",
      "NULL",
      device,
    ]);
  });

  it("an abort during the erase still clears the password", async () => {
    const tools = new FakeTools();
    tools.ata.hangOnErase = true;
    const controller = new AbortController();
    const running = run(tools, {}, controller.signal);
    // aborted during the erase, not before it: a fixed 50 ms could end before the password was even set
    await waitFor(() => tools.ata.eraseStarted, { what: "the erase to start" });
    expect(tools.ata.enabled).toBe(true);
    controller.abort(new Error("cancelled"));
    await expect(running).rejects.toThrow("cancelled");
    expect(tools.ata.enabled).toBe(false);
  });

  it("a drive that reports success but kept its data fails verification", async () => {
    const tools = new FakeTools();
    tools.ata.eraseKeepsData = true;
    await expect(run(tools)).rejects.toThrow(
      /ata_secure_erase_enhanced failed: verify: \d+ of \d+ sampled regions/,
    );
  });

  it("with continue_if_disk_secure_erase_fails a failed secure erase falls back to overwriting", async () => {
    const tools = new FakeTools();
    tools.ata.eraseFails = true;
    const { results } = await run(tools, { continue_if_disk_secure_erase_fails: true });
    expect(results).toMatchObject([
      { method: "overwrite", verified: true, fell_back: [{ method: "ata_secure_erase_enhanced" }] },
    ]);
    expect((await readFile(device)).every((b) => b === 0)).toBe(true);
    expect(tools.ata.enabled).toBe(false);
  });

  it("a frozen drive is overwritten, and hdparm never sets a password on it", async () => {
    const tools = new FakeTools();
    tools.ata.frozen = true;
    const { results } = await run(tools);
    expect(results).toMatchObject([{ method: "overwrite", verified: true }]);
    expect(tools.calls.some((c) => c.includes("--security-set-pass"))).toBe(false);
  });
});

describe("failures name the disk", () => {
  it("a disk that cannot be examined fails the step before anything is erased, naming it", async () => {
    const tools = new FakeTools();
    tools.capabilities = () => Promise.reject(new Error("ENOENT: no such file or directory"));
    await expect(run(tools)).rejects.toThrow(`${device}: cannot examine the disk: ENOENT`);
    expect(tools.calls).toEqual([]);
  });
});

describe("software RAID members", () => {
  it("a disk named as holding an md member is skipped untouched, whatever its sysfs said", async () => {
    const tools = new FakeTools();
    tools.nvmeCaps = nvme({});
    const before = await readFile(device);
    const results = await eraseDevices({
      disks: [blankDisk(device, SIZE)],
      mode: "full",
      options: EraseOptionsSchema.parse({}),
      tools,
      signal: new AbortController().signal,
      logger: silentLogger,
      report: () => undefined,
      raidMembers: new Set([device]),
    });
    expect(results).toEqual([
      expect.objectContaining({
        device,
        method: null,
        skipped: expect.stringMatching(/software RAID member/),
      }),
    ]);
    expect(tools.calls).toEqual([]);
    expect((await readFile(device)).equals(before)).toBe(true);
  });
});

describe("NVMe format and sanitize through nvme-cli", () => {
  it("a crypto format keeps the namespace's LBA format", async () => {
    const tools = new FakeTools();
    tools.nvmeCaps = nvme({ cryptoFormat: true, lbaf: 1 });
    const { results } = await run(tools);
    expect(results).toMatchObject([{ method: "nvme_format_crypto", verified: true }]);
    expect(tools.calls).toEqual([["nvme", "format", device, "--ses=2", "--force", "--lbaf=1"]]);
  });

  it("a sanitize crypto erase is waited for through the sanitize log, with progress", async () => {
    const tools = new FakeTools();
    tools.nvmeCaps = nvme({ sanitize: { crypto: true, block: true, overwrite: false } });
    tools.sanitizeLog = [
      JSON.stringify({ sprog: 16384, sstat: 2 }),
      JSON.stringify({ nvme0: { sprog: 65535, sstat: { status: "(1) completed" } } }),
    ];
    const { results, reports } = await run(tools);
    expect(results).toMatchObject([{ method: "nvme_sanitize_crypto", verified: true }]);
    expect(tools.calls.map((c) => c.slice(1, 2).concat(c.slice(3)).join(" "))).toEqual([
      "sanitize --sanact=4",
      "sanitize-log -o json",
      "sanitize-log -o json",
    ]);
    expect(reports).toContainEqual({
      message: "nvme_sanitize_crypto",
      bytes_done: SIZE / 4,
      bytes_total: SIZE,
    });
  });

  it("a sanitize the controller reports as failed fails the disk, naming it", async () => {
    const tools = new FakeTools();
    tools.nvmeCaps = nvme({ format: false, sanitize: { crypto: false, block: true, overwrite: false } });
    tools.sanitizeLog = [JSON.stringify({ sprog: 0, sstat: 3 })];
    await expect(run(tools)).rejects.toThrow(`${device}: nvme_sanitize_block failed: the controller reports`);
  });

  it("a refused format fails the disk with nvme-cli's complaint", async () => {
    const tools = new FakeTools();
    tools.nvmeCaps = nvme({});
    tools.nvmeFails = "NVMe status: INVALID_FORMAT: The LBA Format specified is not supported(0x410a)";
    await expect(run(tools)).rejects.toThrow(/nvme_format_user_data failed: nvme format .*INVALID_FORMAT/);
  });

  it("enable_nvme_secure_erase=false overwrites instead and never runs nvme format", async () => {
    const tools = new FakeTools();
    tools.nvmeCaps = nvme({ cryptoFormat: true });
    const { results } = await run(tools, { enable_nvme_secure_erase: false });
    expect(results).toMatchObject([{ method: "overwrite" }]);
    expect(tools.calls).toEqual([]);
  });
});
