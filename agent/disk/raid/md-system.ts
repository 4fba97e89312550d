import type { ArrayPlan, HolderPlan } from "./plan.ts";

/** An md array the kernel runs. */
export interface RunningArray {
  /** /dev/mdN */
  device: string;
  /** Member devices (partitions or whole disks). */
  members: string[];
  /** The whole disks holding the members. */
  holders: string[];
  /** e.g. "raid1" */
  level: string;
  sizeBytes: number;
  /** e.g. "resync", "idle" */
  syncAction: string;
}

/**
 * Software RAID on the machine: partitioning holders and driving md through mdadm. `LinuxMd` does it for
 * real; the simulated backend has none (its disks are files: no md driver).
 */
export interface MdSystem {
  /** Arrays the kernel runs now. */
  listArrays(): Promise<RunningArray[]>;
  /** Writes the holder's planned GPT and waits for its partition nodes. */
  partition(holder: HolderPlan, signal: AbortSignal): Promise<void>;
  /** Creates the array and waits until it runs (not until it has resynced). */
  create(array: ArrayPlan, signal: AbortSignal): Promise<RunningArray>;
  stop(device: string, signal: AbortSignal): Promise<void>;
  /**
   * Re-assembles arrays create_raid made in an earlier boot (nothing assembles them in the ramdisk), each
   * under its md number, from member partitions named for it. Foreign arrays stay as they are.
   */
  assemble(signal: AbortSignal): Promise<RunningArray[]>;
  /** Every block device (disk or partition, not md) that carries an md superblock, running or not. */
  devicesWithSuperblock(signal: AbortSignal): Promise<string[]>;
  zeroSuperblock(device: string, signal: AbortSignal): Promise<void>;
  /** The whole disk a partition belongs to (a disk is its own). */
  diskOf(device: string): Promise<string>;
}
