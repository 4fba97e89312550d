import { randomBytes } from "node:crypto";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { LabCa } from "../../conductor/tls/lab-ca.ts";
import { exec } from "../../shared/system/exec.ts";
import { runOk } from "./run.ts";

/** A self-signed certificate for 127.0.0.1 (made by openssl in `dir`): the server's key and cert, in PEM. */
export async function selfSignedCert(dir: string): Promise<{ key: string; cert: string }> {
  const key = join(dir, "tls.key");
  const cert = join(dir, "tls.crt");
  const args = ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "1"];
  args.push("-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1");
  await runOk("openssl", args);
  return { key: await readFile(key, "utf8"), cert: await readFile(cert, "utf8") };
}

/** A server's key and the chain it presents (leaf first, then its issuers, then the lab CA), in PEM. */
export interface ServedChain {
  key: string;
  cert: string;
  /** The chain's files, for `openssl verify`: the leaf and the certificates between it and the CA. */
  leafFile: string;
  untrustedFile: string;
}

/**
 * Certificates an attacker on the provisioning network could hold or make, each presenting the lab CA's
 * (public) certificate at its chain's end so that only real chain verification can refuse it:
 * - `leafIssuer`: a server certificate for 127.0.0.1 signed by an ordinary certificate the lab CA issued
 *   without keyUsage or basicConstraints (a plain `openssl x509 -req` with only a subjectAltName);
 * - `v1Issuer`: the same through a version 1 certificate (no extensions at all) the lab CA issued;
 * - `clientOnly`: a certificate for 127.0.0.1 from the lab CA itself, but for TLS clients only (EKU clientAuth);
 * - `wrongHost`: a real server certificate from the lab CA, for another host (127.0.0.2, other.example);
 * - `genuine`: the conductor's own certificate, built the same way, as the control.
 */
export type ImpostorKind = "leafIssuer" | "v1Issuer" | "clientOnly" | "wrongHost" | "genuine";

const EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"];
const serverExt = (san: string): string =>
  `basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=${san}\n`;

/** Makes a key and a certificate for `subject` signed by `issuer` (extensions from `ext`, none when null). */
async function issue(
  dir: string,
  name: string,
  options: { issuer: { cert: string; key: string }; ext: string | null },
): Promise<{ cert: string; key: string }> {
  const { issuer, ext } = options;
  const key = join(dir, `${name}.key`);
  const csr = join(dir, `${name}.csr`);
  const cert = join(dir, `${name}.crt`);
  await runOk("openssl", ["req", ...EC, "-keyout", key, "-out", csr, "-subj", `/CN=${name}`]);
  const args = ["x509", "-req", "-in", csr, "-CA", issuer.cert, "-CAkey", issuer.key, "-out", cert];
  args.push("-days", "2", "-set_serial", `0x${randomBytes(8).toString("hex")}`);
  if (ext !== null) {
    await writeFile(join(dir, `${name}.ext`), ext);
    args.push("-extfile", join(dir, `${name}.ext`));
  }
  await runOk("openssl", args);
  return { cert, key };
}

async function chainOf(
  dir: string,
  name: string,
  parts: { files: string[]; key: string },
): Promise<ServedChain> {
  const { files, key } = parts;
  const pems = await Promise.all(files.map((file) => readFile(file, "utf8")));
  const untrustedFile = join(dir, `${name}.untrusted.pem`);
  await writeFile(untrustedFile, pems.slice(1).join(""));
  return { key: await readFile(key, "utf8"), cert: pems.join(""), leafFile: files[0]!, untrustedFile };
}

/** Every chain of {@link ImpostorKind}, made with openssl under `dir` from the lab CA's key. */
export async function makeImpostorChains(
  dir: string,
  lab: LabCa,
): Promise<Record<ImpostorKind, ServedChain>> {
  const ca = { cert: lab.caCert, key: lab.caKey };
  const here = serverExt("IP:127.0.0.1");
  const plainLeaf = await issue(dir, "plain-leaf", {
    issuer: ca,
    ext: "subjectAltName=DNS:printer.lab.example\n",
  });
  const leafIssuer = await issue(dir, "leaf-issued", { issuer: plainLeaf, ext: here });
  const v1 = await issue(dir, "v1-leaf", { issuer: ca, ext: null });
  const v1Issuer = await issue(dir, "v1-issued", { issuer: v1, ext: here });
  const clientOnly = await issue(dir, "client-only", {
    issuer: ca,
    ext: "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\nsubjectAltName=IP:127.0.0.1\n",
  });
  const wrongHost = await issue(dir, "wrong-host", {
    issuer: ca,
    ext: serverExt("IP:127.0.0.2,DNS:other.example"),
  });
  const genuine = await issue(dir, "genuine", { issuer: ca, ext: here });
  const served = (name: string, leaf: { cert: string; key: string }, issuers: string[]) =>
    chainOf(dir, name, { files: [leaf.cert, ...issuers, lab.caCert], key: leaf.key });
  return {
    leafIssuer: await served("leaf-issued", leafIssuer, [plainLeaf.cert]),
    v1Issuer: await served("v1-issued", v1Issuer, [v1.cert]),
    clientOnly: await served("client-only", clientOnly, []),
    wrongHost: await served("wrong-host", wrongHost, []),
    genuine: await served("genuine", genuine, []),
  };
}

/** What `openssl verify` (as a TLS client checking a server at 127.0.0.1) says of a chain: true if it accepts. */
export async function opensslAcceptsServer(lab: LabCa, chain: ServedChain): Promise<boolean> {
  const args = ["verify", "-CAfile", lab.caCert, "-purpose", "sslserver", "-verify_ip", "127.0.0.1"];
  const result = await exec("openssl", [...args, "-untrusted", chain.untrustedFile, chain.leafFile], {
    timeoutMs: 60_000,
  });
  return result.code === 0;
}
