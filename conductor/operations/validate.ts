import type { NodeRecord } from "../../shared/resources.ts";
import { nodeInterfaces, type HardwareType } from "../drivers/hardware-type.ts";
import type { DriverNode } from "../drivers/interfaces.ts";
import { defineOperation, hardwareOf, underLock, type OperationContext } from "./operation.ts";

/** GET /v1/nodes/{id}/validate: each interface's check, under a shared lock (Ironic's validate_driver_interfaces). */
export const VALIDATE = defineOperation({ purpose: "validate", shared: true, onOwner: true });

type Check = { result: boolean | null; reason?: string };

function reasonOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function check(fn: () => void): Check {
  try {
    fn();
    return { result: true };
  } catch (error) {
    return { result: false, reason: reasonOf(error) };
  }
}

/** The per-interface report Ironic's validate answers with. Pure. */
export function validationReport(
  hw: HardwareType,
  record: NodeRecord,
  node: DriverNode,
): Record<string, Check> {
  const notImplemented = { result: null, reason: "not supported" };
  let raid: Check = notImplemented;
  try {
    if (nodeInterfaces(hw, record).raid.supported) raid = { result: true };
  } catch (error) {
    raid = { result: false, reason: reasonOf(error) };
  }
  return {
    boot: check(() => hw.boot.validate(node)),
    console: notImplemented,
    deploy: check(() => hw.boot.validate(node)),
    inspect: check(() => hw.power.validate(node)),
    management: check(() => hw.management.validate(node)),
    network: { result: true },
    power: check(() => hw.power.validate(node)),
    raid,
    rescue: notImplemented,
    storage: { result: true },
    bios: notImplemented,
  };
}

/** @throws Invalid (unknown driver) */
export async function validateNode(ctx: OperationContext, node: NodeRecord): Promise<Record<string, Check>> {
  const hw = hardwareOf(ctx.drivers, node.driver);
  return underLock(ctx, node, {
    spec: VALIDATE,
    body: async (task) => validationReport(hw, task.node, await task.driverNode()),
  });
}
