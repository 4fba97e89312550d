import { pino } from "pino";
import PinoPretty from "pino-pretty";
import { maskSecrets } from "./secrets.ts";

/** The logging surface modules depend on; pino satisfies it, tests may pass a recorder. */
export interface Logger {
  debug(obj: object | string, msg?: string): void;
  info(obj: object | string, msg?: string): void;
  warn(obj: object | string, msg?: string): void;
  error(obj: object | string, msg?: string): void;
  child(bindings: Record<string, unknown>): Logger;
  /** Changes the level of a running logger (a config reload); absent on loggers that drop everything. */
  setLevel?(level: string): void;
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

/** How log lines look: JSON for machines, one readable line each for people, or chosen by the stream. */
export const LOG_FORMATS = ["auto", "json", "pretty"] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

/** `auto` is pretty on a terminal and JSON when piped (to a file, journald, a log shipper or a test). */
export function prettyWanted(format: LogFormat, destination: NodeJS.WritableStream): boolean {
  if (format !== "auto") return format === "pretty";
  return (destination as { isTTY?: boolean }).isTTY === true;
}

export function createLogger(
  options: {
    level?: string;
    name?: string;
    destination?: NodeJS.WritableStream;
    format?: LogFormat;
    /** Also receives every line as JSON, whatever the format (the agent keeps its recent lines). */
    tee?: { write(line: string): void };
  } = {},
): Logger {
  const destination = options.destination ?? process.stderr;
  const shown = prettyWanted(options.format ?? "auto", destination)
    ? PinoPretty({
        destination,
        sync: true,
        singleLine: true,
        colorize: (destination as { isTTY?: boolean }).isTTY === true,
        translateTime: "SYS:HH:MM:ss",
        ignore: "pid,hostname,name",
      })
    : destination;
  const logger = pino(
    {
      level: options.level ?? "info",
      name: options.name,
      redact: { paths: REDACTED_PATHS, censor: "******" },
      // secrets nested anywhere in a logged object (driver_info.redfish.password) are masked too
      formatters: { log: (object) => maskSecrets(object) },
    },
    options.tee
      ? pino.multistream([
          // each stream takes every level: the logger's own level is the one filter
          { level: "trace", stream: shown },
          { level: "trace", stream: options.tee },
        ])
      : shown,
  );
  return Object.assign(logger, {
    setLevel(level: string) {
      logger.level = level;
    },
  });
}

/** A logger that drops everything (unit tests, quiet tools). */
export const silentLogger: Logger = {
  debug: () => undefined,
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
  child: () => silentLogger,
};
