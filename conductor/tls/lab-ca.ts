import { chmod, mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { isIP } from "node:net";
import { join } from "node:path";
import { exec } from "../../shared/system/exec.ts";
import { fingerprintOfPem } from "../../shared/tls-pin.ts";

export interface LabCa {
  caCert: string;
  caKey: string;
  cert: string;
  key: string;
  /** SHA-256 of the CA certificate: what the ramdisk pins (anvil.ca_fingerprint). */
  caFingerprint: string;
}

async function openssl(args: string[]): Promise<void> {
  const result = await exec("openssl", args, { timeoutMs: 60_000 });
  if (result.code !== 0) throw new Error(`openssl ${args[0] ?? ""} failed: ${result.stderr.trim()}`);
}

const EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"];

/**
 * A self-signed CA and a server certificate it signs, for labs (P-256 keys, files in `dir`, keys 0600).
 * `names` are the server's DNS names and IP addresses (subjectAltName).
 * @throws Error when openssl fails (not installed, bad name)
 */
export async function makeLabCa(options: {
  dir: string;
  names: readonly string[];
  days?: number;
}): Promise<LabCa> {
  const { dir } = options;
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const path = (name: string): string => join(dir, name);
  const out: LabCa = {
    caCert: path("ca.crt"),
    caKey: path("ca.key"),
    cert: path("tls.crt"),
    key: path("tls.key"),
    caFingerprint: "",
  };
  await openssl([
    "req",
    "-x509",
    ...EC,
    "-keyout",
    out.caKey,
    "-out",
    out.caCert,
    "-days",
    "3650",
    "-subj",
    "/CN=Anvil lab CA",
    "-addext",
    "basicConstraints=critical,CA:TRUE",
    "-addext",
    "keyUsage=critical,keyCertSign,cRLSign",
  ]);
  const csr = path("tls.csr");
  const ext = path("tls.ext");
  const san = options.names.map((n) => (isIP(n) ? `IP:${n}` : `DNS:${n}`)).join(",");
  await writeFile(
    ext,
    `basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=${san}\n`,
  );
  await openssl([
    "req",
    ...EC,
    "-keyout",
    out.key,
    "-out",
    csr,
    "-subj",
    `/CN=${options.names[0] ?? "anvil"}`,
  ]);
  await openssl([
    "x509",
    "-req",
    "-in",
    csr,
    "-CA",
    out.caCert,
    "-CAkey",
    out.caKey,
    "-CAcreateserial",
    "-out",
    out.cert,
    "-days",
    String(options.days ?? 825),
    "-extfile",
    ext,
  ]);
  await Promise.all([rm(csr), rm(ext), rm(path("ca.srl"), { force: true })]);
  await Promise.all([chmod(out.caKey, 0o600), chmod(out.key, 0o600)]);
  out.caFingerprint = fingerprintOfPem(await readFile(out.caCert, "utf8"));
  return out;
}
