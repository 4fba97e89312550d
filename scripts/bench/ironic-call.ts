import { type Agent, request } from "node:http";

/** What a bench request answered: its status and, when asked for, its body as text. */
export interface BenchAnswer {
  status: number;
  text: string;
}

/**
 * One request to the conductor's Ironic API over a bench's keep-alive agent, with a JSON body when given. The
 * body is read either way (so the socket is reused); `keepBody: false` drops it as it comes and answers `""`,
 * for figures that should not include the client's own copying.
 */
export function ironicCall(
  url: string,
  method: string,
  options: {
    agent: Agent;
    version: string;
    headers?: Record<string, string>;
    body?: unknown;
    keepBody?: boolean;
  },
): Promise<BenchAnswer> {
  const payload = options.body === undefined ? undefined : JSON.stringify(options.body);
  const keep = options.keepBody ?? true;
  return new Promise((resolve, reject) => {
    const req = request(url, {
      method,
      agent: options.agent,
      headers: {
        "Content-Type": "application/json",
        "X-OpenStack-Ironic-API-Version": options.version,
        ...options.headers,
        ...(payload ? { "Content-Length": Buffer.byteLength(payload) } : {}),
      },
    });
    req.on("response", (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (chunk: Buffer) => {
        if (keep) chunks.push(chunk);
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString() }));
    });
    req.on("error", reject);
    req.end(payload);
  });
}
