import { readFileSync } from "node:fs";
import { Agent, fetch as undiciFetch } from "undici";
import type { LabState } from "./state.ts";

/** How a host-side client reaches the lab's API: the CA to trust and the user to sign in as, if any. */
export interface LabAccess {
  /** PEM file of the lab CA (https). */
  caCert?: string;
  username?: string;
  password?: string;
}

/** The lab's access as its state describes it (reads the password file). */
export function labAccess(state: LabState): LabAccess {
  return {
    ...(state.tls ? { caCert: state.tls.caCert } : {}),
    ...(state.auth
      ? {
          username: state.auth.username,
          password: readFileSync(state.auth.passwordFile, "utf8").trim(),
        }
      : {}),
  };
}

/** fetch against the lab's API: trusts the lab CA and sends Basic credentials when the lab has them. */
export function labFetch(access: LabAccess = {}): typeof undiciFetch {
  const dispatcher =
    access.caCert === undefined
      ? undefined
      : new Agent({ connect: { ca: readFileSync(access.caCert, "utf8") } });
  const authorization =
    access.username === undefined
      ? undefined
      : `Basic ${Buffer.from(`${access.username}:${access.password ?? ""}`).toString("base64")}`;
  return (input, init = {}) => {
    // callers pass plain header records
    const headers: Record<string, string> = { ...(init.headers as Record<string, string> | undefined) };
    if (authorization !== undefined && !Object.keys(headers).some((k) => k.toLowerCase() === "authorization"))
      headers.authorization = authorization;
    return undiciFetch(input, { ...init, headers, ...(dispatcher ? { dispatcher } : {}) });
  };
}
