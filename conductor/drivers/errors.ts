import { Invalid } from "../errors.ts";

/** A driver operation failed; retryable says whether trying again later may help. */
export class DriverError extends Error {
  constructor(
    message: string,
    readonly retryable = false,
  ) {
    super(message);
    this.name = "DriverError";
  }
}

/** driver_info (or another node field) is missing or malformed: an operator error, reported as 400. */
export class InvalidDriverInfo extends Invalid {
  constructor(message: string) {
    super(message);
    this.name = "InvalidDriverInfo";
  }
}
