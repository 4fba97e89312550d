import { randomUUID } from "node:crypto";
import { refuseDeployImageCredentials } from "../drivers/boot/deploy-images.ts";
import type { NodeCreateBody } from "../../shared/api.ts";
import type { NodeRecord } from "../../shared/resources.ts";
import { checkNetworkData, NetworkDataError } from "../../shared/network-data.ts";
import { isUuid } from "../../shared/uuid.ts";
import type { HardwareType } from "../drivers/hardware-type.ts";
import { Invalid } from "../errors.ts";

/** A node's name must not look like a uuid (Ironic: names and uuids share one lookup). @throws Invalid */
export function checkName(name: string | null | undefined): void {
  if (name && isUuid(name)) throw new Invalid(`Expected a logical name but received ${name}.`);
}

/**
 * A node's network_data (1.66) as Ironic's validate_network_data checks it, with the rules the ramdisk applies
 * to it from a virtual-media ISO: refused here rather than found bad by a ramdisk with no network.
 * @throws Invalid "Invalid network_data: <field>: <what>"
 */
export function checkNodeNetworkData(value: unknown): void {
  if (value === undefined || value === null) return;
  try {
    checkNetworkData(value, "Invalid network_data");
  } catch (error) {
    if (error instanceof NetworkDataError) throw new Invalid(error.message);
    throw error;
  }
}

/**
 * The hardware type's interfaces, each replaced by the one requested if the type offers it (on create, and on
 * a PATCH that names an interface). @throws Invalid naming an interface the type does not offer
 */
export function chooseInterfaces(
  hw: HardwareType,
  requested: Partial<Record<keyof HardwareType["interfaces"], string | undefined>>,
): HardwareType["interfaces"] {
  const interfaces = { ...hw.interfaces };
  for (const key of Object.keys(interfaces) as (keyof typeof interfaces)[]) {
    const wanted = requested[key];
    if (wanted === undefined || wanted === interfaces[key]) continue;
    if (!hw.alternatives[key]?.includes(wanted)) {
      const valid = [interfaces[key], ...(hw.alternatives[key] ?? [])].join(", ");
      throw new Invalid(
        `Interface ${key} "${wanted}" is not valid for hardware type ${hw.name}; valid: ${valid}`,
      );
    }
    interfaces[key] = wanted;
  }
  return interfaces;
}

/**
 * A new node record, as POST /v1/nodes creates it: in `enroll`, or in `available` for a client speaking a
 * microversion before 1.11 (Ironic's initial_node_provision_state); the hardware type's default interfaces
 * unless the body picks one of its alternatives. @throws Invalid naming an interface the type does not offer
 */
export function newNode(
  body: NodeCreateBody,
  hw: HardwareType,
  initialState: "enroll" | "available" = "enroll",
): NodeRecord {
  const interfaces = chooseInterfaces(hw, body);
  refuseDeployImageCredentials(body.driver_info ?? {});
  checkNodeNetworkData(body.network_data);
  return {
    uuid: body.uuid ?? randomUUID(),
    name: body.name ?? null,
    driver: body.driver,
    driver_info: body.driver_info ?? {},
    driver_internal_info: {},
    properties: body.properties ?? {},
    instance_info: body.instance_info ?? {},
    instance_uuid: null,
    allocation_uuid: null,
    extra: body.extra ?? {},
    provision_state: initialState,
    target_provision_state: null,
    provision_updated_at: null,
    power_state: null,
    target_power_state: null,
    maintenance: false,
    maintenance_reason: null,
    fault: null,
    last_error: null,
    reservation: null,
    conductor_group: body.conductor_group ?? "",
    resource_class: body.resource_class ?? null,
    traits: [],
    description: body.description ?? null,
    owner: body.owner ?? null,
    lessee: body.lessee ?? null,
    automated_clean: body.automated_clean ?? null,
    protected: body.protected ?? false,
    protected_reason: body.protected_reason ?? null,
    retired: body.retired ?? false,
    retired_reason: body.retired_reason ?? null,
    console_enabled: false,
    clean_step: {},
    deploy_step: {},
    service_step: {},
    raid_config: {},
    target_raid_config: {},
    network_data: body.network_data ?? {},
    boot_mode: body.boot_mode ?? null,
    secure_boot: null,
    chassis_uuid: body.chassis_uuid ?? null,
    shard: body.shard ?? null,
    parent_node: body.parent_node ?? null,
    // Ironic stores an explicit null as null, and an absent field as its default, false
    disable_power_off: body.disable_power_off === undefined ? false : body.disable_power_off,
    instance_name: body.instance_name ?? null,
    health: null,
    inspection_started_at: null,
    inspection_finished_at: null,
    ...interfaces,
    created_at: new Date().toISOString(),
    updated_at: null,
  };
}
