import { z } from "zod";
import { ApiFault, CliError } from "./errors.ts";
import { parseServerSentEvents, type ServerSentEvent } from "./sse.ts";

const Envelope = z.object({ error_message: z.string() });
const Fault = z.looseObject({
  faultstring: z.string().optional(),
  description: z.string().optional(),
  title: z.string().optional(),
});
/** The body of a refusal by the conductor's authentication (Ironic's basic-auth middleware shape). */
const AuthError = z.object({ error: z.object({ message: z.string() }) });
const Page = z.looseObject({ next: z.string().optional() });

/** The readable message of an error answer: Ironic's double-encoded faultstring when there is one. */
export function faultMessage(status: number, text: string): string {
  try {
    const json = JSON.parse(text) as unknown;
    const auth = AuthError.safeParse(json);
    if (auth.success) return auth.data.error.message;
    const envelope = Envelope.safeParse(json);
    if (envelope.success) {
      const fault = Fault.safeParse(JSON.parse(envelope.data.error_message));
      const message = fault.success
        ? (fault.data.faultstring ?? fault.data.description ?? fault.data.title)
        : undefined;
      return message ?? envelope.data.error_message;
    }
  } catch {
    // not JSON: fall through to the raw text
  }
  return text.trim() || `HTTP ${status}`;
}

export interface ClientOptions {
  /** The conductor's base URL, e.g. http://127.0.0.1:6385 */
  url: string;
  /** X-OpenStack-Ironic-API-Version; "latest" unless told. */
  apiVersion?: string;
  /** The Authorization header: "Bearer <token>" or "Basic <base64>" (see authorizationFromEnv). */
  authorization?: string;
}

/**
 * Credentials from the environment: $ANVIL_TOKEN (a bearer token from `anvil token issue`), else
 * $OS_USERNAME and $OS_PASSWORD (http_basic, the names the stock client reads), else none (noauth).
 */
export function authorizationFromEnv(env: Record<string, string | undefined>): string | undefined {
  if (env.ANVIL_TOKEN) return `Bearer ${env.ANVIL_TOKEN}`;
  if (env.OS_USERNAME && env.OS_PASSWORD !== undefined)
    return `Basic ${Buffer.from(`${env.OS_USERNAME}:${env.OS_PASSWORD}`).toString("base64")}`;
  return undefined;
}

/** The Ironic v1 API over fetch; every error answer becomes an ApiFault carrying its faultstring. */
export class AnvilClient {
  private readonly base: string;
  private readonly apiVersion: string;
  private readonly authorization: string | undefined;

  constructor(options: ClientOptions) {
    this.base = options.url.replace(/\/+$/, "");
    this.apiVersion = options.apiVersion ?? "latest";
    this.authorization = options.authorization;
  }

  private async send(
    method: string,
    path: string,
    init: { body?: unknown; signal?: AbortSignal } = {},
  ): Promise<Response> {
    const url = path.startsWith("http") ? path : `${this.base}${path}`;
    try {
      return await fetch(url, {
        method,
        headers: {
          Accept: "application/json",
          "X-OpenStack-Ironic-API-Version": this.apiVersion,
          ...(this.authorization === undefined ? {} : { Authorization: this.authorization }),
          ...(init.body === undefined ? {} : { "Content-Type": "application/json" }),
        },
        body: init.body === undefined ? undefined : JSON.stringify(init.body),
        signal: init.signal,
      });
    } catch (error) {
      if (init.signal?.aborted) throw error;
      const cause = (error as { cause?: { code?: string; message?: string } }).cause;
      throw new CliError(
        `Cannot reach the conductor at ${this.base}: ${cause?.code ?? cause?.message ?? String(error)}`,
      );
    }
  }

  /**
   * One request; resolves to the parsed JSON body (null for an empty answer).
   * @throws ApiFault for 4xx/5xx answers, CliError when the conductor cannot be reached
   */
  async request(method: string, path: string, body?: unknown): Promise<unknown> {
    const response = await this.send(method, path, { body });
    const text = await response.text();
    if (!response.ok) throw new ApiFault(response.status, faultMessage(response.status, text));
    if (!text) return null;
    try {
      return JSON.parse(text) as unknown;
    } catch {
      throw new CliError(`The conductor answered ${method} ${path} with something that is not JSON`);
    }
  }

  get(path: string): Promise<unknown> {
    return this.request("GET", path);
  }

  /** A text answer (a deploy log as text). @throws ApiFault, CliError as request does */
  async text(path: string): Promise<string> {
    const response = await this.send("GET", path);
    const text = await response.text();
    if (!response.ok) throw new ApiFault(response.status, faultMessage(response.status, text));
    return text;
  }

  /** Every item of a paginated collection (`key` is "nodes", "ports"...), following `next` links. */
  async listAll(path: string, key: string): Promise<Record<string, unknown>[]> {
    const items: Record<string, unknown>[] = [];
    let next: string | undefined = path;
    while (next) {
      const page = Page.parse(await this.get(next));
      const batch = z.array(z.record(z.string(), z.unknown())).parse(page[key] ?? []);
      items.push(...batch);
      next = batch.length ? page.next : undefined;
    }
    return items;
  }

  /**
   * Opens GET /v1/events (server-sent events) and resolves once the conductor accepted it, so no
   * event published after this point is missed.
   * @throws ApiFault when the conductor has no event stream
   */
  async openEvents(options: {
    node?: string;
    signal: AbortSignal;
  }): Promise<AsyncGenerator<ServerSentEvent>> {
    const query = options.node ? `?node=${encodeURIComponent(options.node)}` : "";
    const response = await this.send("GET", `/v1/events${query}`, { signal: options.signal });
    if (!response.ok || !response.body) {
      throw new ApiFault(response.status, faultMessage(response.status, await response.text()));
    }
    return parseServerSentEvents(response.body);
  }
}
