import { Writable } from "node:stream";
import { createLogger } from "../../shared/log.ts";
import type { Logger } from "../../shared/log.ts";

/** A real (pino, redacting) logger whose JSON lines land in `lines`. */
export function recordingLogger(lines: string[], level = "debug"): Logger {
  return createLogger({
    level,
    destination: new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(chunk.toString());
        done();
      },
    }),
  });
}
