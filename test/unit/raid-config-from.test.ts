import { describe, expect, it } from "vitest";
import { raidConfigFrom } from "../../conductor/drivers/raid/raid-steps.ts";
import type { LogicalDisk } from "../../shared/raid.ts";

describe("the raid_config the conductor records after create_raid", () => {
  const requested: LogicalDisk[] = [
    { size_gb: "MAX", raid_level: "1", controller: "software", is_root_volume: true },
  ];

  it("is what the agent reports (create_raid answers {raid_config: {logical_disks}})", () => {
    const built = { ...requested[0], device: "/dev/md0", physical_disks: ["/dev/vda", "/dev/vdb"] };
    const result = { raid_config: { logical_disks: [built], boot_partitions: [] } };
    expect(raidConfigFrom(result, requested)).toEqual({ logical_disks: [built] });
  });

  it("falls back to what was asked for when the answer has another shape", () => {
    expect(raidConfigFrom({ logical_disks: "no" }, requested)).toEqual({ logical_disks: requested });
    expect(raidConfigFrom(null, requested)).toEqual({ logical_disks: requested });
  });
});
