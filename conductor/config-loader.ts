import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { parse as parseYaml } from "yaml";
import { z } from "zod";
import { ConductorConfig } from "./config.ts";

/**
 * The conductor's settings come from one schema (ConductorConfig) and four sources, later ones winning:
 * defaults < config file (YAML, snake_case keys) < environment (ANVIL_…) < command-line flags.
 * Flag and variable names are derived from the schema, so a new setting needs no wiring here.
 */

export type SettingKind = "string" | "number" | "boolean";

/** One leaf of the schema with the names it goes by in each source. */
export interface Setting {
  /** camelCase path in ConductorConfig, e.g. ["powerSync", "intervalS"] */
  path: readonly string[];
  kind: SettingKind;
  /** e.g. --power-sync-interval-s */
  flag: string;
  /** e.g. ANVIL_POWER_SYNC_INTERVAL_S */
  env: string;
  /** power_sync.interval_s, as written in the config file */
  key: string;
  description?: string;
  default?: unknown;
}

/** Older or Ironic-style names kept for the settings people already type. */
const FLAG_ALIASES: Record<string, string> = {
  db: "databasePath",
  "fast-track": "agent.fastTrack",
  "image-root": "images.localRoot",
  "image-download-min-rate": "images.downloadMinBytesPerSecond",
  "image-download-rate-window": "images.downloadRateWindowS",
  "allow-image-bootloader": "images.allowImageBootloader",
  boot: "boot.kind",
  "deploy-kernel": "boot.deployKernel",
  "deploy-ramdisk": "boot.deployRamdisk",
  "deploy-kernel-by-arch": "boot.deployKernelByArch",
  "deploy-ramdisk-by-arch": "boot.deployRamdiskByArch",
  "power-sync-interval": "powerSync.intervalS",
  "conductor-group": "cluster.group",
  "heartbeat-interval": "cluster.heartbeatIntervalS",
  "dead-after": "cluster.deadAfterS",
  // Ironic's option names
  "auth-strategy": "auth.auth_strategy",
  "http-basic-auth-user-file": "auth.http_basic_auth_user_file",
  "shred-random-overwrite-iterations": "erase.shredRandomOverwriteIterations",
  "continue-if-disk-secure-erase-fails": "erase.continueIfDiskSecureEraseFails",
  "sync-power-state-interval": "powerSync.intervalS",
  "sync-power-state-workers": "powerSync.concurrency",
  "sync-power-state-max-workers": "powerSync.maxConcurrency",
  "delete-configuration-priority": "raid.deleteConfigurationPriority",
  "create-configuration-priority": "raid.createConfigurationPriority",
};
const ENV_ALIASES: Record<string, string> = {
  ANVIL_DB: "databasePath",
  ANVIL_IMAGE_ROOT: "images.localRoot",
  ANVIL_DEPLOY_KERNEL: "boot.deployKernel",
  ANVIL_DEPLOY_RAMDISK: "boot.deployRamdisk",
  ANVIL_DEPLOY_KERNEL_BY_ARCH: "boot.deployKernelByArch",
  ANVIL_DEPLOY_RAMDISK_BY_ARCH: "boot.deployRamdiskByArch",
  ANVIL_POWER_SYNC_INTERVAL: "powerSync.intervalS",
  ANVIL_AUTH_STRATEGY: "auth.auth_strategy",
  ANVIL_HTTP_BASIC_AUTH_USER_FILE: "auth.http_basic_auth_user_file",
  ANVIL_AUTH_CACHE_TTL_S: "auth.credentialCacheTtlS",
};
/** Flags that are commands to main, not settings. */
const CONTROL_FLAGS = {
  config: { type: "string" },
  demo: { type: "boolean" },
  help: { type: "boolean", short: "h" },
} as const;

export class ConfigError extends Error {}

const snake = (name: string): string => name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
const kebab = (name: string): string => snake(name).replace(/_/g, "-");

interface JsonSchemaNode {
  type?: string | string[];
  enum?: unknown[];
  properties?: Record<string, JsonSchemaNode>;
  anyOf?: JsonSchemaNode[];
  description?: string;
  default?: unknown;
}

function kindOf(node: JsonSchemaNode): SettingKind | "object" | undefined {
  const type = Array.isArray(node.type) ? node.type.find((t) => t !== "null") : node.type;
  if (type === "object" || node.properties) return "object";
  if (type === "integer" || type === "number") return "number";
  if (type === "boolean") return "boolean";
  if (type === "string" || node.enum) return "string";
  const branch = node.anyOf?.find((b) => kindOf(b) !== undefined);
  return branch ? kindOf(branch) : undefined;
}

function objectBranch(node: JsonSchemaNode): JsonSchemaNode {
  return node.properties ? node : (node.anyOf?.find((b) => b.properties) ?? node);
}

