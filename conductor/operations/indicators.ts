import type { NodeRecord } from "../../shared/resources.ts";
import type {
  IndicatorChange,
  IndicatorComponent,
  IndicatorMap,
  IndicatorState,
} from "../drivers/out-of-band.ts";
import { Invalid } from "../errors.ts";
import { defineOperation, hardwareOf, underLock, type OperationContext } from "./operation.ts";

/** GET …/management/indicators: the BMC's indicators, under a shared lock (Ironic's get_supported_indicators). */
export const LIST_INDICATORS = defineOperation({
  purpose: "getting supported indicators",
  shared: true,
  onOwner: true,
});

/** GET …/management/indicators/{name@component}, under a shared lock (Ironic's get_indicator_state). */
export const GET_INDICATOR_STATE = defineOperation({
  purpose: "getting indicators states",
  shared: true,
  onOwner: true,
});

/** PUT …/management/indicators/{name@component}, under the exclusive lock (Ironic's set_indicator_state). */
export const SET_INDICATOR_STATE = defineOperation({
  purpose: "setting indicator state",
  shared: false,
  onOwner: true,
});

/** Ironic's UnsupportedDriverExtension for a management interface without indicators (400). */
function indicatorsOf(ctx: OperationContext, node: NodeRecord) {
  const management = hardwareOf(ctx.drivers, node.driver).management;
  if (!management.getIndicators || !management.getIndicatorState || !management.setIndicatorState)
    throw new Invalid(`Driver ${node.driver} does not support management (disabled or not implemented).`);
}

/** @throws Invalid (unknown driver, no indicators), NodeLocked (409), DriverError */
export async function listIndicators(ctx: OperationContext, node: NodeRecord): Promise<IndicatorMap> {
  indicatorsOf(ctx, node);
  return underLock(ctx, node, {
    spec: LIST_INDICATORS,
    body: async (task) => {
      const target = await task.driverNode();
      task.hw.management.validate(target);
      return (await task.hw.management.getIndicators?.(target, { signal: task.signal })) ?? {};
    },
  });
}

/** @throws Invalid (unknown driver or indicator), NodeLocked (409), DriverError */
export async function getIndicatorState(
  ctx: OperationContext,
  node: NodeRecord,
  indicator: { component: IndicatorComponent; name: string },
): Promise<IndicatorState> {
  indicatorsOf(ctx, node);
  return underLock(ctx, node, {
    spec: GET_INDICATOR_STATE,
    body: async (task) => {
      const target = await task.driverNode();
      task.hw.management.validate(target);
      const state = await task.hw.management.getIndicatorState?.(target, indicator, { signal: task.signal });
      return state ?? "unknown";
    },
  });
}

/** @throws Invalid (unknown driver, indicator or state), NodeLocked (409), DriverError */
export async function setIndicatorState(
  ctx: OperationContext,
  node: NodeRecord,
  change: IndicatorChange,
): Promise<void> {
  indicatorsOf(ctx, node);
  await underLock(ctx, node, {
    spec: SET_INDICATOR_STATE,
    body: async (task) => {
      const target = await task.driverNode();
      task.hw.management.validate(target);
      await task.hw.management.setIndicatorState?.(target, change, { signal: task.signal });
    },
  });
}
