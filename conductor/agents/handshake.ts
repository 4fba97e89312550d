import type { ErrorCode } from "../../shared/errors.ts";
import type { Hello } from "../../shared/protocol.ts";
import type { AgentDirectory, AgentNode } from "./directory.ts";
import type { KeyedMutex } from "./keyed-mutex.ts";
import { issueToken, tokenMatches } from "./token.ts";

export type HandshakeOutcome =
  | { ok: true; uuid: string; fastTrack: boolean; newToken?: string }
  | { ok: false; code: ErrorCode; message: string };

/**
 * Decides whether a hello may become a session, as Ironic's agent_token works: a node has at most one
 * token, issued to the first hello after the conductor cleared the previous one (it does so when it boots
 * the node into the ramdisk). While a token exists, only a hello carrying it is admitted, whatever boot id
 * it claims: a MAC and a boot id are not secrets, so neither ever earns a token or a session on its own.
 * The directory is written only when a token is issued.
 * @throws whatever the directory throws (the gateway answers with a retryable refusal).
 */
export async function authenticateHello(
  directory: AgentDirectory,
  hello: Hello,
  tokenLocks: KeyedMutex,
): Promise<HandshakeOutcome> {
  const node = await directory.lookupByMacs(hello.macs);
  if (node === null) {
    return {
      ok: false,
      code: "UNKNOWN_MAC",
      message: `no node expecting an agent has MAC ${hello.macs.join(", ")}`,
    };
  }
  // Two first hellos racing must not both get a token: read-and-issue is one section per node.
  return tokenLocks.run(node.uuid, () => checkToken(directory, { hello, node }));
}

async function checkToken(
  directory: AgentDirectory,
  { hello, node }: { hello: Hello; node: AgentNode },
): Promise<HandshakeOutcome> {
  const record = await directory.tokenRecord(node.uuid);
  if (record !== null) {
    if (hello.token === undefined) {
      return {
        ok: false,
        code: "TOKEN_REQUIRED",
        message: "a token was already issued for this node's boot of the ramdisk; hello must carry it",
      };
    }
    if (!tokenMatches(hello.token, record.digest)) {
      return { ok: false, code: "BAD_TOKEN", message: "the token is not valid for this node" };
    }
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
  const { token, digest } = issueToken();
  await directory.saveToken(node.uuid, { digest, bootId: hello.boot_id });
  return { ok: true, uuid: node.uuid, fastTrack: node.fastTrack, newToken: token };
}
