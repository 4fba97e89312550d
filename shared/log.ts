import { pino } from "pino";
import { maskSecrets } from "./secrets.ts";

/** The logging surface modules depend on; pino satisfies it, tests may pass a recorder. */
export interface Logger {
  debug(obj: object | string, msg?: string): void;
  info(obj: object | string, msg?: string): void;
  warn(obj: object | string, msg?: string): void;
  error(obj: object | string, msg?: string): void;
  child(bindings: Record<string, unknown>): Logger;
}

/** Field paths whose values are never written to a log line. */
export const REDACTED_PATHS = [
  "password",
  "token",
  "*.password",
  "*.token",
  "*.ipmi_password",
  "driver_info.ipmi_password",
  "*.driver_info.ipmi_password",
  "req.headers.authorization",
  "req.headers['x-auth-token']",
];

export function createLogger(
  options: { level?: string; name?: string; destination?: NodeJS.WritableStream } = {},
): Logger {
  return pino(
    {
      level: options.level ?? "info",
      name: options.name,
      redact: { paths: REDACTED_PATHS, censor: "******" },
      // secrets nested anywhere in a logged object (driver_info.redfish.password) are masked too
      formatters: { log: (object) => maskSecrets(object) },
    },
    options.destination ?? process.stderr,
  );
}

/** A logger that drops everything (unit tests, quiet tools). */
export const silentLogger: Logger = {
  debug: () => undefined,
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
  child: () => silentLogger,
};
