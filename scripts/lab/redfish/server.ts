import { randomBytes, randomUUID, timingSafeEqual } from "node:crypto";
import {
  createServer as createHttpServer,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from "node:http";
import { createServer as createHttpsServer } from "node:https";
import type { AddressInfo } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { MemoryMachine, RESET_TYPES, type Machine, type MachineReset } from "./machine.ts";
import { TelnetSerialService } from "./serial.ts";

/**
 * A Redfish service for lab nodes: ServiceRoot, Systems (with Processors, Memory, Storage, SimpleStorage,
 * EthernetInterfaces, SecureBoot), Managers (with VirtualMedia), Chassis, SessionService and TaskService,
 * the Reset action, boot override PATCH and VirtualMedia insert/eject, in the shapes sushy-tools serves.
 * Each System drives a Machine: in memory for tests, QEMU through QMP in the lab.
 */

export interface SystemSpec {
  id: string;
  machine?: Machine;
  uuid?: string;
  manufacturer?: string;
  model?: string;
  cpus?: number;
  memoryMiB?: number;
  disks?: { id: string; bytes: number; model?: string; mediaType?: "SSD" | "HDD" }[];
  macs?: string[];
  /** Offer SecureBoot (default true) and BootSourceOverrideMode (default true). */
  secureBoot?: boolean;
  bootMode?: boolean;
  /**
   * The serial console the BMC serves for the system: "telnet" (default: a Telnet port relaying the machine's
   * serial port), "ipmi" (advertised as IPMI Serial-over-LAN only, as some BMCs do), "none" (no SerialConsole).
   */
  serialConsole?: "telnet" | "ipmi" | "none";
}

/** Sessions the lab BMC's serial console admits at once (per system). */
export const SERIAL_CONSOLE_SESSIONS = 2;

/** Deviations a test switches on to play a vendor's BMC (each one a quirk Anvil knows). */
export interface Misbehaviour {
  /** Answer 409 ActionParameterValueConflict to this many "On" resets (Dell iDRAC10 after a power off). */
  powerOnConflicts?: number;
  /** Refuse BootSourceOverrideEnabled: Continuous with 400 (vendors that dropped it). */
  refuseContinuous?: boolean;
  /** Answer this many boot PATCHes with 400 UnableToModifyDuringSystemPOST (HPE iLO in POST). */
  bootPatchesDuringPost?: number;
  /** A PATCH without BootSourceOverrideEnabled resets it to Once (Supermicro). */
  enabledRevertsUnlessSent?: boolean;
  /** Answer this many requests (after the service root) with 503. */
  unavailable?: number;
  /** No SessionService: session creation answers 405 (basic authentication only). */
  noSessions?: boolean;
  /** Answer Reset with 202 and a task monitor that finishes after this many polls. */
  resetTaskPolls?: number;
  /** Answer InsertMedia with 500 and this message (a BMC that cannot reach the image URL). */
  refuseInsertMedia?: string;
}

export interface RedfishBmcOptions {
  systems: SystemSpec[];
  username?: string;
  password?: string;
  host?: string;
  port?: number;
  tls?: { key: string | Buffer; cert: string | Buffer };
  /** Added to every answer (a BMC's latency). */
  latencyMs?: number;
  misbehave?: Misbehaviour;
  /** How far the BMC's clock is off the host's (Manager.DateTime), in ms. Default 0. */
  clockOffsetMs?: number;
}

/** The BMC's own state beside its systems: the chassis LED and the Manager's clock. */
export interface ManagerState {
  chassisLed: string;
  readonly chassisUuid: string;
  clockOffsetMs: number;
  localOffset: string;
}

/** A Redfish DateTime as BMCs write it: whole seconds, an explicit UTC offset. */
export function redfishDateTime(ms: number): string {
  return new Date(Math.floor(ms / 1000) * 1000).toISOString().replace(".000Z", "+00:00");
}

interface SystemState {
  spec: SystemSpec;
  machine: Machine;
  boot: { target: string; enabled: string; mode: string };
  led: string;
  /** Status.Health: "OK" until a test says otherwise (a failing fan, a dead DIMM). */
  health: string;
  secureBoot: boolean;
  media: { image: string | null; inserted: boolean; writeProtected: boolean };
  /** The system's Telnet serial console (its service and loopback port), when it serves one. */
  serial?: { service: TelnetSerialService; port: number };
}

export interface RedfishBmc {
  url: string;
  port: number;
  systems: Map<string, SystemState>;
  /** Requests seen, as "METHOD path" (tests read it). */
  requests: string[];
  sessions: Map<string, string>;
  misbehave: Misbehaviour;
  manager: ManagerState;
  stop(): Promise<void>;
}

const BOOT_TARGETS = ["None", "Pxe", "Hdd", "Cd", "BiosSetup", "Usb"];
const MAX_BODY = 64 * 1024;

function odata(id: string, type: string, body: Record<string, unknown>): Record<string, unknown> {
  return { "@odata.id": id, "@odata.type": type, ...body };
}
const ref = (id: string) => ({ "@odata.id": id });
const collection = (id: string, type: string, members: string[]) =>
  odata(id, type, {
    Name: id.split("/").pop(),
    "Members@odata.count": members.length,
    Members: members.map(ref),
  });

function error(status: number, messageId: string, message: string): [number, unknown] {
  return [
    status,
    {
      error: {
        code: `Base.1.8.${messageId}`,
        message,
        "@Message.ExtendedInfo": [{ MessageId: `Base.1.8.${messageId}`, Message: message }],
      },
    },
  ];
}

function same(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

async function readBody(request: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY) throw new Error("body too large");
    chunks.push(chunk);
  }
  const text = Buffer.concat(chunks).toString("utf8");
  return text.trim() === "" ? {} : (JSON.parse(text) as unknown);
}

