/** The CLI's failures and the exit codes main maps them to. */

/** A bad command line: exit 2 with the usage hint. */
export class UsageError extends Error {
  override name = "UsageError";
  readonly exitCode = 2;
}

/** A command that ran and failed (API fault, failed node, timeout): exit 1. */
export class CliError extends Error {
  override name = "CliError";
  readonly exitCode = 1;
}

/** The API answered with an error; `message` is the faultstring from Ironic's envelope. */
export class ApiFault extends CliError {
  override name = "ApiFault";
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}
