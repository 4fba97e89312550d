import type { AnvilClient } from "./client.ts";

export interface Sink {
  write(text: string): unknown;
  isTTY?: boolean;
}

/** Where a command prints: results on stdout; live state lines on stdout, or stderr under --json. */
export interface Output {
  stdout: Sink;
  stderr: Sink;
  json: boolean;
}

export function println(sink: Sink, text: string): void {
  sink.write(`${text}\n`);
}

/** The API's JSON, indented, for --json. */
export function printJson(output: Output, value: unknown): void {
  println(output.stdout, JSON.stringify(value, null, 2));
}

/** The stream live progress goes to: never stdout when stdout carries JSON. */
export function liveSink(output: Output): Sink {
  return output.json ? output.stderr : output.stdout;
}

export interface CommandContext {
  client: AnvilClient;
  output: Output;
  /** The environment (secrets such as BMC passwords come from here, never from argv). */
  env: Readonly<Record<string, string | undefined>>;
}
