import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import secureJsonParse from "secure-json-parse";
import { Pool } from "undici";
import type { z } from "zod";
import { DriverError } from "../errors.ts";
import type { RedfishDriverInfo } from "./driver-info.ts";
import { errorMessageOf, messageIdsOf, ServiceRootSchema, TaskSchema, type ServiceRoot } from "./schemas.ts";
import { pinnedConnector } from "./tls.ts";
import { BodyTooLarge, readBounded } from "../../../shared/read-bounded.ts";

/** A Redfish call failed: the HTTP status (0 when there was no answer) and the BMC's own message. */
export class RedfishError extends DriverError {
  readonly status: number;
  readonly detail: string;

  constructor(
    message: string,
    options: { status: number; detail?: string; retryable?: boolean; invalidRequest?: boolean },
  ) {
    super(message, options.retryable ?? false, { invalidRequest: options.invalidRequest ?? false });
    this.name = "RedfishError";
    this.status = options.status;
    this.detail = options.detail ?? "";
  }
}

export interface RedfishClientOptions {
  /** Per request, headers and body each. Default 30 s. */
  timeoutMs?: number;
  /** A response body larger than this is refused (a BMC is outside input). Default 4 MiB. */
  maxBodyBytes?: number;
  /** Attempts on a transient answer (503, connection reset or refused). Default 4. */
  attempts?: number;
  /** First backoff; doubled after each attempt. Default 500 ms. */
  backoffMs?: number;
  /** Connections kept to one BMC (BMCs are small computers). Default 4. */
  connections?: number;
  /** Observes every request (metrics). */
  onCall?: (call: { method: string; status: number; seconds: number }) => void;
}

export interface RedfishResponse {
  status: number;
  location: string | undefined;
  body: unknown;
}

interface RequestInit {
  method: "GET" | "POST" | "PATCH" | "DELETE";
  path: string;
  body?: unknown;
  signal?: AbortSignal;
  /** Statuses that answer the call rather than fail it (e.g. 409 the caller retries itself). */
  accept?: readonly number[];
}

/**
 * The Base registry's messages for a request whose value or parameter the service refuses (DMTF DSP8011): a
 * 400 carrying one of them stems from what was asked, not from a failing BMC.
 */
export const REQUEST_MESSAGE_IDS: ReadonlySet<string> = new Set([
  "PropertyValueNotInList",
  "PropertyValueTypeError",
  "PropertyValueFormatError",
  "PropertyValueOutOfRange",
  "PropertyValueIncorrect",
  "PropertyUnknown",
  "PropertyNotWritable",
  "PropertyMissing",
  "ActionParameterValueNotInList",
  "ActionParameterValueTypeError",
  "ActionParameterValueFormatError",
  "ActionParameterNotSupported",
  "ActionParameterUnknown",
  "ActionParameterMissing",
  "ActionNotSupported",
  "MalformedJSON",
]);

/** Whether a BMC's error answer refuses the request's own content (a Base registry id above, any version). */
export function refusesRequest(status: number, body: unknown): boolean {
  if (status !== 400) return false;
  return messageIdsOf(body).some((id) => REQUEST_MESSAGE_IDS.has(id.split(".").pop() ?? ""));
}

// ERR_REDFISH_PIN_MISMATCH is not here: a wrong certificate is never retried
const TRANSIENT_CODES = new Set(["ECONNRESET", "ECONNREFUSED", "EPIPE", "UND_ERR_SOCKET", "UND_ERR_CLOSED"]);
const DEFAULT_SESSIONS = "/redfish/v1/SessionService/Sessions";

function errorCode(error: unknown): string {
  if (typeof error !== "object" || error === null) return "";
  const { code, cause } = error as { code?: unknown; cause?: unknown };
  if (typeof code === "string" && TRANSIENT_CODES.has(code)) return code;
  return cause === undefined ? (typeof code === "string" ? code : "") : errorCode(cause);
}

