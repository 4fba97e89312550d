/** A TCP address a conductor listener binds: "host:port", IPv6 hosts in brackets ("[::1]:9608"). */
export interface ListenAddress {
  host: string;
  port: number;
}

/** Whether an address is loopback only (what noauth and the unauthenticated side listeners are limited to). */
export function isLoopback(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, "").toLowerCase();
  return h === "localhost" || h === "::1" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h);
}

/** Parses "host:port" (port 0: the OS picks one); null when it is not one. Pure. */
export function parseListenAddress(text: string): ListenAddress | null {
  const match = /^(?:\[([0-9a-fA-F:.]+)\]|([A-Za-z0-9.-]+)):(\d{1,5})$/.exec(text.trim());
  if (match === null) return null;
  const port = Number(match[3]);
  if (port > 65535) return null;
  return { host: match[1] ?? match[2] ?? "", port };
}
