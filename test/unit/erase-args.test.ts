import { describe, expect, it } from "vitest";
import { defaultConfig } from "../../conductor/config.ts";
import { COMMAND_ARGS } from "../../shared/protocol.ts";
import { EraseOptionsSchema, eraseDevicesArgs, eraseMetadataArgs } from "../../shared/erase.ts";

describe("erase arguments from the conductor's settings and the node", () => {
  it("Ironic's [deploy] defaults reach the agent unchanged", () => {
    const args = eraseDevicesArgs(defaultConfig().erase, { properties: {} });
    expect(EraseOptionsSchema.parse(args)).toEqual(EraseOptionsSchema.parse({}));
  });

  it("settings and express are carried over, and the agent's schema accepts them", () => {
    const config = defaultConfig({
      erase: { shredRandomOverwriteIterations: 0, continueIfDiskSecureEraseFails: true },
    });
    const args = eraseDevicesArgs(config.erase, { properties: {} }, { express: true });
    expect(COMMAND_ARGS.erase_devices.parse(args)).toMatchObject({
      shred_random_overwrite_iterations: 0,
      continue_if_disk_secure_erase_fails: true,
      express: true,
    });
  });

  it("the node's skip_block_devices become the agent's skip list, for both erases", () => {
    const node = { properties: { skip_block_devices: [{ name: "/dev/sdb" }, { volume_name: "data" }] } };
    expect(eraseDevicesArgs(defaultConfig().erase, node).skip_block_devices).toEqual([
      { name: "/dev/sdb" },
      { volume_name: "data" },
    ]);
    expect(COMMAND_ARGS.erase_devices_metadata.parse(eraseMetadataArgs(node))).toEqual({
      skip_block_devices: [{ name: "/dev/sdb" }, { volume_name: "data" }],
    });
  });

  it("a malformed skip_block_devices is an error that names the property", () => {
    expect(() => eraseMetadataArgs({ properties: { skip_block_devices: "sdb" } })).toThrow(
      /properties\.skip_block_devices is not a list of device hints/,
    );
    expect(() => eraseMetadataArgs({ properties: { skip_block_devices: [{ colour: "red" }] } })).toThrow(
      /properties\.skip_block_devices/,
    );
  });

  it("the overwrite's shape is optional, bounded and absent unless asked for", () => {
    expect(EraseOptionsSchema.parse({})).not.toHaveProperty("overwrite_block_mib");
    expect(EraseOptionsSchema.parse({ overwrite_block_mib: 16, overwrite_depth: 2 })).toMatchObject({
      overwrite_block_mib: 16,
      overwrite_depth: 2,
    });
    for (const bad of [0, 65, 1.5, -4, "4", null]) {
      expect(EraseOptionsSchema.safeParse({ overwrite_block_mib: bad }).success).toBe(false);
    }
    for (const bad of [0, 17, 2.5, "2"]) {
      expect(EraseOptionsSchema.safeParse({ overwrite_depth: bad }).success).toBe(false);
    }
  });
});
