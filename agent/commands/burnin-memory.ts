import type { CommandHandler } from "./command.ts";
import { runStressNg } from "./stress-ng.ts";

/**
 * burnin_memory (IPA's burnin.stress_ng_vm): stress-ng's vm stressor over `vm_bytes` (default 98 %) of the
 * memory for `timeout` seconds; its bogo ops are the result, a verification error fails it.
 * @throws CodedError COMMAND_FAILED when stress-ng fails.
 */
export const burninMemory: CommandHandler<"burnin_memory"> = (args, context) =>
  runStressNg(
    {
      step: "burnin_memory",
      stressor: "vm",
      workers: args.vm ?? 0,
      timeoutS: args.timeout,
      extra: ["--vm-bytes", args.vm_bytes ?? "98%"],
    },
    context,
  );
