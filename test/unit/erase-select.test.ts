import { describe, expect, it } from "vitest";
import { selectErase } from "../../agent/disk/erase/select.ts";
import type { EraseMode } from "../../agent/disk/erase/select.ts";
import type { AtaSecurity, DiskCapabilities, NvmeCapabilities } from "../../agent/hardware/disk-tools.ts";
import { EraseOptionsSchema } from "../../shared/erase.ts";
import type { EraseOptions } from "../../shared/erase.ts";
import { blankDisk } from "../../shared/inventory.ts";

const GIB = 1024 ** 3;

function disk(
  overrides: Partial<DiskCapabilities> & { name?: string; rotational?: boolean } = {},
): DiskCapabilities {
  const { name = "/dev/sda", rotational = false, ...caps } = overrides;
  return {
    disk: { ...blankDisk(name, 100 * GIB), rotational, serial: `serial-${name}` },
    kind: "block",
    readOnly: false,
    raidArray: false,
    raidMember: false,
    discard: { supported: false, zeroes: false },
    writeZeroes: false,
    nvme: null,
    ata: null,
    ...caps,
  };
}

const nvme = (overrides: Partial<NvmeCapabilities> = {}): NvmeCapabilities => ({
  format: true,
  cryptoFormat: false,
  sanitize: { crypto: false, block: false, overwrite: false },
  lbaf: 0,
  deallocatedReadZero: false,
  ...overrides,
});

const ata = (overrides: Partial<AtaSecurity> = {}): AtaSecurity => ({
  supported: true,
  enabled: false,
  locked: false,
  frozen: false,
  countExpired: false,
  enhancedErase: false,
  eraseMinutes: 2,
  enhancedEraseMinutes: 2,
  ...overrides,
});

const options = (overrides: Partial<EraseOptions> = {}): EraseOptions => ({
  ...EraseOptionsSchema.parse({}),
  ...overrides,
});

function plan(caps: DiskCapabilities, input: { mode?: EraseMode; options?: Partial<EraseOptions> } = {}) {
  return selectErase(caps, { mode: input.mode ?? "full", options: options(input.options) });
}

const methods = (result: ReturnType<typeof plan>) =>
  result.action === "erase" ? result.attempts.map((a) => `${a.method}:${a.onFailure}`) : result.action;

describe("erase method selection: NVMe", () => {
  it("prefers sanitize crypto erase when the controller offers it", () => {
    const caps = disk({
      name: "/dev/nvme0n1",
      nvme: nvme({ cryptoFormat: true, sanitize: { crypto: true, block: true, overwrite: true } }),
    });
    expect(methods(plan(caps))).toEqual(["nvme_sanitize_crypto:fail"]);
  });

  it("uses a crypto format (SES=2) without sanitize but with FNA's crypto bit", () => {
    expect(methods(plan(disk({ nvme: nvme({ cryptoFormat: true }) })))).toEqual(["nvme_format_crypto:fail"]);
  });

  it("prefers sanitize block erase to a user-data format without crypto", () => {
    const caps = disk({ nvme: nvme({ sanitize: { crypto: false, block: true, overwrite: false } }) });
    expect(methods(plan(caps))).toEqual(["nvme_sanitize_block:fail"]);
  });

  it("uses a user-data format (SES=1) without crypto and without sanitize", () => {
    expect(methods(plan(disk({ nvme: nvme() })))).toEqual(["nvme_format_user_data:fail"]);
  });

  it("falls to sanitize overwrite when that is all the controller offers", () => {
    const caps = disk({
      nvme: nvme({ format: false, sanitize: { crypto: false, block: false, overwrite: true } }),
    });
    expect(methods(plan(caps))).toEqual(["nvme_sanitize_overwrite:fail"]);
  });

  it("a controller with neither format nor sanitize is overwritten, and says why", () => {
    const result = plan(disk({ nvme: nvme({ format: false }) }));
    expect(methods(result)).toEqual(["overwrite:fail"]);
    expect(result.action === "erase" && result.passedOver.join()).toMatch(/neither format nor sanitize/);
  });

  it("enable_nvme_secure_erase=false skips the firmware methods", () => {
    const caps = disk({ nvme: nvme({ cryptoFormat: true }), discard: { supported: true, zeroes: true } });
    expect(methods(plan(caps, { options: { enable_nvme_secure_erase: false } }))).toEqual([
      "discard:next",
      "overwrite:fail",
    ]);
  });

  it("continue_if_disk_secure_erase_fails adds the software fallbacks after the firmware method", () => {
    const caps = disk({ nvme: nvme(), discard: { supported: true, zeroes: true } });
    expect(methods(plan(caps, { options: { continue_if_disk_secure_erase_fails: true } }))).toEqual([
      "nvme_format_user_data:next",
      "discard:next",
      "overwrite:fail",
    ]);
  });
});

