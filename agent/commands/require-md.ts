import { CodedError } from "../../shared/errors.ts";
import type { MdSystem } from "../disk/raid/md-system.ts";
import type { HardwareBackend } from "../hardware/backend.ts";

/** The backend's md, or NOT_SUPPORTED (the simulated backend's disks are files: no software RAID). */
export function requireMd(backend: HardwareBackend): MdSystem {
  if (backend.md === undefined) {
    throw new CodedError(
      "NOT_SUPPORTED",
      `software RAID needs md, which the ${backend.name} backend has not`,
    );
  }
  return backend.md;
}
