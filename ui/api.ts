/** The dashboard's view of the Ironic API: JSON requests at the newest microversion, with the user's token. */

export interface Node {
  uuid: string;
  name: string | null;
  provision_state: string;
  target_provision_state: string | null;
  power_state: string | null;
  maintenance: boolean;
  fault: string | null;
  last_error: string | null;
  resource_class: string | null;
  owner: string | null;
  driver: string;
  traits: string[];
  properties: Record<string, unknown>;
  instance_info: Record<string, unknown>;
  /** Shown to roles that may see it (the last deploy's figures live here). */
  driver_internal_info?: Record<string, unknown>;
  reservation: string | null;
  provision_updated_at: string | null;
  updated_at: string | null;
}

/** An API refusal, carrying Ironic's faultstring so the user reads what the API said. */
export class ApiRefusal extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

const TOKEN_KEY = "anvil.token";
export const session = {
  get token(): string | null {
    return sessionStorage.getItem(TOKEN_KEY);
  },
  set token(value: string | null) {
    if (value === null) sessionStorage.removeItem(TOKEN_KEY);
    else sessionStorage.setItem(TOKEN_KEY, value);
  },
};

function headers(extra: Record<string, string> = {}): Record<string, string> {
  // X-Requested-With: the conductor then leaves out WWW-Authenticate, so the browser shows no password
  // prompt of its own on a 401 and the page's sign-in form does the asking
  const h: Record<string, string> = {
    "X-OpenStack-Ironic-API-Version": "latest",
    "X-Requested-With": "XMLHttpRequest",
    ...extra,
  };
  if (session.token) h.Authorization = `Bearer ${session.token}`;
  return h;
}

/** The faultstring inside Ironic's double-encoded envelope, else the text. */
export function faultOf(text: string): string {
  try {
    const envelope = JSON.parse(text) as { error_message?: string };
    if (typeof envelope.error_message === "string") {
      const inner = JSON.parse(envelope.error_message) as { faultstring?: string; description?: string };
      return inner.faultstring ?? inner.description ?? envelope.error_message;
    }
  } catch {
    // not an envelope
  }
  return text.slice(0, 500);
}

export async function call<T>(method: string, path: string, body?: unknown): Promise<T> {
  const response = await fetch(path, {
    method,
    headers: headers(body === undefined ? {} : { "Content-Type": "application/json" }),
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  if (!response.ok)
    throw new ApiRefusal(response.status, faultOf(text) || `${response.status} ${response.statusText}`);
  return (text ? JSON.parse(text) : null) as T;
}

/** One of a node's deploy logs, as GET /v1/nodes/{node}/logs lists it. */
export interface DeployLog {
  id: string;
  created_at: string;
  reason: string;
  size: number;
}

/** A text resource (a deploy log) read with the session's credentials. */
export async function callText(path: string): Promise<string> {
  const response = await fetch(path, { headers: headers({ Accept: "text/plain" }) });
  const text = await response.text();
  if (!response.ok)
    throw new ApiRefusal(response.status, faultOf(text) || `${response.status} ${response.statusText}`);
  return text;
}

/** Asks the conductor for a bearer token with the user's basic-auth credentials. */
export async function login(user: string, password: string): Promise<void> {
  const response = await fetch("/v1/auth/tokens", {
    method: "POST",
    headers: {
      Authorization: `Basic ${btoa(`${user}:${password}`)}`,
      "Content-Type": "application/json",
      "X-Requested-With": "XMLHttpRequest",
    },
    body: "{}",
  });
  const text = await response.text();
  if (!response.ok) throw new ApiRefusal(response.status, faultOf(text));
  const body = JSON.parse(text) as { token?: string; id?: string };
  session.token = body.token ?? body.id ?? null;
}

export interface StreamEvent {
  type: string;
  node: string;
  seq: number;
  [key: string]: unknown;
}

/**
 * Follows GET /v1/events (server-sent events) with fetch, so the token goes in a header; reconnects after
 * a drop. Returns a function that stops it.
 */
export function followEvents(
  onEvent: (event: StreamEvent) => void,
  onState: (live: boolean) => void,
): () => void {
  const stop = new AbortController();
  const run = async (): Promise<void> => {
    while (!stop.signal.aborted) {
      try {
        const response = await fetch("/v1/events", { headers: headers(), signal: stop.signal });
        if (!response.ok || !response.body) throw new Error(`events: ${response.status}`);
        onState(true);
        const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
        let buffer = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += value;
          let end: number;
          while ((end = buffer.indexOf("\n\n")) >= 0) {
            const block = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            const data = block
              .split("\n")
              .filter((l) => l.startsWith("data: "))
              .map((l) => l.slice(6))
              .join("\n");
            if (data) onEvent(JSON.parse(data) as StreamEvent);
          }
        }
      } catch {
        // dropped or refused: try again shortly
      }
      onState(false);
      if (!stop.signal.aborted) await new Promise((r) => setTimeout(r, 2000));
    }
  };
  void run();
  return () => stop.abort();
}
