import { readFile } from "node:fs/promises";
import { join } from "node:path";
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
