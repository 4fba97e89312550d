import type { NodeRecord } from "../../shared/resources.ts";
import type { ConsoleSessions } from "../console/sessions.ts";
import { consolePath } from "../console/websocket.ts";
import { consoleOf } from "../drivers/hardware-type.ts";
import type { ConsoleInterface } from "../drivers/console/console.ts";
import { Invalid } from "../errors.ts";
import { defineOperation, hardwareOf, underLock, type OperationContext } from "./operation.ts";

/** How long a console URL opens the stream: enough to connect, not to keep as a credential. */
const CONSOLE_LINK_LIFETIME_S = 300;

/** PUT /v1/nodes/{id}/states/console (Ironic's set_console_mode). */
export const SET_CONSOLE = defineOperation({ purpose: "setting console mode", shared: false, onOwner: true });

/** GET /v1/nodes/{id}/states/console (Ironic's get_console_information): on the owner, where sessions run. */
export const GET_CONSOLE = defineOperation({
  purpose: "getting console information",
  shared: true,
  onOwner: true,
});

/** A console started again after a restart or a takeover (Ironic's _start_consoles): reads only. */
export const RESUME_CONSOLE = defineOperation({ purpose: "starting console", shared: true, onOwner: true });

/** What GET …/states/console answers (Ironic's shape). */
export interface ConsoleState {
  console_enabled: boolean;
  console_info: { type: string; url: string } | null;
}

/** Ironic's NodeConsoleNotEnabled (400). */
export class NodeConsoleNotEnabled extends Invalid {
  constructor(uuid: string) {
    super(`Console access is not enabled on node ${uuid}`);
  }
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** The node's console interface. @throws Invalid: Ironic's UnsupportedDriverExtension for `no-console` */
function consoleFor(ctx: OperationContext, node: NodeRecord): ConsoleInterface {
  const console = consoleOf(hardwareOf(ctx.drivers, node.driver), node);
  if (console === undefined)
    throw new Invalid(`Driver ${node.driver} does not support console (disabled or not implemented).`);
  return console;
}

/**
 * The serial console operations: enabling and disabling under the node's lock (the session itself runs in
 * this conductor's ConsoleSessions), the connection information with a freshly signed link, and the sessions'
 * reconciliation after a restart or a ring change.
 */
export class ConsoleService {
  constructor(
    private readonly ctx: OperationContext,
    readonly sessions: ConsoleSessions,
    /** Signs a path this conductor serves, valid for `lifetimeS` (images/signed-links.ts) */
    private readonly sign: (path: string, lifetimeS: number) => string,
  ) {}

  /**
   * Ironic's set_console_mode: driver and driver_info checked now (400), then 202 with the session started
   * or stopped in the background under the exclusive lock; console_enabled records the outcome, a failure
   * lands in last_error and leaves console_enabled as it was. Asking for the state the node is already in
   * does nothing (unless the session is missing here: it is started again).
   * @throws Invalid (no console, bad driver_info, unknown driver), NodeLocked (409)
   */
  async setMode(node: NodeRecord, enabled: boolean): Promise<void> {
    const console = consoleFor(this.ctx, node);
    await underLock(this.ctx, node, {
      spec: SET_CONSOLE,
      body: async (task, lock) => {
        const target = await task.driverNode();
        console.validate(target);
        const uuid = task.node.uuid;
        if (enabled === task.node.console_enabled && enabled === this.sessions.has(uuid)) {
          task.log.info({ enabled }, "no console action: the console is already in that mode");
          return;
        }
        await task.update({ last_error: null });
        lock.spawnAfter(async (t) => {
          try {
            if (enabled) await this.sessions.start(uuid, console, await t.driverNode());
            else await this.sessions.stop(uuid);
            await t.update({ console_enabled: enabled, last_error: null });
            this.ctx.deps.publish({ type: "updated", node: uuid, fields: ["console_enabled"] });
          } catch (error) {
            const op = enabled ? "enabling" : "disabling";
            const message = `Error ${op} the console on node ${uuid}. Reason: ${errorMessage(error)}`;
            t.log.error({ err: error }, message);
            await t.update({ last_error: message });
          }
        });
      },
    });
  }

  /**
   * Ironic's get_console_information: `console_enabled` false and no info unless the console is enabled;
   * otherwise the WebSocket URL on this conductor (the owner), `base` being how the caller reached us, with a
   * signature good for a few minutes. @throws Invalid (no console, bad driver_info)
   */
  async info(node: NodeRecord, base: string): Promise<ConsoleState> {
    return underLock(this.ctx, node, {
      spec: GET_CONSOLE,
      body: async (task) => {
        if (!task.node.console_enabled) return { console_enabled: false, console_info: null };
        consoleFor(this.ctx, task.node).validate(await task.driverNode());
        const ws = base.replace(/^http/, "ws");
        const url = `${ws}${this.sign(consolePath(task.node.uuid), CONSOLE_LINK_LIFETIME_S)}`;
        return { console_enabled: true, console_info: { type: "websocket", url } };
      },
    });
  }

  /** False when the node's driver is gone here or its console_interface is `no-console` (changed by PATCH). */
  private offersConsole(node: NodeRecord): boolean {
    const hw = this.ctx.drivers.get(node.driver);
    return hw !== undefined && consoleOf(hw, node) !== undefined;
  }

  /**
   * Brings the sessions here in line with the records: a session whose node is gone, disabled or now owned
   * by another conductor is stopped; with `scan`, every enabled console this conductor owns and does not run
   * yet is started (Ironic starts them at conductor start and takeover). Failures are logged and retried on
   * the next scan. Returns how many sessions were started and stopped.
   */
  async reconcile(options: {
    isMine(node: { uuid: string; conductor_group: string }): boolean;
    scan: boolean;
  }): Promise<{ started: number; stopped: number }> {
    const { store, logger } = this.ctx.deps;
    let stopped = 0;
    let started = 0;
    for (const uuid of this.sessions.nodes()) {
      const node = await store.getNode(uuid);
      if (node !== null && node.console_enabled && options.isMine(node) && this.offersConsole(node)) continue;
      await this.sessions.stop(uuid, "console moved, disabled or deleted");
      stopped++;
    }
    if (!options.scan) return { started, stopped };
    for (let marker: string | undefined; ;) {
      // NOTE: only enabled consoles, in the store's own order (id): the database reads each node once and sends
      // none but those. Sorted by uuid, every page sorted the whole table (77-92 ms a page at 24,800 nodes on
      // PostgreSQL, 0.8 ms by id), and each conductor scans at start and at every change of the live
      // conductors: seconds of database time, and every node's document parsed here, in all
      const page = await store.listNodes({ console_enabled: true }, { limit: 500, marker });
      for (const node of page) {
        if (!node.console_enabled || this.sessions.has(node.uuid) || !options.isMine(node)) continue;
        try {
          const console = consoleFor(this.ctx, node);
          await underLock(this.ctx, node, {
            spec: RESUME_CONSOLE,
            body: async (task) => this.sessions.start(node.uuid, console, await task.driverNode()),
          });
          started++;
        } catch (error) {
          logger.warn({ err: error, node: node.uuid }, "could not start the node's console");
        }
      }
      if (page.length < 500) break;
      marker = page[page.length - 1]!.uuid;
    }
    return { started, stopped };
  }
}