function headerOf(headers: Record<string, string | string[] | undefined>, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/**
 * One BMC's Redfish service: a pooled undici connection, a session (X-Auth-Token, logged in again on 401,
 * deleted on close) or basic authentication, bounded bodies, timeouts, and retries with backoff on the
 * transient answers DMTF documents (503, and a dropped or refused connection while the BMC restarts).
 */
export class RedfishClient {
  private readonly pool: Pool;
  private readonly timeoutMs: number;
  private readonly maxBodyBytes: number;
  private readonly attempts: number;
  private readonly backoffMs: number;
  private token: string | undefined;
  private sessionPath: string | undefined;
  private login: Promise<void> | undefined;
  private basic = false;
  private root: ServiceRoot | undefined;

  constructor(
    readonly info: RedfishDriverInfo,
    private readonly options: RedfishClientOptions = {},
  ) {
    this.timeoutMs = options.timeoutMs ?? 30_000;
    this.maxBodyBytes = options.maxBodyBytes ?? 4 * 1024 * 1024;
    this.attempts = options.attempts ?? 4;
    this.backoffMs = options.backoffMs ?? 500;
    const tls =
      info.verifyCa.kind === "off"
        ? { rejectUnauthorized: false }
        : info.verifyCa.kind === "file"
          ? { ca: readCa(info.verifyCa.path) }
          : {};
    this.pool = new Pool(info.origin, {
      connections: options.connections ?? 4,
      connect:
        info.verifyCa.kind === "pin"
          ? pinnedConnector(info.verifyCa.sha256, this.timeoutMs)
          : { ...tls, timeout: this.timeoutMs },
      headersTimeout: this.timeoutMs,
      bodyTimeout: this.timeoutMs,
      keepAliveTimeout: 30_000,
    });
    this.basic = info.authType === "basic";
  }

  /** The service root (no authentication needed), read once. @throws RedfishError */
  async serviceRoot(signal?: AbortSignal): Promise<ServiceRoot> {
    if (this.root) return this.root;
    const response = await this.send({ method: "GET", path: "/redfish/v1/", signal }, false);
    const parsed = ServiceRootSchema.safeParse(response.body);
    if (!parsed.success) throw this.malformed("/redfish/v1/");
    this.root = parsed.data;
    return this.root;
  }

  /** GET a resource and parse it with a schema. @throws RedfishError (also when the shape is wrong) */
  async get<T>(path: string, schema: z.ZodType<T>, signal?: AbortSignal): Promise<T> {
    const response = await this.request({ method: "GET", path, signal });
    const parsed = schema.safeParse(response.body);
    if (!parsed.success) throw this.malformed(path);
    return parsed.data;
  }

  /** An authenticated request; 401 logs in again once. @throws RedfishError */
  async request(init: RequestInit): Promise<RedfishResponse> {
    await this.authenticate(init.signal);
    const first = await this.send({ ...init, accept: [...(init.accept ?? []), 401] }, true);
    if (first.status !== 401) return first;
    if (this.basic) throw this.failure(init, first);
    this.token = undefined;
    await this.authenticate(init.signal);
    const second = await this.send({ ...init, accept: [...(init.accept ?? []), 401] }, true);
    if (second.status === 401) throw this.failure(init, second);
    return second;
  }

  /**
   * Follows a task monitor (the Location of a 202) until the task is done, polling every `intervalMs`.
   * @throws RedfishError when the task ends in Exception/Killed/Cancelled or is still running at the deadline
   */
  async waitForTask(
    location: string,
    options: { timeoutMs: number; intervalMs: number; signal?: AbortSignal },
  ): Promise<void> {
    const path = location.startsWith("/") ? location : new URL(location).pathname;
    const deadline = Date.now() + options.timeoutMs;
    for (;;) {
      const response = await this.request({ method: "GET", path, signal: options.signal });
      const task = TaskSchema.safeParse(response.body);
      const state = task.success ? task.data.TaskState : undefined;
      if (state === "Exception" || state === "Killed" || state === "Cancelled") {
        const words = task.success ? (task.data.Messages ?? []).map((m) => m.Message ?? "").join("; ") : "";
        throw new RedfishError(`Redfish task ${path} ended ${state}${words ? `: ${words}` : ""}`, {
          status: response.status,
          detail: words,
        });
      }
      const running =
        response.status === 202 ||
        state === "New" ||
        state === "Running" ||
        state === "Pending" ||
        state === "Starting" ||
        state === "Stopping";
      if (!running) return;
      if (Date.now() >= deadline)
        throw new RedfishError(
          `Redfish task ${path} still ${state ?? "running"} after ${options.timeoutMs} ms`,
          { status: response.status, retryable: true },
        );
      await sleep(options.intervalMs, undefined, { signal: options.signal });
    }
  }

  /** Ends the session (DELETE) and closes the connections; never throws. */
  async close(): Promise<void> {
    if (this.token && this.sessionPath) {
      await this.send({ method: "DELETE", path: this.sessionPath, accept: [401, 404, 405] }, true).catch(
        () => undefined,
      );
    }
    this.token = undefined;
    await this.pool.close().catch(() => undefined);
  }

  private async authenticate(signal: AbortSignal | undefined): Promise<void> {
    if (this.basic || this.token || this.info.username === "") return;
    this.login ??= this.createSession(signal).finally(() => {
      this.login = undefined;
    });
    await this.login;
  }

  private async createSession(signal: AbortSignal | undefined): Promise<void> {
    const root = await this.serviceRoot(signal);
    const path = root.Links?.Sessions?.["@odata.id"] ?? DEFAULT_SESSIONS;
    const response = await this.send(
      {
        method: "POST",
        path,
        body: { UserName: this.info.username, Password: this.info.password },
        signal,
        accept: [401, 403, 404, 405, 501],
      },
      false,
    );
    const token = response.headers["x-auth-token"];
    if ((response.status === 200 || response.status === 201) && token) {
      this.token = token;
      this.sessionPath = response.location
        ? new URL(response.location, this.info.origin).pathname
        : undefined;
      return;
    }
    if (response.status === 401 || response.status === 403)
      throw new RedfishError(
        `Redfish authentication failed at ${this.info.origin}: check redfish_username and redfish_password`,
        { status: response.status, detail: errorMessageOf(response.body) },
      );
    if (this.info.authType === "session")
      throw new RedfishError(
        `Redfish service at ${this.info.origin} refused to create a session (HTTP ${response.status})`,
        { status: response.status, detail: errorMessageOf(response.body) },
      );
    // auto: this service has no sessions; basic authentication on every request, as sushy falls back to
    this.basic = true;
  }

  private authHeaders(): Record<string, string> {
    if (this.info.username === "") return {};
    if (this.basic) {
      const pair = Buffer.from(`${this.info.username}:${this.info.password}`).toString("base64");
      return { authorization: `Basic ${pair}` };
    }
    return this.token ? { "x-auth-token": this.token } : {};
  }

  /** One request with retries on the transient answers. */
  private async send(
    init: RequestInit,
    authenticated: boolean,
  ): Promise<RedfishResponse & { headers: Record<string, string | undefined> }> {
    let delay = this.backoffMs;
    for (let attempt = 1; ; attempt++) {
      const started = performance.now();
      let status = 0;
      try {
        const answer = await this.once(init, authenticated);
        status = answer.status;
        if (answer.status === 503 && attempt < this.attempts) {
          // fall through to the backoff
        } else if (answer.status >= 400 && !(init.accept ?? []).includes(answer.status)) {
          throw this.failure(init, answer);
        } else {
          return answer;
        }
      } catch (error) {
        if (error instanceof RedfishError) throw error;
        const code = errorCode(error);
        if (init.signal?.aborted) throw error;
        if (!TRANSIENT_CODES.has(code) || attempt >= this.attempts) {
          const reason = error instanceof Error ? error.message : String(error);
          // a pin mismatch says which fingerprint it saw; other failures their code
          const what = code === "ERR_REDFISH_PIN_MISMATCH" ? reason : code || reason;
          throw new RedfishError(`Redfish connection to ${this.info.origin} failed: ${what}`, {
            status: 0,
            detail: reason,
            retryable: true,
          });
        }
      } finally {
        this.options.onCall?.({ method: init.method, status, seconds: (performance.now() - started) / 1000 });
      }
      await sleep(delay, undefined, { signal: init.signal });
      delay *= 2;
    }
  }

  private async once(
    init: RequestInit,
    authenticated: boolean,
  ): Promise<RedfishResponse & { headers: Record<string, string | undefined> }> {
    const headers: Record<string, string> = { accept: "application/json", "odata-version": "4.0" };
    if (authenticated) Object.assign(headers, this.authHeaders());
    let payload: string | undefined;
    if (init.body !== undefined) {
      payload = JSON.stringify(init.body);
      headers["content-type"] = "application/json";
    }
    const response = await this.pool.request({
      method: init.method,
      path: init.path,
      headers,
      body: payload,
      signal: init.signal,
    });
    let text: string;
    try {
      text = (await readBounded(response.body, this.maxBodyBytes)).toString("utf8");
    } catch (error) {
      if (!(error instanceof BodyTooLarge)) throw error;
      throw new RedfishError(`Redfish answer for ${init.path} is larger than ${this.maxBodyBytes} bytes`, {
        status: response.statusCode,
      });
    }
    let body: unknown = undefined;
    if (text.trim() !== "") {
      try {
        body = secureJsonParse.parse(text, undefined, { protoAction: "remove", constructorAction: "remove" });
      } catch {
        if (response.statusCode < 300) throw this.malformed(init.path);
      }
    }
    const location = headerOf(response.headers, "location");
    return {
      status: response.statusCode,
      location,
      body,
      headers: { "x-auth-token": headerOf(response.headers, "x-auth-token") },
    };
  }

  private failure(init: RequestInit, answer: RedfishResponse): RedfishError {
    const detail = errorMessageOf(answer.body);
    return new RedfishError(
      `Redfish ${init.method} ${init.path} at ${this.info.origin} failed with HTTP ${answer.status}${detail ? `: ${detail}` : ""}`,
      {
        status: answer.status,
        detail,
        retryable: answer.status === 503,
        invalidRequest: refusesRequest(answer.status, answer.body),
      },
    );
  }

  private malformed(path: string): RedfishError {
    return new RedfishError(`Redfish resource ${path} at ${this.info.origin} is not in the expected shape`, {
      status: 200,
    });
  }
}

function readCa(path: string): Buffer {
  try {
    return readFileSync(path);
  } catch {
    throw new RedfishError(`redfish_verify_ca ${path} cannot be read`, { status: 0 });
  }
}

/**
 * The conductor's Redfish clients, one per BMC and credentials: requests to one BMC share its pool and
 * its session. `close()` ends every session (conductor shutdown).
 */
export class RedfishConnections {
  private readonly clients = new Map<string, RedfishClient>();

  constructor(private readonly options: RedfishClientOptions = {}) {}

  client(info: RedfishDriverInfo): RedfishClient {
    // the password enters the key only as a digest: a changed password is a new client, never a logged secret
    const secret = createHash("sha256").update(info.password).digest("hex").slice(0, 16);
    const key = [info.origin, info.username, secret, JSON.stringify(info.verifyCa), info.authType].join("|");
    let client = this.clients.get(key);
    if (!client) {
      client = new RedfishClient(info, this.options);
      this.clients.set(key, client);
    }
    return client;
  }

  get size(): number {
    return this.clients.size;
  }

  async close(): Promise<void> {
    const all = [...this.clients.values()];
    this.clients.clear();
    await Promise.all(all.map((c) => c.close()));
  }
}
