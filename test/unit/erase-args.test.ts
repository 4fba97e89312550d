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
});
