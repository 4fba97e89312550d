import { existsSync, readFileSync } from "node:fs";
import { gzipSync } from "node:zlib";
import { UsageError } from "./errors.ts";

const BASE64_TEXT = /^[A-Za-z0-9+/=\s]+$/;

/**
 * --configdrive as the provision request carries it: inline JSON or a JSON file -> the object
 * (the conductor builds the ISO); a file of base64 text -> that text; any other file (an ISO) ->
 * gzipped and base64-encoded, as Ironic expects; an http(s) URL -> itself.
 * @throws UsageError for a missing file or bad inline JSON
 */
export function configDriveValue(arg: string): string | Record<string, unknown> {
  const asObject = (text: string, what: string): Record<string, unknown> => {
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (error) {
      throw new UsageError(`--configdrive: ${what} is not valid JSON (${(error as Error).message})`);
    }
    if (typeof value !== "object" || value === null || Array.isArray(value))
      throw new UsageError(`--configdrive: ${what} must be a JSON object`);
    return value as Record<string, unknown>;
  };
  const trimmed = arg.trim();
  if (trimmed.startsWith("{")) return asObject(trimmed, "the argument");
  if (/^https?:\/\//.test(trimmed)) return trimmed;
  if (!existsSync(arg)) throw new UsageError(`--configdrive: no such file "${arg}"`);
  const bytes = readFileSync(arg);
  const text = bytes.toString("utf8");
  if (text.trimStart().startsWith("{")) return asObject(text, `the file ${arg}`);
  if (text.length > 0 && BASE64_TEXT.test(text)) return text.replace(/\s+/g, "");
  return gzipSync(bytes).toString("base64");
}
