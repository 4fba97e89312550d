import { parseArgs, type ParseArgsConfig } from "node:util";
import { UsageError } from "./errors.ts";

export type Options = NonNullable<ParseArgsConfig["options"]>;
export type Values = Record<string, string | boolean | (string | boolean)[] | undefined>;

/** parseArgs in strict mode, its complaints turned into usage errors (exit 2). */
export function parseCommandArgs(
  args: string[],
  options: Options,
): { values: Values; positionals: string[] } {
  try {
    const parsed = parseArgs({ args, options, strict: true, allowPositionals: true });
    return { values: parsed.values as Values, positionals: parsed.positionals };
  } catch (error) {
    throw new UsageError(error instanceof Error ? error.message : String(error));
  }
}

export function stringOpt(values: Values, name: string): string | undefined {
  const value = values[name];
  return typeof value === "string" ? value : undefined;
}

export function stringsOpt(values: Values, name: string): string[] {
  const value = values[name];
  if (value === undefined) return [];
  return (Array.isArray(value) ? value : [value]).filter((v): v is string => typeof v === "string");
}

export function flagOpt(values: Values, name: string): boolean {
  return values[name] === true;
}

/** --timeout S: seconds as a number; 0 (the default) waits forever. */
export function secondsOpt(values: Values, name: string): number {
  const text = stringOpt(values, name);
  if (text === undefined) return 0;
  const seconds = Number(text);
  if (!Number.isFinite(seconds) || seconds < 0)
    throw new UsageError(`--${name} wants seconds, not "${text}"`);
  return seconds;
}

export function integerOpt(values: Values, name: string): number | undefined {
  const text = stringOpt(values, name);
  if (text === undefined) return undefined;
  if (!/^\d+$/.test(text)) throw new UsageError(`--${name} wants a whole number, not "${text}"`);
  return Number(text);
}

/** ["a=1", "b=x=y"] -> {a: "1", b: "x=y"}; values stay strings, as the stock CLI sends them. */
export function keyValues(pairs: readonly string[], option: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const pair of pairs) {
    const eq = pair.indexOf("=");
    if (eq <= 0) throw new UsageError(`--${option} wants KEY=VALUE, not "${pair}"`);
    out[pair.slice(0, eq)] = pair.slice(eq + 1);
  }
  return out;
}

/** The positionals a command needs, or a usage error naming what is missing or extra. */
export function takePositionals(positionals: readonly string[], names: readonly string[]): string[] {
  if (positionals.length < names.length)
    throw new UsageError(`missing ${names.slice(positionals.length).join(" ")}`);
  if (positionals.length > names.length)
    throw new UsageError(`unexpected argument(s): ${positionals.slice(names.length).join(" ")}`);
  return [...positionals];
}

/**
 * ["ipmi_password=BMC_PW"] -> {ipmi_password: $BMC_PW}: secrets come from the environment, not argv.
 * @throws UsageError when a variable is unset
 */
export function keyValuesFromEnv(
  pairs: readonly string[],
  options: { option: string; env: Readonly<Record<string, string | undefined>> },
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, variable] of Object.entries(keyValues(pairs, options.option))) {
    const value = options.env[variable];
    if (value === undefined)
      throw new UsageError(`--${options.option} ${key}=${variable}: $${variable} is not set`);
    out[key] = value;
  }
  return out;
}
