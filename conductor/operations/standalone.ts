import { silentLogger, type Logger } from "../../shared/log.ts";
import type { ConductorConfig } from "../config.ts";
import type { Store } from "../db/store.ts";
import type { DriverRegistry } from "../drivers/hardware-type.ts";
import { TaskManager } from "../tasks/lock.ts";
import type { TaskDeps } from "../tasks/task.ts";
import { hardwareOf, type OperationContext } from "./operation.ts";

/**
 * Operations over a store and drivers alone, holding locks as `holder` (benches and tools that run the power
 * sync without a conductor): no agents, no event stream, no image signing.
 */
export function standaloneOperations(options: {
  store: Store;
  drivers: DriverRegistry;
  holder: string;
  config: ConductorConfig;
  logger?: Logger;
}): OperationContext {
  const deps: TaskDeps = {
    store: options.store,
    holder: options.holder,
    logger: options.logger ?? silentLogger,
    config: options.config,
    agents: {
      isConnected: () => false,
      call: () => Promise.reject(new Error("no agents here")),
    },
    publicUrl: () => "http://127.0.0.1",
    publish: () => undefined,
    sign: () => {
      throw new Error("no image signing here");
    },
  };
  const tasks = new TaskManager(deps, (node) => hardwareOf(options.drivers, node.driver));
  return { tasks, deps, drivers: options.drivers };
}