function systemResource(base: string, s: SystemState, power: string): Record<string, unknown> {
  const { spec } = s;
  const boot: Record<string, unknown> = {
    BootSourceOverrideTarget: s.boot.target,
    BootSourceOverrideEnabled: s.boot.enabled,
    "BootSourceOverrideTarget@Redfish.AllowableValues": BOOT_TARGETS,
  };
  if (spec.bootMode !== false) {
    boot.BootSourceOverrideMode = s.boot.mode;
    boot["BootSourceOverrideMode@Redfish.AllowableValues"] = ["Legacy", "UEFI"];
  }
  const resource: Record<string, unknown> = {
    Id: spec.id,
    Name: spec.id,
    UUID: spec.uuid,
    Manufacturer: spec.manufacturer ?? "Anvil Lab",
    Model: spec.model ?? "QEMU Standard PC",
    SerialNumber: `SN-${spec.id}`,
    HostName: spec.id,
    BiosVersion: "1.16.3",
    SystemType: "Physical",
    PowerState: power,
    IndicatorLED: s.led,
    Status: { State: "Enabled", Health: s.health },
    Boot: boot,
    ProcessorSummary: { Count: 1, LogicalProcessorCount: spec.cpus ?? 2, Model: "QEMU Virtual CPU" },
    MemorySummary: { TotalSystemMemoryGiB: (spec.memoryMiB ?? 2048) / 1024 },
    Processors: ref(`${base}/Processors`),
    Memory: ref(`${base}/Memory`),
    Storage: ref(`${base}/Storage`),
    SimpleStorage: ref(`${base}/SimpleStorage`),
    EthernetInterfaces: ref(`${base}/EthernetInterfaces`),
    // ComputerSystem v1_13's own VirtualMedia: its one member is this system's CD on the shared manager, so
    // a client looking systems-first (as Ironic does) finds the right slot among several systems
    VirtualMedia: ref(`${base}/VirtualMedia`),
    Links: { Chassis: [ref("/redfish/v1/Chassis/1")], ManagedBy: [ref("/redfish/v1/Managers/BMC")] },
    Actions: {
      "#ComputerSystem.Reset": {
        target: `${base}/Actions/ComputerSystem.Reset`,
        "ResetType@Redfish.AllowableValues": RESET_TYPES,
      },
    },
  };
  if (spec.secureBoot !== false) resource.SecureBoot = ref(`${base}/SecureBoot`);
  const serial = serialConsoleOf(s);
  if (serial !== undefined) resource.SerialConsole = serial;
  return odata(base, "#ComputerSystem.v1_13_0.ComputerSystem", resource);
}

