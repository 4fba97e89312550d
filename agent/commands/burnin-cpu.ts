import type { CommandHandler } from "./command.ts";
import { runStressNg } from "./stress-ng.ts";

/**
 * burnin_cpu (IPA's burnin.stress_ng_cpu): stress-ng's cpu stressor on every CPU (or `cpu` workers) for
 * `timeout` seconds; its bogo ops are the result.
 * @throws CodedError COMMAND_FAILED when stress-ng fails.
 */
export const burninCpu: CommandHandler<"burnin_cpu"> = (args, context) =>
  runStressNg(
    { step: "burnin_cpu", stressor: "cpu", workers: args.cpu ?? 0, timeoutS: args.timeout },
    context,
  );
