import { isIP } from "node:net";
import type { createConnection } from "node:net";
import { checkServerIdentity, connect, type ConnectionOptions, type TLSSocket } from "node:tls";
import { chainMatchesPin } from "../../shared/tls-pin.ts";

export class CertificatePinMismatch extends Error {
  readonly code = "ANVIL_CERT_PIN_MISMATCH";
  constructor(pin: string) {
    super(`the conductor's certificate chain does not match the pinned SHA-256 ${pin}; refusing it`);
    this.name = "CertificatePinMismatch";
  }
}

/**
 * A TLS dial for ws that trusts exactly one certificate: the chain the conductor presents must contain the
 * pinned fingerprint (its CA's or its own). The chain is not checked against system CAs (a lab CA is in none)
 * and the socket is destroyed at the end of the handshake, before the WebSocket upgrade or any frame is sent.
 */
export function pinnedTlsConnect(pin: string): typeof createConnection {
  const dial = (options: ConnectionOptions): TLSSocket => {
    const servername = options.servername ?? (options.host && !isIP(options.host) ? options.host : undefined);
    const socket: TLSSocket = connect({ ...options, servername, rejectUnauthorized: false });
    socket.once("secureConnect", () => {
      const peer = socket.getPeerCertificate(true);
      // a CA may sign other lab hosts too: the certificate must also name the host the agent dialled
      const named = checkServerIdentity(options.host ?? "", peer) === undefined;
      if (!named || !chainMatchesPin(peer, pin)) socket.destroy(new CertificatePinMismatch(pin));
    });
    return socket;
  };
  // ws calls it with TLS connection options, as it calls tls.connect
  return dial as unknown as typeof createConnection;
}
