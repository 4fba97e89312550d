import { stringOpt, takePositionals } from "../args.ts";
import type { Command } from "../command.ts";
import { UsageError } from "../errors.ts";
import { printJson, println } from "../output.ts";
import { makeLabCa } from "../../tls/lab-ca.ts";

const makeLab: Command = {
  words: ["tls", "make-lab-ca"],
  synopsis: "--dir DIR NAME...",
  summary: "Make a self-signed CA and a server certificate for NAME(s) (DNS names or IPs), for labs.",
  details: [
    "Writes ca.crt, ca.key, tls.crt and tls.key (keys 0600) into DIR and prints the CA's SHA-256, which the",
    "conductor passes to the ramdisk as anvil.ca_fingerprint. Then: anvil-conductor --tls-cert DIR/tls.crt",
    "--tls-key DIR/tls.key --tls-ca DIR/ca.crt. Example: anvil tls make-lab-ca --dir /etc/anvil/tls 192.0.2.1 conductor.lab",
  ],
  options: { dir: { type: "string" } },
  async run(ctx, { values, positionals }) {
    const dir = stringOpt(values, "dir");
    if (!dir) throw new UsageError("--dir DIR is required");
    if (positionals.length === 0) throw new UsageError("name at least one DNS name or IP address");
    const names = takePositionals(
      positionals,
      positionals.map(() => "NAME"),
    );
    const made = await makeLabCa({ dir, names });
    if (ctx.output.json) return printJson(ctx.output, made);
    println(ctx.output.stdout, `CA certificate   ${made.caCert}`);
    println(
      ctx.output.stdout,
      `CA key           ${made.caKey} (keep it off the conductor once certificates are made)`,
    );
    println(ctx.output.stdout, `server cert      ${made.cert}`);
    println(ctx.output.stdout, `server key       ${made.key}`);
    println(ctx.output.stdout, `CA sha256        ${made.caFingerprint}`);
  },
};

export const tlsCommands: readonly Command[] = [makeLab];