describe("erase method selection: ATA", () => {
  it("uses the enhanced security erase when the drive supports it", () => {
    expect(methods(plan(disk({ ata: ata({ enhancedErase: true }) })))).toEqual([
      "ata_secure_erase_enhanced:fail",
    ]);
  });

  it("uses the normal security erase without enhanced support", () => {
    expect(methods(plan(disk({ ata: ata() })))).toEqual(["ata_secure_erase:fail"]);
  });

  it("a frozen drive is not security-erased, with the reason", () => {
    const result = plan(disk({ ata: ata({ frozen: true }) }));
    expect(methods(result)).toEqual(["overwrite:fail"]);
    expect(result.action === "erase" && result.passedOver.join()).toMatch(/frozen/);
  });

  it("a drive without the security feature set is not security-erased", () => {
    const result = plan(disk({ ata: ata({ supported: false }) }));
    expect(methods(result)).toEqual(["overwrite:fail"]);
    expect(result.action === "erase" && result.passedOver.join()).toMatch(/does not support/);
  });

  it("a locked drive or an expired counter is not security-erased", () => {
    expect(methods(plan(disk({ ata: ata({ locked: true }) })))).toEqual(["overwrite:fail"]);
    expect(methods(plan(disk({ ata: ata({ countExpired: true }) })))).toEqual(["overwrite:fail"]);
  });

  it("enable_ata_secure_erase=false skips it", () => {
    expect(methods(plan(disk({ ata: ata() }), { options: { enable_ata_secure_erase: false } }))).toEqual([
      "overwrite:fail",
    ]);
  });
});

describe("erase method selection: discard and overwrite", () => {
  it("a discard the device promises reads zeros comes before overwriting", () => {
    expect(methods(plan(disk({ discard: { supported: true, zeroes: true } })))).toEqual([
      "discard:next",
      "overwrite:fail",
    ]);
  });

  it("a discard without that promise is no erase; WRITE ZEROES is used when offloaded", () => {
    expect(methods(plan(disk({ discard: { supported: true, zeroes: false } })))).toEqual(["overwrite:fail"]);
    expect(methods(plan(disk({ discard: { supported: true, zeroes: false }, writeZeroes: true })))).toEqual([
      "write_zeroes:next",
      "overwrite:fail",
    ]);
  });

  it("a rotational disk is discarded only when the discard zeroes (a thin or loop device), never WRITE ZEROES'd", () => {
    expect(methods(plan(disk({ rotational: true, writeZeroes: true })))).toEqual(["overwrite:fail"]);
    expect(methods(plan(disk({ rotational: true, discard: { supported: true, zeroes: true } })))).toEqual([
      "discard:next",
      "overwrite:fail",
    ]);
  });

  it("enable_discard=false overwrites", () => {
    expect(
      methods(
        plan(disk({ discard: { supported: true, zeroes: true } }), { options: { enable_discard: false } }),
      ),
    ).toEqual(["overwrite:fail"]);
  });

  it("no overwrite passes and no zeroing discard: the disk cannot be erased", () => {
    const result = plan(disk(), {
      options: { shred_random_overwrite_iterations: 0, shred_final_overwrite_with_zeros: false },
    });
    expect(result).toMatchObject({ action: "fail", reason: expect.stringMatching(/no erase method/) });
  });
});