/** ComputerSystem v1_13's SerialConsole: one object per protocol, as DMTF's HostSerialConsole. */
function serialConsoleOf(s: SystemState): Record<string, unknown> | undefined {
  const kind = s.spec.serialConsole ?? "telnet";
  if (kind === "none") return undefined;
  return {
    MaxConcurrentSessions: SERIAL_CONSOLE_SESSIONS,
    Telnet: s.serial
      ? { ServiceEnabled: true, Port: s.serial.port, SharedWithManagerCLI: false }
      : { ServiceEnabled: false },
    SSH: { ServiceEnabled: false },
    IPMI: kind === "ipmi" ? { ServiceEnabled: true, Port: 623 } : { ServiceEnabled: false },
  };
}

/** The Manager's SerialConsole (what sushy reads): the connect types its systems' consoles offer. */
function managerSerialConsole(systems: Iterable<SystemState>): Record<string, unknown> {
  const types = new Set<string>();
  for (const s of systems) {
    if (s.serial) types.add("Telnet");
    if (s.spec.serialConsole === "ipmi") types.add("IPMI");
  }
  return {
    ServiceEnabled: types.size > 0,
    MaxConcurrentSessions: SERIAL_CONSOLE_SESSIONS,
    ConnectTypesSupported: [...types].sort(),
  };
}

