import { BURNIN_DEFAULT_TIMEOUT_S, type StressResult } from "../../shared/burnin.ts";
import { CodedError } from "../../shared/errors.ts";
import { parseStressNg, tail } from "../hardware/burnin-output.ts";
import type { CommandContext } from "./command.ts";

/** stress-ng may overrun its --timeout while its workers stop; past this margin it is killed. */
const OVERRUN_MARGIN_S = 600;

/**
 * Runs one stress-ng stressor as IPA's burnin.stress_ng does (`--<stressor> N --timeout T [--vm-bytes B]
 * --metrics-brief`) and returns its metrics.
 * @throws CodedError COMMAND_FAILED naming the step when stress-ng cannot run, exits non-zero, reports a
 *   failure, or prints no metrics for its stressor.
 */
export async function runStressNg(
  options: {
    step: string;
    stressor: StressResult["stressor"];
    workers: number;
    timeoutS: number | undefined;
    extra?: string[];
  },
  context: CommandContext,
): Promise<StressResult> {
  const { step, stressor } = options;
  const { backend, signal, progress, logger } = context;
  const timeoutS = options.timeoutS ?? BURNIN_DEFAULT_TIMEOUT_S;
  const args = [
    `--${stressor}`,
    String(options.workers),
    "--timeout",
    String(timeoutS),
    ...(options.extra ?? []),
    "--metrics-brief",
  ];
  progress({ step, message: `stress-ng ${args.join(" ")}` });
  let run;
  try {
    run = await backend.burnin.stressNg(args, { signal, timeoutMs: (timeoutS + OVERRUN_MARGIN_S) * 1000 });
  } catch (error) {
    if (signal.aborted) throw error;
    throw new CodedError(
      "COMMAND_FAILED",
      `${step}: stress-ng (${stressor}) failed: ${(error as Error).message}`,
    );
  }
  // stress-ng reports on stderr; stdout is read too (a --log-file build may print there)
  const output = parseStressNg(`${run.stderr}\n${run.stdout}`);
  logger.info({ step, code: run.code, metrics: output.metrics, failures: output.failures }, "stress-ng done");
  const mine = output.metrics.filter((m) => m.stressor === stressor);
  if (run.code !== 0 || output.failures.length > 0 || mine.length === 0) {
    const why =
      output.failures.length > 0
        ? output.failures.slice(0, 3).join("; ")
        : run.code !== 0
          ? `exit status ${run.code ?? run.signal}: ${tail(run.stderr)}`
          : "no metrics in its output";
    throw new CodedError("COMMAND_FAILED", `${step}: stress-ng (${stressor}) failed: ${why}`);
  }
  return { tool: "stress-ng", stressor, timeout_s: timeoutS, metrics: mine };
}
