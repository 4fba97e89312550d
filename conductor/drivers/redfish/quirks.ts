/**
 * Known deviations of vendors' Redfish services, keyed by the Manufacturer (and Model) the ComputerSystem
 * reports. Each entry says what Anvil does differently and where the deviation was reported.
 */
export interface Quirks {
  /** PATCH BootSourceOverrideEnabled with every boot change, even when unchanged (else it reverts to Once). */
  alwaysSendOverrideEnabled: boolean;
  /** PATCH target, enabled and mode together on every boot change (partial PATCHes are ignored). */
  fullBootRequest: boolean;
  /** Extra attempts when "On" is refused with 409 ActionParameterValueConflict just after a power off. */
  powerOnConflictRetries: number;
  /** Retry a boot change refused with 400 UnableToModifyDuringSystemPOST (the host is in POST). */
  retryBootDuringPost: boolean;
}

export interface QuirkEntry {
  id: string;
  manufacturer: RegExp;
  model?: RegExp;
  quirks: Partial<Quirks>;
  /** The report of the deviation (a release note, bug or story). */
  source: string;
}

export const DEFAULT_QUIRKS: Quirks = {
  alwaysSendOverrideEnabled: false,
  fullBootRequest: false,
  // every BMC may answer 409 while a power action is still settling: a couple of retries for all
  powerOnConflictRetries: 2,
  retryBootDuringPost: false,
};

export const QUIRK_TABLE: readonly QuirkEntry[] = [
  {
    id: "supermicro-override-enabled",
    manufacturer: /^supermicro/i,
    quirks: { alwaysSendOverrideEnabled: true },
    source:
      "https://storyboard.openstack.org/#!/story/2008547 (Ironic release note supermicro-redfish-override-enabled)",
  },
  {
    id: "ami-full-boot-request",
    manufacturer: /american megatrends|^ami\b|asrock/i,
    quirks: { fullBootRequest: true, alwaysSendOverrideEnabled: true },
    source:
      "Ironic commit 54977a14d 'Fix : AsRockRack Management via Redfish' (VENDORS_REQUIRING_FULL_BOOT_REQUEST)",
  },
  {
    id: "idrac10-power-on-409",
    manufacturer: /^dell/i,
    quirks: { powerOnConflictRetries: 10 },
    source:
      "https://bugs.launchpad.net/ironic/+bug/2162995 (Ironic release note redfish-power-on-conflict-retry)",
  },
  {
    id: "ilo-boot-during-post",
    manufacturer: /^(hpe|hp)\b/i,
    quirks: { retryBootDuringPost: true },
    source:
      "Ironic commit 2d253a04f 'Add retry logic for boot device changes during POST' (UnableToModifyDuringSystemPOST)",
  },
];

/** The quirks for a system, every matching entry applied in table order, and the ids that matched. */
export function quirksFor(
  system: { Manufacturer?: string | null; Model?: string | null },
  table: readonly QuirkEntry[] = QUIRK_TABLE,
): { quirks: Quirks; matched: string[] } {
  const manufacturer = (system.Manufacturer ?? "").trim();
  const model = (system.Model ?? "").trim();
  const matched = table.filter(
    (entry) =>
      entry.manufacturer.test(manufacturer) && (entry.model === undefined || entry.model.test(model)),
  );
  const quirks = matched.reduce<Quirks>((acc, entry) => ({ ...acc, ...entry.quirks }), { ...DEFAULT_QUIRKS });
  return { quirks, matched: matched.map((entry) => entry.id) };
}