/** Starts the service on loopback (an ephemeral port unless one is given). */
export async function startRedfishBmc(options: RedfishBmcOptions): Promise<RedfishBmc> {
  const misbehave: Misbehaviour = { ...options.misbehave };
  const systems = new Map<string, SystemState>();
  for (const spec of options.systems) {
    systems.set(spec.id, {
      spec: { uuid: randomUUID(), ...spec },
      machine: spec.machine ?? new MemoryMachine(),
      boot: { target: "None", enabled: "Disabled", mode: "UEFI" },
      led: "Off",
      health: "OK",
      secureBoot: false,
      media: { image: null, inserted: false, writeProtected: true },
    });
  }
  for (const s of systems.values()) {
    if ((s.spec.serialConsole ?? "telnet") !== "telnet") continue;
    const machine = s.machine;
    const service = new TelnetSerialService({
      endpoint: () => machine.serialPort?.(),
      maxSessions: SERIAL_CONSOLE_SESSIONS,
      host: options.host,
    });
    s.serial = { service, port: await service.start() };
  }
  const manager: ManagerState = {
    chassisLed: "Off",
    chassisUuid: randomUUID(),
    clockOffsetMs: options.clockOffsetMs ?? 0,
    localOffset: "+00:00",
  };
  const sessions = new Map<string, string>(); // token → session id
  const tasks = new Map<string, number>(); // task id → polls left
  const requests: string[] = [];
  const username = options.username ?? "admin";
  const password = options.password ?? "password";

  const authorised = (request: IncomingMessage): boolean => {
    const token = request.headers["x-auth-token"];
    if (typeof token === "string" && sessions.has(token)) return true;
    const header = request.headers.authorization ?? "";
    if (!header.startsWith("Basic ")) return false;
    const [user, ...rest] = Buffer.from(header.slice(6), "base64").toString("utf8").split(":");
    return same(user ?? "", username) && same(rest.join(":"), password);
  };

  const route = async (
    request: IncomingMessage,
    path: string,
    headers: Record<string, string>,
  ): Promise<[number, unknown]> => {
    const method = request.method ?? "GET";
    if (path === "/redfish") return [200, { v1: "/redfish/v1/" }];
    if (path === "/redfish/v1" && method === "GET")
      return [
        200,
        odata("/redfish/v1/", "#ServiceRoot.v1_5_0.ServiceRoot", {
          Id: "RedfishService",
          Name: "Anvil lab Redfish service",
          RedfishVersion: "1.8.0",
          UUID: "f2a1b7a4-0d39-4a2e-9d4f-2d1a0c6c9a11",
          Product: "Anvil lab BMC",
          Systems: ref("/redfish/v1/Systems"),
          Managers: ref("/redfish/v1/Managers"),
          Chassis: ref("/redfish/v1/Chassis"),
          SessionService: ref("/redfish/v1/SessionService"),
          TaskService: ref("/redfish/v1/TaskService"),
          Links: { Sessions: ref("/redfish/v1/SessionService/Sessions") },
        }),
      ];
    if (path === "/redfish/v1/SessionService/Sessions" && method === "POST") {
      if (misbehave.noSessions) return error(405, "OperationNotAllowed", "Sessions are not supported");
      const body = (await readBody(request)) as { UserName?: unknown; Password?: unknown };
      if (!same(String(body.UserName ?? ""), username) || !same(String(body.Password ?? ""), password))
        return error(401, "NoValidSession", "Invalid user name or password");
      const id = randomBytes(8).toString("hex");
      const token = randomBytes(24).toString("hex");
      sessions.set(token, id);
      headers["X-Auth-Token"] = token;
      headers.Location = `/redfish/v1/SessionService/Sessions/${id}`;
      return [201, odata(headers.Location, "#Session.v1_3_0.Session", { Id: id, UserName: username })];
    }
    if (!authorised(request)) return error(401, "NoValidSession", "Authentication required");
    if (misbehave.unavailable && misbehave.unavailable > 0) {
      misbehave.unavailable -= 1;
      return error(503, "ServiceTemporarilyUnavailable", "The service is temporarily unavailable");
    }
    const sessionMatch = /^\/redfish\/v1\/SessionService\/Sessions\/([^/]+)$/.exec(path);
    if (sessionMatch) {
      const entry = [...sessions].find(([, id]) => id === sessionMatch[1]);
      if (!entry) return error(404, "ResourceMissingAtURI", "No such session");
      if (method === "DELETE") {
        sessions.delete(entry[0]);
        return [204, undefined];
      }
      return [200, odata(path, "#Session.v1_3_0.Session", { Id: entry[1], UserName: username })];
    }
    if (path === "/redfish/v1/SessionService/Sessions")
      return [
        200,
        collection(
          path,
          "#SessionCollection.SessionCollection",
          [...sessions.values()].map((id) => `${path}/${id}`),
        ),
      ];
    if (path === "/redfish/v1/SessionService")
      return [
        200,
        odata(path, "#SessionService.v1_1_8.SessionService", {
          Id: "SessionService",
          ServiceEnabled: !misbehave.noSessions,
          SessionTimeout: 600,
          Sessions: ref("/redfish/v1/SessionService/Sessions"),
        }),
      ];
    const taskMatch = /^\/redfish\/v1\/TaskService\/Tasks\/([^/]+)$/.exec(path);
    if (taskMatch) {
      const left = tasks.get(taskMatch[1]!);
      if (left === undefined) return error(404, "ResourceMissingAtURI", "No such task");
      tasks.set(taskMatch[1]!, left - 1);
      const done = left <= 0;
      return [
        done ? 200 : 202,
        odata(path, "#Task.v1_4_3.Task", {
          Id: taskMatch[1],
          TaskState: done ? "Completed" : "Running",
          TaskStatus: "OK",
        }),
      ];
    }
    if (path === "/redfish/v1/Systems")
      return [
        200,
        collection(
          path,
          "#ComputerSystemCollection.ComputerSystemCollection",
          [...systems.keys()].map((id) => `${path}/${id}`),
        ),
      ];
    if (path === "/redfish/v1/Chassis")
      return [200, collection(path, "#ChassisCollection.ChassisCollection", ["/redfish/v1/Chassis/1"])];
    if (path === "/redfish/v1/Chassis/1" && method === "PATCH") {
      const body = (await readBody(request)) as { IndicatorLED?: unknown };
      if (!["Lit", "Off", "Blinking"].includes(String(body.IndicatorLED)))
        return error(
          400,
          "PropertyValueNotInList",
          `IndicatorLED ${String(body.IndicatorLED)} is not allowed`,
        );
      manager.chassisLed = String(body.IndicatorLED);
      return [204, undefined];
    }
    if (path === "/redfish/v1/Chassis/1")
      return [
        200,
        odata(path, "#Chassis.v1_10_0.Chassis", {
          Id: "1",
          Name: "Lab chassis",
          ChassisType: "RackMount",
          UUID: manager.chassisUuid,
          IndicatorLED: manager.chassisLed,
          Links: {
            ComputerSystems: [...systems.keys()].map((id) => ref(`/redfish/v1/Systems/${id}`)),
            ManagedBy: [ref("/redfish/v1/Managers/BMC")],
          },
        }),
      ];
    if (path === "/redfish/v1/Managers")
      return [200, collection(path, "#ManagerCollection.ManagerCollection", ["/redfish/v1/Managers/BMC"])];
    if (path === "/redfish/v1/Managers/BMC" && method === "PATCH") {
      const body = (await readBody(request)) as { DateTime?: unknown; DateTimeLocalOffset?: unknown };
      if (body.DateTime !== undefined) {
        const when = typeof body.DateTime === "string" ? Date.parse(body.DateTime) : NaN;
        if (Number.isNaN(when))
          return error(400, "PropertyValueFormatError", `DateTime ${String(body.DateTime)} is not a date`);
        manager.clockOffsetMs = when - Date.now();
      }
      if (body.DateTimeLocalOffset !== undefined) {
        if (typeof body.DateTimeLocalOffset !== "string" || !/^[+-]\d\d:\d\d$/.test(body.DateTimeLocalOffset))
          return error(400, "PropertyValueFormatError", "DateTimeLocalOffset must be +HH:MM or -HH:MM");
        manager.localOffset = body.DateTimeLocalOffset;
      }
      return [204, undefined];
    }
    if (path === "/redfish/v1/Managers/BMC")
      return [
        200,
        odata(path, "#Manager.v1_10_0.Manager", {
          Id: "BMC",
          Name: "Lab BMC",
          ManagerType: "BMC",
          FirmwareVersion: "anvil-lab",
          DateTime: redfishDateTime(Date.now() + manager.clockOffsetMs),
          DateTimeLocalOffset: manager.localOffset,
          VirtualMedia: ref(`${path}/VirtualMedia`),
          SerialConsole: managerSerialConsole(systems.values()),
          Links: { ManagerForServers: [...systems.keys()].map((id) => ref(`/redfish/v1/Systems/${id}`)) },
        }),
      ];
    // one virtual CD per system, named by its id, as sushy-tools names libvirt's per-domain devices
    if (path === "/redfish/v1/Managers/BMC/VirtualMedia")
      return [
        200,
        collection(
          path,
          "#VirtualMediaCollection.VirtualMediaCollection",
          [...systems.keys()].map((id) => `${path}/${id}`),
        ),
      ];
    const mediaMatch =
      /^\/redfish\/v1\/Managers\/BMC\/VirtualMedia\/([^/]+)(\/Actions\/VirtualMedia\.(InsertMedia|EjectMedia))?$/.exec(
        path,
      );
    if (mediaMatch) {
      const s = systems.get(mediaMatch[1]!);
      if (!s) return error(404, "ResourceMissingAtURI", `No virtual media ${mediaMatch[1]}`);
      const action = mediaMatch[3];
      if (action && method === "POST") {
        if (action === "InsertMedia") {
          const body = (await readBody(request)) as {
            Image?: unknown;
            Inserted?: unknown;
            WriteProtected?: unknown;
          };
          if (typeof body.Image !== "string" || body.Image === "")
            return error(400, "PropertyMissing", "The property Image is a required property");
          if (s.media.inserted) return error(409, "ResourceInUse", "Media is already inserted");
          if (misbehave.refuseInsertMedia !== undefined)
            return error(500, "InternalError", misbehave.refuseInsertMedia);
          s.media = {
            image: body.Image,
            inserted: body.Inserted !== false,
            writeProtected: body.WriteProtected !== false,
          };
        } else {
          s.media = { image: null, inserted: false, writeProtected: true };
        }
        try {
          await s.machine.setMedia?.(s.media.image);
        } catch (e) {
          // a BMC that could not fetch the image leaves the slot empty and says why
          s.media = { image: null, inserted: false, writeProtected: true };
          return error(500, "InternalError", `Virtual media: ${(e as Error).message}`);
        }
        return [204, undefined];
      }
      return [
        200,
        odata(path, "#VirtualMedia.v1_4_0.VirtualMedia", {
          Id: mediaMatch[1],
          Name: "Virtual CD",
          MediaTypes: ["CD", "DVD"],
          ConnectedVia: s.media.inserted ? "URI" : "NotConnected",
          Image: s.media.image,
          ImageName: s.media.image ? s.media.image.split("/").pop() : null,
          Inserted: s.media.inserted,
          WriteProtected: s.media.writeProtected,
          Actions: {
            "#VirtualMedia.InsertMedia": { target: `${path}/Actions/VirtualMedia.InsertMedia` },
            "#VirtualMedia.EjectMedia": { target: `${path}/Actions/VirtualMedia.EjectMedia` },
          },
        }),
      ];
    }
    const sysMatch = /^\/redfish\/v1\/Systems\/([^/]+)(\/.*)?$/.exec(path);
    if (!sysMatch) return error(404, "ResourceMissingAtURI", `The resource at ${path} was not found`);
    const s = systems.get(sysMatch[1]!);
    if (!s) return error(404, "ResourceMissingAtURI", `The resource at ${path} was not found`);
    const base = `/redfish/v1/Systems/${s.spec.id}`;
    return systemRoute({ s, base, sub: sysMatch[2] ?? "", method, request, misbehave, tasks, headers });
  };

  const handler = (request: IncomingMessage, response: ServerResponse) => {
    const path = (request.url ?? "/").split("?")[0]!.replace(/\/+$/, "") || "/";
    requests.push(`${request.method} ${path}`);
    const headers: Record<string, string> = {};
    void (async () => {
      let status: number;
      let body: unknown;
      try {
        [status, body] = await route(request, path, headers);
      } catch (e) {
        [status, body] = error(400, "MalformedJSON", e instanceof Error ? e.message : "bad request");
      }
      if (options.latencyMs) await sleep(options.latencyMs);
      const text = body === undefined ? "" : JSON.stringify(body);
      response.writeHead(status, {
        ...headers,
        ...(text ? { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(text) } : {}),
        "OData-Version": "4.0",
      });
      response.end(text);
    })();
  };
  const server: Server = options.tls ? createHttpsServer(options.tls, handler) : createHttpServer(handler);
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, options.host ?? "127.0.0.1", () => resolve());
  }).catch(async (error: unknown) => {
    for (const s of systems.values()) await s.serial?.service.stop();
    throw error;
  });
  const { port } = server.address() as AddressInfo;
  const host = options.host ?? "127.0.0.1";
  return {
    url: `${options.tls ? "https" : "http"}://${host}:${port}`,
    port,
    systems,
    requests,
    sessions,
    misbehave,
    manager,
    async stop() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      for (const s of systems.values()) await s.serial?.service.stop();
      for (const s of systems.values()) await s.machine.close?.();
    },
  };
}

