import { describe, expect, it } from "vitest";
import { needsBootloader } from "../../conductor/drivers/deploy/agent.ts";

describe("whether a deploy installs GRUB (Ironic's rule)", () => {
  it("not for a whole-disk image: it brings its own bootloader", () => {
    expect(needsBootloader({ instance_info: {}, raid_config: {} })).toBe(false);
    expect(needsBootloader({ instance_info: { image_type: "whole-disk" }, raid_config: {} })).toBe(false);
  });
  it("for a partition image", () => {
    expect(needsBootloader({ instance_info: { image_type: "partition" }, raid_config: {} })).toBe(true);
  });
  it("for any image on software RAID, so every member can boot", () => {
    const raid_config = { logical_disks: [{ raid_level: "1", size_gb: "MAX", controller: "software" }] };
    expect(needsBootloader({ instance_info: {}, raid_config })).toBe(true);
    expect(
      needsBootloader({ instance_info: {}, raid_config: { logical_disks: [{ controller: "hw" }] } }),
    ).toBe(false);
  });
});