/** Every leaf setting of the schema, with its flag, variable and file key. */
export function settingsOf(schema: z.ZodType = ConductorConfig): Setting[] {
  const root = z.toJSONSchema(schema, { io: "input", unrepresentable: "any" }) as JsonSchemaNode;
  const out: Setting[] = [];
  const walk = (node: JsonSchemaNode, path: string[]): void => {
    for (const [name, child] of Object.entries(objectBranch(node).properties ?? {})) {
      const kind = kindOf(child);
      const here = [...path, name];
      if (kind === "object") walk(child, here);
      else if (kind)
        out.push({
          path: here,
          kind,
          flag: `--${here.map(kebab).join("-")}`,
          env: `ANVIL_${here.map(snake).join("_").toUpperCase()}`,
          key: here.map(snake).join("."),
          description: child.description,
          default: child.default,
        });
    }
  };
  walk(root, []);
  return out;
}

type Tree = Record<string, unknown>;

function setPath(tree: Tree, path: readonly string[], value: unknown): void {
  let node = tree;
  for (const part of path.slice(0, -1)) {
    const next = node[part];
    if (typeof next !== "object" || next === null) node[part] = Object.create(null) as Tree;
    node = node[part] as Tree;
  }
  node[path[path.length - 1]!] = value;
}

function deepMerge(base: Tree, over: Tree): Tree {
  const out: Tree = { ...base };
  for (const [key, value] of Object.entries(over)) {
    const current = out[key];
    out[key] = isPlainObject(value) && isPlainObject(current) ? deepMerge(current, value) : value;
  }
  return out;
}

function isPlainObject(value: unknown): value is Tree {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function coerce(setting: Setting, raw: string, where: string): unknown {
  switch (setting.kind) {
    case "string":
      return raw;
    case "number": {
      const value = Number(raw);
      if (raw.trim() === "" || !Number.isFinite(value))
        throw new ConfigError(`${where}: expected a number, got "${raw}"`);
      return value;
    }
    case "boolean": {
      if (/^(1|true|yes|on)$/i.test(raw)) return true;
      if (/^(0|false|no|off)$/i.test(raw)) return false;
      throw new ConfigError(`${where}: expected true or false, got "${raw}"`);
    }
  }
}

/**
 * Reads a YAML config file: snake_case keys nested as in the schema. Unknown keys are an error naming the
 * key as written, so a typo never silently leaves a default in force.
 * @throws ConfigError
 */
export function readConfigFile(text: string, file: string, settings: Setting[] = settingsOf()): Tree {
  let data: unknown;
  try {
    data = parseYaml(text, { maxAliasCount: 100 });
  } catch (error) {
    throw new ConfigError(`${file}: not valid YAML: ${(error as Error).message}`);
  }
  if (data === null || data === undefined) return {};
  if (!isPlainObject(data)) throw new ConfigError(`${file}: expected a mapping of settings at the top level`);
  const byKey = new Map(settings.map((s) => [s.key, s]));
  const prefixes = new Set(
    settings.flatMap((s) =>
      s.key
        .split(".")
        .slice(0, -1)
        .map((_, i, a) => a.slice(0, i + 1).join(".")),
    ),
  );
  const out: Tree = {};
  const walk = (node: Tree, keys: string[]): void => {
    for (const [key, value] of Object.entries(node)) {
      const here = [...keys, key];
      const dotted = here.join(".");
      const setting = byKey.get(dotted);
      if (setting) {
        if (isPlainObject(value) || Array.isArray(value))
          throw new ConfigError(`${file}: ${dotted}: expected a ${setting.kind}`);
        setPath(out, setting.path, value);
      } else if (prefixes.has(dotted) && isPlainObject(value)) walk(value, here);
      else throw new ConfigError(`${file}: unknown setting "${dotted}"`);
    }
  };
  walk(data, []);
  return out;
}

export interface LoadedConfig {
  config: ConductorConfig;
  /** The config file in force, if any (for reloads). */
  file?: string;
  demo: boolean;
  help: boolean;
}

/** What the demo changes from the defaults (still overridable by every source). */
function demoDefaults(): Tree {
  // the demo narrates what happens; log lines would only repeat it (--log-level info brings them back)
  return { fakeDelayMs: 800, logLevel: "warn", agent: { fastTrack: true } };
}

/**
 * Builds the configuration from defaults, the file, the environment and the flags.
 * @throws ConfigError naming the offending flag, variable or key
 */
export function loadConfig(options: {
  argv: readonly string[];
  env: Readonly<Record<string, string | undefined>>;
  readFile?: (path: string) => string;
}): LoadedConfig {
  const settings = settingsOf();
  const readFile = options.readFile ?? ((path: string) => readFileSync(path, "utf8"));
  const flagOptions: Record<string, { type: "string" | "boolean"; short?: string }> = { ...CONTROL_FLAGS };
  for (const s of settings)
    flagOptions[s.flag.slice(2)] = { type: s.kind === "boolean" ? "boolean" : "string" };
  for (const [alias, path] of Object.entries(FLAG_ALIASES)) {
    const target = settings.find((s) => s.path.join(".") === path);
    if (target) flagOptions[alias] = { type: target.kind === "boolean" ? "boolean" : "string" };
  }
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: [...options.argv],
      options: flagOptions,
      strict: true,
      allowPositionals: false,
    }));
  } catch (error) {
    throw new ConfigError((error as Error).message);
  }
  const demo = values.demo === true;
  const help = values.help === true;
  const env = (name: string): string | undefined => {
    const value = options.env[name];
    return value === undefined || value === "" ? undefined : value;
  };

  const file = (values.config as string | undefined) ?? env("ANVIL_CONFIG");
  let fromFile: Tree = {};
  if (file !== undefined) {
    let text: string;
    try {
      text = readFile(file);
    } catch (error) {
      throw new ConfigError(
        `config file ${file}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`,
      );
    }
    fromFile = readConfigFile(text, file, settings);
  }

  const fromEnv: Tree = {};
  const fromFlags: Tree = {};
  const byPath = new Map(settings.map((s) => [s.path.join("."), s]));
  for (const s of settings) {
    const raw = env(s.env);
    if (raw !== undefined) setPath(fromEnv, s.path, coerce(s, raw, s.env));
  }
  for (const [name, path] of Object.entries(ENV_ALIASES)) {
    const s = byPath.get(path);
    const raw = env(name);
    if (s && raw !== undefined && env(s.env) === undefined) setPath(fromEnv, s.path, coerce(s, raw, name));
  }
  const flagValue = (s: Setting, name: string): void => {
    const raw = values[name];
    if (raw === undefined) return;
    setPath(fromFlags, s.path, typeof raw === "boolean" ? raw : coerce(s, raw, `--${name}`));
  };
  for (const [alias, path] of Object.entries(FLAG_ALIASES)) {
    const s = byPath.get(path);
    if (s) flagValue(s, alias);
  }
  for (const s of settings) flagValue(s, s.flag.slice(2));

  let merged = deepMerge(demo ? demoDefaults() : {}, fromFile);
  merged = deepMerge(merged, fromEnv);
  merged = deepMerge(merged, fromFlags);
  // The data directory decides where the database and images live unless they are named.
  const dataDir = (merged.dataDir as string | undefined) ?? (demo ? ".anvil/demo" : ".anvil");
  merged.dataDir = dataDir;
  merged.databasePath ??= `${dataDir}/anvil.sqlite`;
  if (demo) {
    const images = (merged.images ?? {}) as Tree;
    images.localRoot ??= `${dataDir}/images`;
    merged.images = images;
  }
  const parsed = ConductorConfig.safeParse(merged);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const setting = byPath.get(issue.path.join("."));
    const names = setting ? ` (${setting.flag}, ${setting.env}, ${setting.key} in the file)` : "";
    throw new ConfigError(`${issue.path.join(".")}${names}: ${issue.message}`);
  }
  return { config: parsed.data, file, demo, help };
}

