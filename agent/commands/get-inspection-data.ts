import type { CommandHandler } from "./command.ts";

/**
 * What IPA's inspection collectors report beside the inventory (lldp_raw, pci_devices, numa_topology,
 * nic_firmware), which the conductor stores as the node's plugin_data. Read-only: it runs beside get_inventory.
 */
export const getInspectionData: CommandHandler<"get_inspection_data"> = async (_args, { backend, signal }) =>
  (await backend.collectorData?.({ signal })) ?? {};
