import { Invalid } from "../errors.ts";

/**
 * A driver operation failed; retryable says whether trying again later may help, invalidRequest that the BMC
 * refused what was asked of it (a device, reset type or value it does not offer): Ironic's
 * InvalidParameterValue, a 400 rather than a failing BMC's 500.
 */
export class DriverError extends Error {
  readonly invalidRequest: boolean;

  constructor(
    message: string,
    readonly retryable = false,
    options: { invalidRequest?: boolean } = {},
  ) {
    super(message);
    this.name = "DriverError";
    this.invalidRequest = options.invalidRequest ?? false;
  }
}

/** driver_info (or another node field) is missing or malformed: an operator error, reported as 400. */
export class InvalidDriverInfo extends Invalid {
  constructor(message: string) {
    super(message);
    this.name = "InvalidDriverInfo";
  }
}
