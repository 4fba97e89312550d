import { hkdfSync } from "node:crypto";
import type { ConnectionOptions, PeerCertificate, TlsOptions } from "node:tls";

/**
 * TLS between the agents of one swarm wave, keyed by the wave's secret: TLS 1.3 with an external pre-shared
 * key (RFC 8446 2.2, psk_dhe_ke: an X25519 exchange on top, so a key learnt later opens no recorded
 * traffic), identity the wave's id, key derived from the token the conductor handed each member over its
 * pinned TLS link. No certificate is made, signed or trusted: knowing the key is being a member, and both
 * ends prove it in the handshake (the client's binder, the server's Finished). A host without the key can
 * neither read a chunk nor pose as a peer; its handshake fails before any HTTP is exchanged.
 */

/**
 * OpenSSL offers TLS 1.3 external PSKs only with SHA-256 suites. AES-128-GCM first (AES-NI and VAES here);
 * ChaCha20 for a machine without them. Measured on this machine's loopback, one connection, both ends in
 * one 2-core box: AES-128-GCM 922–931 MB/s, ChaCha20 995–1,016 MB/s, plain TCP 3.6–5.5 GB/s.
 */
export const PEER_TLS_CIPHERS = "TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256";

/** What a peer TLS handshake proves: the identity (the wave's id) and its 32-byte key. */
export interface PeerKey {
  identity: string;
  key: Buffer;
}

/**
 * The wave's peer TLS key: HKDF-SHA256 of the wave's token, salted with the wave's id, so the key is never
 * the bearer token itself (which also travels, inside TLS, in each request).
 */
export function peerKey(wave: string, token: string): PeerKey {
  const key = Buffer.from(hkdfSync("sha256", token, wave, "anvil swarm peer tls v1", 32));
  return { identity: wave, key };
}

/**
 * A peer server's TLS options: the key of the identity the client names, when `keyOf` knows it; any other
 * identity, or none, ends the handshake (the server has no certificate to fall back on).
 */
export function peerServerTls(keyOf: (identity: string) => Buffer | null): TlsOptions {
  return {
    minVersion: "TLSv1.3",
    ciphers: PEER_TLS_CIPHERS,
    pskCallback: (_socket, identity) => keyOf(identity),
    // a host that opens connections and never finishes a handshake holds them this long at most
    handshakeTimeout: 10_000,
  };
}

/**
 * A peer client's TLS options: offers the wave's key and accepts nothing else. Node asks
 * `checkServerIdentity` only of a server that authenticated with a certificate (a PSK handshake is a
 * resumed session to it, and has no certificate): such a server did not prove the key, so it is refused,
 * whichever CA its certificate chains to.
 */
export function peerClientTls(peer: PeerKey): ConnectionOptions {
  return {
    minVersion: "TLSv1.3",
    ciphers: PEER_TLS_CIPHERS,
    pskCallback: () => ({ psk: peer.key, identity: peer.identity }),
    rejectUnauthorized: true,
    checkServerIdentity: (_host: string, _cert: PeerCertificate) =>
      Object.assign(new Error("a swarm peer must prove the wave's key, not show a certificate"), {
        code: "ERR_ANVIL_PEER_CERTIFICATE",
      }),
  };
}
