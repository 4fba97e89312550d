import { CodedError } from "../../shared/errors.ts";

/**
 * Runs one step of a command; a failure becomes COMMAND_FAILED prefixed with what was being done (so the
 * conductor's last_error names the disk or array). CodedErrors and aborts pass through unchanged.
 */
export async function step<T>(what: string, action: () => Promise<T>): Promise<T> {
  try {
    return await action();
  } catch (error) {
    if (error instanceof CodedError || (error as Error).name === "AbortError") throw error;
    throw new CodedError("COMMAND_FAILED", `${what}: ${(error as Error).message}`, { cause: error });
  }
}
