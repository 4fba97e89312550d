import type { LabNodeProbe } from "../../scripts/lab/probe.ts";
import { settle } from "./cloud.ts";

/** The line the test image prints on every boot (images/test-image), with its hostname. */
const BOOTED = "ANVIL-TEST-IMAGE-BOOTED anvil-test";

/** Counts and waits for a lab VM's boots of the written test image, by its serial console. */
export interface ImageBoots {
  /** How many times the VM has booted the test image so far. */
  count(): Promise<number>;
  /** The console from the boot after the first `before` ones, once that boot printed its config drive. */
  configDriveLines(before: number): Promise<string>;
}

export function imageBoots(probe: LabNodeProbe): ImageBoots {
  const count = async (): Promise<number> => (await probe.serial()).split(BOOTED).length - 1;
  const after = async (before: number): Promise<string | undefined> => {
    if ((await count()) <= before) return undefined;
    const boot = (await probe.serial())
      .split(BOOTED)
      .slice(before + 1)
      .join(BOOTED);
    return /ANVIL-TEST-IMAGE-CONFIGDRIVE/.test(boot) ? boot : undefined;
  };
  return {
    count,
    configDriveLines: (before) =>
      settle("the VM to boot the written image and read its config drive", () => after(before), 10 * 60_000),
  };
}
