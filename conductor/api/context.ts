import type { FastifyRequest } from "fastify";
import type { Logger } from "../../shared/log.ts";
import type { Store } from "../db/store.ts";
import type { DriverRegistry } from "../drivers/hardware-type.ts";
import type { Provisioner } from "../operations/provisioner.ts";
import type { ConductorConfig } from "../config.ts";
import type { EventHub } from "../events/hub.ts";
import type { AllocationService } from "../allocations/service.ts";
import type { ConductorMetrics } from "../metrics/metrics.ts";
import type { PeerAuth } from "../auth/peer-identity.ts";
import type { ConductorAuth } from "../auth/strategy.ts";
import type { HistoryRecorder } from "../history/recorder.ts";
import type { Membership } from "../cluster/membership.ts";
import type { ConsoleService } from "../operations/console.ts";
import type { OperationSpec } from "../operations/operation.ts";
import { MIN_VERSION } from "./microversion.ts";
import type { ViewContext } from "./views.ts";

/** What every API plugin works with. */
export interface ApiDeps {
  store: Store;
  provisioner: Provisioner;
  allocations: AllocationService;
  membership: Membership;
  drivers: DriverRegistry;
  config: ConductorConfig;
  logger: Logger;
  events: EventHub;
  startedAt: Date;
  metrics: ConductorMetrics;
  /** Authentication; absent means noauth. */
  auth?: ConductorAuth;
  /** Node history; absent means none is kept. */
  history?: HistoryRecorder;
  /**
   * Serve HTTPS (and so WSS) with this key and certificate; `trust` is the CA other conductors of the
   * cluster present certificates from (they share it), so forwarded calls can check them.
   */
  tls?: { cert: string; key: string; trust?: string };
  /** The cluster secret's MACs on forwarded calls (absent: no secret configured). */
  peers?: PeerAuth;
  /** Serial consoles (absent: every node answers as `no-console`). */
  console?: ConsoleService;
}

declare module "fastify" {
  interface FastifyRequest {
    apiMinor: number;
  }
  interface FastifyContextConfig {
    /** The operation a route calls: the forwarding reads whether it runs on the node's owner. */
    operation?: OperationSpec;
  }
}

/** The base URL clients used to reach us, for links. */
export function baseUrl(request: FastifyRequest): string {
  const host = request.headers.host ?? "127.0.0.1";
  return `${request.protocol}://${host}`;
}

/**
 * Each app's `conductorOf`, made once: under tsx a closure made per request also gets its name set (a
 * defineProperty, ~5 µs of every POST /v1/nodes in the bench:api profile).
 */
const conductorOfs = new WeakMap<ApiDeps, ViewContext["conductorOf"]>();

export function viewContext(request: FastifyRequest, deps: ApiDeps): ViewContext {
  let conductorOf = conductorOfs.get(deps);
  if (conductorOf === undefined) {
    conductorOf = (node) => deps.membership.ownerOf(node)?.hostname ?? null;
    conductorOfs.set(deps, conductorOf);
  }
  return { minor: request.apiMinor ?? MIN_VERSION, baseUrl: baseUrl(request), conductorOf };
}
