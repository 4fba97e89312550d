/** Ironic's provision states, spelled as its API spells them. */
export const PROVISION_STATES = [
  "enroll",
  "verifying",
  "manageable",
  "inspecting",
  "inspect wait",
  "inspect failed",
  "cleaning",
  "clean wait",
  "clean failed",
  "clean hold",
  "available",
  "deploying",
  "wait call-back",
  "deploy failed",
  "deploy hold",
  "active",
  "deleting",
  "error",
  "rescuing",
  "rescue wait",
  "rescue failed",
  "rescue",
  "unrescuing",
  "unrescue failed",
  "adopting",
  "adopt failed",
  "servicing",
  "service wait",
  "service failed",
  "service hold",
] as const;
export type ProvisionState = (typeof PROVISION_STATES)[number];

/** Verbs accepted by PUT /v1/nodes/{id}/states/provision. */
export const PROVISION_VERBS = [
  "manage",
  "provide",
  "inspect",
  "clean",
  "active",
  "deleted",
  "rebuild",
  "abort",
  "rescue",
  "unrescue",
  "adopt",
  "service",
  "unhold",
] as const;
export type ProvisionVerb = (typeof PROVISION_VERBS)[number];

export const POWER_STATES = ["power on", "power off"] as const;
export type PowerState = (typeof POWER_STATES)[number];

/** API 1.109: the hardware's health as its BMC reports it (Ironic's health_states; null: not reported). */
export const HEALTH_STATES = ["OK", "Warning", "Critical"] as const;
export type NodeHealth = (typeof HEALTH_STATES)[number];

/** Targets accepted by PUT /v1/nodes/{id}/states/power. */
export const POWER_TARGETS = [
  "power on",
  "power off",
  "rebooting",
  "soft power off",
  "soft rebooting",
] as const;
export type PowerTarget = (typeof POWER_TARGETS)[number];

export const BOOT_DEVICES = ["pxe", "disk", "cdrom", "bios", "safe"] as const;
export type BootDevice = (typeof BOOT_DEVICES)[number];
