import type { ErrorCode } from "../../shared/errors.ts";
import type { Hello } from "../../shared/protocol.ts";
import type { AgentDirectory } from "./directory.ts";
import type { KeyedMutex } from "./keyed-mutex.ts";
import { issueToken, tokenMatches } from "./token.ts";

export type HandshakeOutcome =
  | { ok: true; uuid: string; fastTrack: boolean; newToken?: string }
  | { ok: false; code: ErrorCode; message: string };

/**
 * Decides whether a hello may become a session. One token per node per boot: issued on the first hello
 * of a boot, required on every later one. The directory is written only when a token is issued.
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
  // Two first hellos of one boot racing must not both get a token: read-and-issue is one section per node.
  return tokenLocks.run(node.uuid, () => checkToken(directory, { hello, node }));
}

async function checkToken(
  directory: AgentDirectory,
  { hello, node }: { hello: Hello; node: { uuid: string; fastTrack: boolean } },
): Promise<HandshakeOutcome> {
  const record = await directory.tokenRecord(node.uuid);
  if (hello.token !== undefined) {
    if (record === null || record.bootId !== hello.boot_id || !tokenMatches(hello.token, record.digest)) {
      return { ok: false, code: "BAD_TOKEN", message: "the token is not valid for this node and boot" };
    }
    return { ok: true, uuid: node.uuid, fastTrack: node.fastTrack };
  }
  if (record !== null && record.bootId === hello.boot_id) {
    return { ok: false, code: "TOKEN_REQUIRED", message: "a token was already issued for this boot" };
  }
  const { token, digest } = issueToken();
  await directory.saveToken(node.uuid, { digest, bootId: hello.boot_id });
  return { ok: true, uuid: node.uuid, fastTrack: node.fastTrack, newToken: token };
}
