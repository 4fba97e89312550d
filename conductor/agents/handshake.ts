import type { ErrorCode } from "../../shared/errors.ts";
import type { Hello } from "../../shared/protocol.ts";
import type { AgentDirectory, AgentNode } from "./directory.ts";
import type { KeyedMutex } from "./keyed-mutex.ts";
import { issueToken, tokenMatches } from "./token.ts";

export type HandshakeOutcome =
  | { ok: true; uuid: string; fastTrack: boolean; newToken?: string }
  | {
      ok: false;
      code: ErrorCode;
      message: string;
      /**
       * A tokenless hello from another boot than the one holding the node's token: the node may have booted
       * again behind the conductor's back (a reboot mid-step). Not proof of anything; see the gateway.
       */
      otherBootOf?: string;
    }
  | { ok: "redirect"; uuid: string; owner: AgentOwner };

/** Where a node's agent belongs: the owning conductor's agent endpoint and name. */
export interface AgentOwner {
  url: string;
  conductor: string;
}

/**
 * The live conductor that owns the node when it is not this one; null to serve the agent here (this
 * conductor owns it, or no owner can be named).
 */
export type OwnerElsewhere = (node: AgentNode) => AgentOwner | null;

export interface HelloContext {
  tokenLocks: KeyedMutex;
  /** Absent: a single conductor serves every agent. */
  ownerElsewhere?: OwnerElsewhere;
}

/**
 * Decides whether a hello may become a session, as Ironic's agent_token works: a node has at most one
 * token, issued to the first hello after the conductor cleared the previous one (it does so when it boots
 * the node into the ramdisk). While a token exists, only a hello carrying it is admitted, whatever boot id
 * it claims: a MAC and a boot id are not secrets, so neither ever earns a token or a session on its own.
 * The directory is written only when a token is issued (or, with auto-discovery on, when a machine no node
 * has is enrolled: its first hello then gets the new node's token like any other).
 *
 * In a cluster, a hello that reaches a conductor which does not own the node is redirected to the owner
 * (unless a redirect already sent it here: one hop). The token is checked first when one exists, so a
 * redirect is never an oracle for a guessed token; none is issued here, so the owner issues it.
 * @throws whatever the directory throws (the gateway answers with a retryable refusal).
 */
export async function authenticateHello(
  directory: AgentDirectory,
  hello: Hello,
  context: HelloContext,
): Promise<HandshakeOutcome> {
  const node = (await directory.lookupByMacs(hello.macs)) ?? (await directory.discover?.(hello)) ?? null;
  if (node === null) {
    return {
      ok: false,
      code: "UNKNOWN_MAC",
      message: `no node expecting an agent has MAC ${hello.macs.join(", ")}`,
    };
  }
  // Two first hellos racing must not both get a token: read-and-issue is one section per node.
  const owner = hello.redirected === true ? null : (context.ownerElsewhere?.(node) ?? null);
  return context.tokenLocks.run(node.uuid, () => checkToken(directory, { hello, node, owner }));
}

async function checkToken(
  directory: AgentDirectory,
  { hello, node, owner }: { hello: Hello; node: AgentNode; owner: AgentOwner | null },
): Promise<HandshakeOutcome> {
  const record = await directory.tokenRecord(node.uuid);
  if (record !== null) {
    if (hello.token === undefined) {
      return {
        ok: false,
        code: "TOKEN_REQUIRED",
        message: "a token was already issued for this node's boot of the ramdisk; hello must carry it",
        ...(record.bootId === hello.boot_id ? {} : { otherBootOf: node.uuid }),
      };
    }
    if (!tokenMatches(hello.token, record.digest)) {
      return { ok: false, code: "BAD_TOKEN", message: "the token is not valid for this node" };
    }
    if (owner !== null) return { ok: "redirect", uuid: node.uuid, owner };
    return { ok: true, uuid: node.uuid, fastTrack: node.fastTrack };
  }
  if (hello.token !== undefined) {
    // The conductor cleared it (a new boot of the ramdisk): the agent drops it and dials without one.
    return { ok: false, code: "BAD_TOKEN", message: "no token is issued for this node; dial without one" };
  }
  if (node.retiredBootId === hello.boot_id) {
    // The boot whose token the conductor ended, still up until the power cycle lands: not for the next boot.
    return {
      ok: false,
      code: "TOKEN_REQUIRED",
      message: "this boot's token was withdrawn; the node is being booted again",
    };
  }
  if (owner !== null) return { ok: "redirect", uuid: node.uuid, owner };
  const { token, digest } = issueToken();
  await directory.saveToken(node.uuid, { digest, bootId: hello.boot_id });
  return { ok: true, uuid: node.uuid, fastTrack: node.fastTrack, newToken: token };
}