/** Settings a running conductor takes from a reloaded file; the rest need a restart. */
export const RELOADABLE = [
  "logLevel",
  "timeouts",
  "powerSync.force",
  "powerSync.maxFailures",
  "powerSync.concurrency",
  "powerSync.maxConcurrency",
];

/**
 * Applies the reloadable part of a fresh configuration to the one in force (in place, so every module that
 * holds it sees the change) and names the changed settings that need a restart.
 */
export function applyReload(
  current: ConductorConfig,
  next: ConductorConfig,
): { applied: string[]; needRestart: string[] } {
  const applied: string[] = [];
  const needRestart: string[] = [];
  for (const s of settingsOf()) {
    const dotted = s.path.join(".");
    const get = (c: unknown): unknown =>
      s.path.reduce<unknown>((node, key) => (node as Tree | undefined)?.[key], c);
    const before = get(current);
    const after = get(next);
    if (JSON.stringify(before) === JSON.stringify(after)) continue;
    if (RELOADABLE.some((r) => dotted === r || dotted.startsWith(`${r}.`))) {
      setPath(current as unknown as Tree, s.path, after);
      applied.push(dotted);
    } else needRestart.push(dotted);
  }
  return { applied, needRestart };
}

/** The usage text, generated from the schema so it never drifts from the settings. */
export function usage(): string {
  const lines = [
    "anvil-conductor [--config FILE] [options]",
    "  --config FILE  YAML settings file (also ANVIL_CONFIG); flags > environment > file > defaults",
    "  --demo         enroll demo nodes and walk them from enroll to active",
  ];
  const aliases = Object.fromEntries(Object.entries(FLAG_ALIASES).map(([a, p]) => [p, a]));
  for (const s of settingsOf()) {
    const alias = aliases[s.path.join(".")];
    const def = s.default === undefined ? "" : ` (default ${JSON.stringify(s.default)})`;
    lines.push(`  ${s.flag}${alias ? `, --${alias}` : ""}  ${s.env}${def}`);
  }
  return lines.join("\n");
}
