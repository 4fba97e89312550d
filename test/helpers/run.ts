import { exec } from "../../shared/system/exec.ts";

/** Runs a command to success and returns its stdout; a failure throws with the command line and its stderr. */
export async function runOk(
  command: string,
  args: string[],
  options: { input?: string; timeoutMs?: number } = {},
): Promise<string> {
  const result = await exec(command, args, { timeoutMs: options.timeoutMs ?? 120_000, input: options.input });
  if (result.code !== 0) throw new Error(`${command} ${args.join(" ")}: ${result.stderr.trim()}`);
  return result.stdout;
}
