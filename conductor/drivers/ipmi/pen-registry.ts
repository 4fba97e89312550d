import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

// NOTE: ipmitool 1.8.19 loads IANA's whole private enterprise number registry (4.7 MB,
// /usr/share/misc/enterprise-numbers.txt) on every run, whatever the command: about 26 of its 35 ms of CPU
// per `chassis power status`. It looks for $HOME/.local/usr/share/misc/enterprise-numbers.txt first, so a HOME
// holding a one-entry registry skips that work. The names are only used to print manufacturers (`mc info`,
// `fru`); the chassis and boot commands the conductor runs never show them, and OEM quirks go by number.
const REGISTRY_PATH = [".local", "usr", "share", "misc", "enterprise-numbers.txt"];
// ipmitool refuses an empty registry ("Failed to initialize the OEM info dictionary"): keep IANA's entry 0.
const ONE_ENTRY = "0\n  Reserved\n    Internet Assigned Numbers Authority\n      iana&iana.org\n";

// One directory per process and parent, however many runners ask for it.
const homes = new Map<string, string>();

/**
 * A private directory (mode 0700, removed when the process exits) to use as ipmitool's HOME, holding a
 * one-entry enterprise number registry; made on the first call, the same path after. Returns its path.
 * @throws the file system's error when the temporary directory cannot be written
 */
export function ipmitoolHome(parent: string = tmpdir()): string {
  const known = homes.get(parent);
  if (known !== undefined) return known;
  const home = mkdtempSync(join(parent, "anvil-ipmitool-"));
  const dir = join(home, ...REGISTRY_PATH.slice(0, -1));
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(home, ...REGISTRY_PATH), ONE_ENTRY, { mode: 0o600 });
  process.once("exit", () => rmSync(home, { recursive: true, force: true }));
  homes.set(parent, home);
  return home;
}
