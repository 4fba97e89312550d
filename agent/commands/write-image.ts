import { ImageError } from "../image/errors.ts";
import { writeImage as streamImage } from "../image/write-image.ts";
import { CodedError } from "../../shared/errors.ts";
import type { CommandHandler } from "./command.ts";
import { resolveTargetDisk } from "./target-disk.ts";

/**
 * Streams the image onto the disk the root device hints pick. The result is the pipeline's (bytes,
 * checksum, partitions) plus the chosen disk, so the conductor can record it.
 */
export const writeImage: CommandHandler<"write_image"> = async (args, context) => {
  const { backend, signal, progress, logger } = context;
  const { root_device: hints, ...request } = args;
  const disk = await resolveTargetDisk(backend, hints, signal);
  progress({ step: "write_image", message: `writing to ${disk.name}` });
  try {
    const result = await streamImage(request, {
      target: disk.name,
      signal,
      logger,
      ...(context.swarm === undefined ? {} : { swarm: context.swarm }),
      onProgress: (p) => progress({ step: "write_image", ...p }),
    });
    return { ...result, root_device: disk };
  } catch (error) {
    if (signal.aborted) throw error;
    if (error instanceof ImageError) {
      throw new CodedError(error.retryable ? "COMMAND_FAILED_RETRYABLE" : "COMMAND_FAILED", error.message, {
        cause: error,
      });
    }
    throw error;
  }
};