async function systemRoute(ctx: {
  s: SystemState;
  base: string;
  sub: string;
  method: string;
  request: IncomingMessage;
  misbehave: Misbehaviour;
  tasks: Map<string, number>;
  headers: Record<string, string>;
}): Promise<[number, unknown]> {
  const { s, base, sub, method, request, misbehave } = ctx;
  const spec = s.spec;
  if (sub === "" && method === "GET") return [200, systemResource(base, s, await s.machine.power())];
  if (sub === "/VirtualMedia" && method === "GET")
    return [
      200,
      collection(`${base}/VirtualMedia`, "#VirtualMediaCollection.VirtualMediaCollection", [
        `/redfish/v1/Managers/BMC/VirtualMedia/${spec.id}`,
      ]),
    ];
  if (sub === "" && method === "PATCH") {
    const body = (await readBody(request)) as { Boot?: Record<string, unknown>; IndicatorLED?: unknown };
    if (body.IndicatorLED !== undefined) {
      if (!["Lit", "Off", "Blinking"].includes(String(body.IndicatorLED)))
        return error(
          400,
          "PropertyValueNotInList",
          `IndicatorLED ${String(body.IndicatorLED)} is not allowed`,
        );
      s.led = String(body.IndicatorLED);
    }
    const boot = body.Boot;
    if (boot) {
      if (misbehave.bootPatchesDuringPost && misbehave.bootPatchesDuringPost > 0) {
        misbehave.bootPatchesDuringPost -= 1;
        return error(
          400,
          "UnableToModifyDuringSystemPOST",
          "UnableToModifyDuringSystemPOST: the system is in POST",
        );
      }
      const target = boot.BootSourceOverrideTarget;
      const enabled = boot.BootSourceOverrideEnabled;
      const mode = boot.BootSourceOverrideMode;
      if (target !== undefined && !BOOT_TARGETS.includes(String(target)))
        return error(
          400,
          "PropertyValueNotInList",
          `BootSourceOverrideTarget ${String(target)} is not allowed`,
        );
      if (enabled !== undefined && !["Once", "Continuous", "Disabled"].includes(String(enabled)))
        return error(
          400,
          "PropertyValueNotInList",
          `BootSourceOverrideEnabled ${String(enabled)} is not allowed`,
        );
      if (enabled === "Continuous" && misbehave.refuseContinuous)
        return error(400, "PropertyValueNotInList", "BootSourceOverrideEnabled Continuous is not supported");
      if (mode !== undefined) {
        if (spec.bootMode === false)
          return error(400, "PropertyUnknown", "BootSourceOverrideMode is not supported");
        if (!["UEFI", "Legacy"].includes(String(mode)))
          return error(
            400,
            "PropertyValueNotInList",
            `BootSourceOverrideMode ${String(mode)} is not allowed`,
          );
        s.boot.mode = String(mode);
      }
      if (target !== undefined) s.boot.target = String(target);
      if (enabled !== undefined) s.boot.enabled = String(enabled);
      else if (misbehave.enabledRevertsUnlessSent && target !== undefined) s.boot.enabled = "Once";
      else if (target !== undefined && s.boot.enabled === "Disabled") s.boot.enabled = "Once";
    }
    return [204, undefined];
  }
  if (sub === "/Actions/ComputerSystem.Reset" && method === "POST") {
    const body = (await readBody(request)) as { ResetType?: unknown };
    const type = String(body.ResetType) as MachineReset;
    if (!RESET_TYPES.includes(type))
      return error(
        400,
        "ActionParameterNotSupported",
        `ResetType ${String(body.ResetType)} is not supported`,
      );
    if (
      (type === "On" || type === "ForceOn") &&
      misbehave.powerOnConflicts &&
      misbehave.powerOnConflicts > 0
    ) {
      misbehave.powerOnConflicts -= 1;
      return error(
        409,
        "ActionParameterValueConflict",
        "The value On for ResetType conflicts with the current state",
      );
    }
    const power = await s.machine.power();
    if (type === "On" && power === "On")
      return error(409, "ActionParameterValueConflict", "Host is powered on already");
    // the boot source the machine starts from: the override, once consumed when it is Once
    const starting =
      type === "On" || type === "ForceOn" || type === "ForceRestart" || type === "GracefulRestart";
    const source = s.boot.enabled === "Disabled" ? "None" : s.boot.target;
    await s.machine.reset(type, starting ? source : "None");
    if (starting && s.boot.enabled === "Once") s.boot = { ...s.boot, target: "None", enabled: "Disabled" };
    if (misbehave.resetTaskPolls !== undefined) {
      const id = randomBytes(4).toString("hex");
      ctx.tasks.set(id, misbehave.resetTaskPolls);
      ctx.headers.Location = `/redfish/v1/TaskService/Tasks/${id}`;
      return [202, odata(ctx.headers.Location, "#Task.v1_4_3.Task", { Id: id, TaskState: "Running" })];
    }
    return [204, undefined];
  }
  if (sub === "/SecureBoot" && spec.secureBoot !== false) {
    if (method === "PATCH") {
      const body = (await readBody(request)) as { SecureBootEnable?: unknown };
      if (typeof body.SecureBootEnable !== "boolean")
        return error(400, "PropertyValueTypeError", "SecureBootEnable must be a boolean");
      if (body.SecureBootEnable && s.boot.mode !== "UEFI")
        return error(409, "ActionParameterValueConflict", "Secure boot needs UEFI boot mode");
      s.secureBoot = body.SecureBootEnable;
      return [204, undefined];
    }
    return [
      200,
      odata(`${base}/SecureBoot`, "#SecureBoot.v1_1_0.SecureBoot", {
        Id: "SecureBoot",
        SecureBootEnable: s.secureBoot,
        SecureBootCurrentBoot: s.secureBoot ? "Enabled" : "Disabled",
        SecureBootMode: "DeployedMode",
      }),
    ];
  }
  return hardwareRoute(s, base, sub);
}

