import type { Inventory } from "../../shared/inventory.ts";
import type { RaidConfig } from "../../shared/raid.ts";
import type { CallOptions, DriverNode } from "./out-of-band.ts";
import type { Step } from "./step.ts";

// the out-of-band interfaces live below the step-running ones: a task (which the steps take) may name them
export type {
  BootInterface,
  CallOptions,
  DriverNode,
  ManagementInterface,
  PowerInterface,
} from "./out-of-band.ts";

/**
 * Deploys (and cleans) a node: the steps it declares, and whether they run in the deploy ramdisk. Ironic's
 * DeployInterface; `direct` is the agent's, `fake` finishes at once.
 */
export interface DeployInterface {
  name: string;
  /** The node boots the deploy ramdisk and its agent does the disk work. */
  inBand: boolean;
  steps: readonly Step[];
}

/** Inspects a node's hardware: through the agent (in band), through the BMC (out of band) or not at all (fake). */
export interface InspectInterface {
  name: string;
  inBand: boolean;
  /** Out of band: reads the inventory from the BMC. @throws DriverError */
  inspectHardware?(node: DriverNode, options?: CallOptions): Promise<Inventory>;
}

/** An inspect interface that asks the BMC (Ironic's redfish inspect). */
export type OutOfBandInspectInterface = InspectInterface & {
  inspectHardware(node: DriverNode, options?: CallOptions): Promise<Inventory>;
};

/** Builds and removes RAID volumes from a node's target_raid_config (Ironic's RAIDInterface). */
export interface RaidInterface {
  name: string;
  /** False for `no-raid`: setting a target RAID configuration is refused. */
  supported: boolean;
  steps: readonly Step[];
  /** Checks a target_raid_config beyond Ironic's schema. @throws Invalid */
  validateRaidConfig(config: RaidConfig): void;
}