describe("erase method selection: skipping", () => {
  it("a read-only disk fails a full erase unless erase_skip_read_only", () => {
    expect(plan(disk({ readOnly: true }))).toMatchObject({
      action: "fail",
      reason: expect.stringMatching(/read-only/),
    });
    expect(plan(disk({ readOnly: true }), { options: { erase_skip_read_only: true } })).toEqual({
      action: "skip",
      reason: "read-only device",
    });
  });

  it("a software RAID member is skipped in every mode, as IPA skips linux_raid_member devices", () => {
    for (const mode of ["full", "express", "metadata"] as const) {
      expect(plan(disk({ name: "/dev/vda", raidMember: true }), { mode })).toMatchObject({
        action: "skip",
        reason: expect.stringMatching(/RAID member/),
      });
    }
  });

  it("a software RAID array is erased like a disk: metadata, a zeroing discard, else overwriting", () => {
    const md = (caps: Partial<DiskCapabilities> = {}) => disk({ name: "/dev/md0", raidArray: true, ...caps });
    expect(methods(plan(md(), { mode: "metadata" }))).toEqual(["metadata:fail"]);
    expect(methods(plan(md()))).toEqual(["overwrite:fail"]);
    expect(methods(plan(md({ discard: { supported: true, zeroes: true } })))).toEqual([
      "discard:next",
      "overwrite:fail",
    ]);
    expect(methods(plan(md(), { mode: "express" }))).toEqual(["metadata:fail"]);
  });

  it("a read-only disk is skipped by the metadata and express erases", () => {
    expect(plan(disk({ readOnly: true }), { mode: "metadata" })).toMatchObject({ action: "skip" });
    expect(plan(disk({ readOnly: true }), { mode: "express" })).toMatchObject({ action: "skip" });
  });

  it("a disk matched by skip_block_devices hints is skipped; a volume_name entry is not a disk hint", () => {
    const caps = disk({ name: "/dev/sdb" });
    expect(plan(caps, { options: { skip_block_devices: [{ name: "/dev/sdb" }] } })).toMatchObject({
      action: "skip",
    });
    expect(plan(caps, { options: { skip_block_devices: [{ serial: "serial-/dev/sdb" }] } })).toMatchObject({
      action: "skip",
    });
    expect(
      methods(
        plan(caps, { options: { skip_block_devices: [{ name: "/dev/sda" }, { volume_name: "root" }] } }),
      ),
    ).toEqual(["overwrite:fail"]);
  });
});

describe("erase method selection: express and metadata", () => {
  it("express uses a firmware method, then the metadata erase whatever happens", () => {
    expect(methods(plan(disk({ nvme: nvme({ cryptoFormat: true }) }), { mode: "express" }))).toEqual([
      "nvme_format_crypto:next",
      "metadata:fail",
    ]);
  });

  it("express uses a zeroing discard where there is no firmware method", () => {
    expect(methods(plan(disk({ discard: { supported: true, zeroes: true } }), { mode: "express" }))).toEqual([
      "discard:next",
      "metadata:fail",
    ]);
  });

  it("express does not security-erase a spinning ATA disk (hours), and never overwrites", () => {
    expect(methods(plan(disk({ rotational: true, ata: ata() }), { mode: "express" }))).toEqual([
      "metadata:fail",
    ]);
    expect(methods(plan(disk(), { mode: "express" }))).toEqual(["metadata:fail"]);
  });

  it("metadata mode erases metadata only, even on an NVMe disk", () => {
    expect(methods(plan(disk({ nvme: nvme({ cryptoFormat: true }) }), { mode: "metadata" }))).toEqual([
      "metadata:fail",
    ]);
  });
});