function hardwareRoute(s: SystemState, base: string, sub: string): [number, unknown] {
  const spec = s.spec;
  const disks = spec.disks ?? [{ id: "disk0", bytes: 20 * 1024 ** 3 }];
  const macs = spec.macs ?? [];
  switch (sub) {
    case "/Processors":
      return [
        200,
        collection(`${base}${sub}`, "#ProcessorCollection.ProcessorCollection", [`${base}${sub}/CPU0`]),
      ];
    case "/Processors/CPU0":
      return [
        200,
        odata(`${base}${sub}`, "#Processor.v1_9_0.Processor", {
          Id: "CPU0",
          ProcessorType: "CPU",
          ProcessorArchitecture: "x86",
          InstructionSet: "x86-64",
          Manufacturer: "QEMU",
          Model: "QEMU Virtual CPU",
          MaxSpeedMHz: 2400,
          TotalCores: spec.cpus ?? 2,
          TotalThreads: spec.cpus ?? 2,
        }),
      ];
    case "/Memory":
      return [
        200,
        collection(`${base}${sub}`, "#MemoryCollection.MemoryCollection", [`${base}${sub}/DIMM0`]),
      ];
    case "/Memory/DIMM0":
      return [
        200,
        odata(`${base}${sub}`, "#Memory.v1_10_0.Memory", {
          Id: "DIMM0",
          CapacityMiB: spec.memoryMiB ?? 2048,
          Status: { State: "Enabled" },
        }),
      ];
    case "/Storage":
      return [200, collection(`${base}${sub}`, "#StorageCollection.StorageCollection", [`${base}${sub}/1`])];
    case "/Storage/1":
      return [
        200,
        odata(`${base}${sub}`, "#Storage.v1_8_0.Storage", {
          Id: "1",
          Name: "Local storage",
          Drives: disks.map((d) => ref(`${base}/Storage/1/Drives/${d.id}`)),
        }),
      ];
    case "/SimpleStorage":
      return [
        200,
        collection(`${base}${sub}`, "#SimpleStorageCollection.SimpleStorageCollection", [`${base}${sub}/1`]),
      ];
    case "/SimpleStorage/1":
      return [
        200,
        odata(`${base}${sub}`, "#SimpleStorage.v1_2_0.SimpleStorage", {
          Id: "1",
          Devices: disks.map((d) => ({ Name: d.id, CapacityBytes: d.bytes, Status: { State: "Enabled" } })),
        }),
      ];
    case "/EthernetInterfaces":
      return [
        200,
        collection(
          `${base}${sub}`,
          "#EthernetInterfaceCollection.EthernetInterfaceCollection",
          macs.map((_, i) => `${base}${sub}/nic${i}`),
        ),
      ];
    default: {
      const drive = /^\/Storage\/1\/Drives\/([^/]+)$/.exec(sub);
      const d = drive ? disks.find((x) => x.id === drive[1]) : undefined;
      if (d)
        return [
          200,
          odata(`${base}${sub}`, "#Drive.v1_9_0.Drive", {
            Id: d.id,
            Name: d.id,
            Model: d.model ?? "QEMU HARDDISK",
            CapacityBytes: d.bytes,
            MediaType: d.mediaType ?? "SSD",
            Protocol: "SATA",
            SerialNumber: `QM-${d.id}`,
          }),
        ];
      const nic = /^\/EthernetInterfaces\/nic(\d+)$/.exec(sub);
      const mac = nic ? macs[Number(nic[1])] : undefined;
      if (mac)
        return [
          200,
          odata(`${base}${sub}`, "#EthernetInterface.v1_6_0.EthernetInterface", {
            Id: `nic${nic![1]}`,
            MACAddress: mac,
            PermanentMACAddress: mac,
            SpeedMbps: 1000,
            LinkStatus: "LinkUp",
            Status: { State: "Enabled" },
          }),
        ];
      return error(404, "ResourceMissingAtURI", `The resource at ${base}${sub} was not found`);
    }
  }
}
