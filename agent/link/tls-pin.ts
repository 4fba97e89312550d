import { X509Certificate } from "node:crypto";
import { isIP } from "node:net";
import type { createConnection } from "node:net";
import { checkServerIdentity, connect } from "node:tls";
import type { ConnectionOptions, PeerCertificate, TLSSocket } from "node:tls";
import { pinnedCertificateIn } from "../../shared/tls-pin.ts";

/** id-kp-serverAuth: what a conductor's certificate must allow when it lists extended key usages at all. */
export const SERVER_AUTH_OID = "1.3.6.1.5.5.7.3.1";

/** The conductor's certificate was refused; nothing but a ClientHello (and the handshake) was sent to it. */
export class CertificatePinMismatch extends Error {
  readonly code = "ANVIL_CERT_PIN_MISMATCH";
  constructor(pin: string, detail: string) {
    super(
      `the conductor's certificate chain does not match the pinned SHA-256 ${pin} (${detail}); refusing it`,
    );
    this.name = "CertificatePinMismatch";
  }
}

/**
 * The agent's `checkServerIdentity` for every wss:// dial: Node's own host name / IP check against the
 * subjectAltName, then, when the leaf lists extended key usages, serverAuth among them (OpenSSL's "ssl_server"
 * purpose already refuses a clientAuth-only leaf; this keeps the rule in our hands should that default change).
 * Runs only after OpenSSL verified the chain. Never throws.
 */
export function checkConductorIdentity(host: string, cert: PeerCertificate): Error | undefined {
  const unnamed = checkServerIdentity(host, cert);
  if (unnamed !== undefined) return unnamed;
  let usages: string[] | undefined;
  try {
    usages = new X509Certificate(cert.raw).keyUsage;
  } catch {
    return Object.assign(new Error("the conductor's certificate cannot be parsed"), {
      code: "ERR_ANVIL_CERT",
    });
  }
  if (usages !== undefined && !usages.includes(SERVER_AUTH_OID)) {
    return Object.assign(
      new Error("the conductor's certificate is not for TLS servers (no serverAuth usage)"),
      {
        code: "ERR_ANVIL_CERT_PURPOSE",
      },
    );
  }
  return undefined;
}

const serverName = (options: ConnectionOptions): string | undefined =>
  options.servername ?? (options.host && !isIP(options.host) ? options.host : undefined);

/**
 * How the agent trusts a wss:// conductor. Unpinned: the system's CAs. Pinned (anvil.ca_fingerprint): the
 * pinned certificate is the ONLY trust anchor, and OpenSSL does the whole chain verification (basic
 * constraints, key usage, purpose, validity, signatures) with Node's host check on top.
 *
 * The agent holds only the pin's SHA-256, not the certificate. It learns the certificate once from a
 * probe handshake: the conductor serves its chain with the CA in it, and a certificate whose SHA-256 is the
 * pin is the pinned one whoever sends it. The probe sends a ClientHello, reads the chain and closes; no
 * HTTP and no frame go over it. Every real dial then verifies against that anchor with `rejectUnauthorized`.
 * `allowPartialTrustChain` lets the pin be an intermediate CA or the conductor's own certificate.
 */
export class ConductorTrust {
  private anchor: string | undefined;

  constructor(
    readonly pin: string | undefined,
    private readonly timeoutMs = 10_000,
  ) {}

  /**
   * Learns the anchor when pinned and not yet known (a probe of `url`).
   * @throws CertificatePinMismatch when the conductor's chain holds no certificate with the pin; the
   * socket's error when it cannot be reached; the signal's reason when aborted
   */
  async prepare(url: string, signal: AbortSignal): Promise<void> {
    if (this.pin === undefined || this.anchor !== undefined) return;
    this.anchor = await this.probe(new URL(url), signal);
  }

  /**
   * A TLS dial for ws (after prepare): verified against the anchor (or the system's CAs when unpinned),
   * refused before the WebSocket upgrade is sent. `onRefused` hears why a certificate was refused.
   */
  connector(onRefused: (error: Error) => void): typeof createConnection {
    const dial = (options: ConnectionOptions): TLSSocket => {
      const socket = connect({
        ...options,
        servername: serverName(options),
        ...(this.pin === undefined
          ? {}
          : { ca: [this.anchor ?? "-"], allowPartialTrustChain: true as boolean }),
        rejectUnauthorized: true,
        checkServerIdentity: checkConductorIdentity,
      });
      socket.once("error", (error) => {
        // Node sets authorizationError just before it destroys a socket whose certificate it refused
        if (socket.authorizationError === undefined) return;
        const detail = `${String(socket.authorizationError)}: ${error.message}`;
        onRefused(
          this.pin === undefined
            ? new Error(`the conductor's certificate is refused (${detail})`)
            : new CertificatePinMismatch(this.pin, detail),
        );
      });
      return socket;
    };
    // ws calls it with TLS connection options, as it calls tls.connect
    return dial as unknown as typeof createConnection;
  }

  private probe(url: URL, signal: AbortSignal): Promise<string> {
    const pin = this.pin as string;
    return new Promise((resolve, reject) => {
      signal.throwIfAborted();
      const host = url.hostname.replace(/^\[(.*)\]$/, "$1");
      const socket = connect({
        host,
        port: Number(url.port || 443),
        servername: serverName({ host }),
        // NOTE: this handshake only reads the chain; nothing is trusted or sent on its strength
        rejectUnauthorized: false,
      });
      const done = (error: Error | undefined, pem?: string): void => {
        clearTimeout(timer);
        signal.removeEventListener("abort", onAbort);
        socket.destroy();
        if (error) reject(error);
        else resolve(pem as string);
      };
      const onAbort = (): void => done(signal.reason instanceof Error ? signal.reason : new Error("aborted"));
      const timer = setTimeout(
        () => done(new Error(`TLS handshake with ${url.host} took longer than ${this.timeoutMs} ms`)),
        this.timeoutMs,
      );
      signal.addEventListener("abort", onAbort, { once: true });
      socket.once("secureConnect", () => {
        const pinned = pinnedCertificateIn(socket.getPeerCertificate(true), pin);
        if (pinned === null)
          done(new CertificatePinMismatch(pin, "no certificate in the chain has that SHA-256"));
        else done(undefined, pinned);
      });
      socket.once("error", (error) => done(error));
    });
  }
}
