import type { NodeRecord } from "../../shared/resources.ts";
import type { BootDevice } from "../../shared/states.ts";
import { Invalid } from "../errors.ts";
import { defineOperation, hardwareOf, underLock, type OperationContext } from "./operation.ts";

/** GET .../management/boot_device: asks the BMC, under a shared lock (Ironic's get_boot_device). */
export const GET_BOOT_DEVICE = defineOperation({ purpose: "get boot device", shared: true, onOwner: true });

/** GET .../management/boot_device/supported: the management interface's list (no BMC call). */
export const SUPPORTED_BOOT_DEVICES = defineOperation({
  purpose: "supported boot devices",
  shared: true,
  onOwner: true,
});

/** PUT .../management/boot_device: sets it on the BMC under the exclusive lock (Ironic's set_boot_device). */
export const SET_BOOT_DEVICE = defineOperation({ purpose: "set boot device", shared: false, onOwner: true });

/** @throws Invalid (unknown driver), DriverError */
export async function getBootDevice(
  ctx: OperationContext,
  node: NodeRecord,
): Promise<{ boot_device: BootDevice | null; persistent: boolean | null }> {
  hardwareOf(ctx.drivers, node.driver);
  return underLock(ctx, node, {
    spec: GET_BOOT_DEVICE,
    body: async (task) => task.hw.management.getBootDevice(await task.driverNode(), { signal: task.signal }),
  });
}

/** @throws Invalid (unknown driver) */
export function supportedBootDevices(ctx: OperationContext, node: NodeRecord): readonly BootDevice[] {
  return hardwareOf(ctx.drivers, node.driver).management.supportedBootDevices();
}

/** @throws Invalid (unknown driver, unsupported device), NodeLocked (409), DriverError */
export async function setBootDevice(
  ctx: OperationContext,
  node: NodeRecord,
  request: { device: BootDevice; persistent: boolean },
): Promise<void> {
  hardwareOf(ctx.drivers, node.driver);
  await underLock(ctx, node, {
    spec: SET_BOOT_DEVICE,
    body: async (task) => {
      if (!task.hw.management.supportedBootDevices().includes(request.device)) {
        throw new Invalid(`Boot device ${request.device} is not supported by node ${node.uuid}`);
      }
      await task.hw.management.setBootDevice(await task.driverNode(), request, { signal: task.signal });
    },
  });
}

/** PUT .../management/inject_nmi: through the management interface under the exclusive lock (1.29). */
export const INJECT_NMI = defineOperation({ purpose: "inject nmi", shared: false, onOwner: true });

/** @throws Invalid (unknown driver), NodeLocked (409), DriverError */
export async function injectNmi(ctx: OperationContext, node: NodeRecord): Promise<void> {
  hardwareOf(ctx.drivers, node.driver);
  await underLock(ctx, node, {
    spec: INJECT_NMI,
    body: async (task) => task.hw.management.injectNmi(await task.driverNode(), { signal: task.signal }),
  });
}
