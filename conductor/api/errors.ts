import { ZodError } from "zod";
import { JsonLimitError } from "../../shared/json-shape.ts";
import { DriverError } from "../drivers/errors.ts";
import { ConductorError, Conflict, Invalid, NotFound } from "../errors.ts";

// NOTE: the status-carrying errors live in conductor/errors.ts (domain code throws them); these aliases keep
// the API plugins' short spellings.
export { ConductorError as ApiError } from "../errors.ts";
export const badRequest = (message: string): Invalid => new Invalid(message);
export const notFound = (message: string): NotFound => new NotFound(message);
export const conflict = (message: string): Conflict => new Conflict(message);

/** Python's repr of a string, as jsonschema's messages quote values (cut: a long value is not echoed whole). */
export function pyRepr(value: unknown): string {
  const text = typeof value === "string" ? value.slice(0, 300) : String(JSON.stringify(value)).slice(0, 300);
  return text.includes("'") && !text.includes('"') ? `"${text}"` : `'${text.replace(/'/g, "\\'")}'`;
}

/** Ironic's envelope: the fault is JSON inside a JSON string; faultcode is "Server" for 5xx, as Ironic's. */
export function errorBody(message: string, status = 400): { error_message: string } {
  const faultcode = status >= 500 ? "Server" : "Client";
  return { error_message: JSON.stringify({ faultcode, faultstring: message, debuginfo: null }) };
}

export function notAcceptableBody(description: string): { error_message: string } {
  return { error_message: JSON.stringify({ code: 406, title: "Not Acceptable", description }) };
}

function zodMessage(error: ZodError): string {
  return error.issues
    .map((issue) => {
      const path = issue.path.join(".");
      if (issue.code === "unrecognized_keys") return `Unknown attribute(s): ${issue.keys.join(", ")}`;
      // Ironic's args.boolean wording for the strict boolean reader
      if (issue.code === "custom" && issue.params?.strictBool === true)
        return `Invalid ${path}: ${issue.message}`;
      if (issue.code === "custom" && typeof issue.params?.expected === "string")
        return `Expected ${issue.params.expected} for ${path}: ${issue.message}`;
      return path ? `Invalid input for field/attribute ${path}. ${issue.message}` : issue.message;
    })
    .join("; ");
}

/** Maps any thrown value to a status and a client-safe message. Unknown errors are 500 with no detail. */
export function toHttpError(error: unknown): { status: number; message: string } {
  if (error instanceof ConductorError) return { status: error.status, message: error.message };
  if (error instanceof ZodError) return { status: 400, message: zodMessage(error) };
  if (error instanceof JsonLimitError) return { status: 400, message: error.message };
  // Ironic's TemporaryFailure (503) for a BMC that did not answer, its IPMIFailure/DriverOperationError
  // (500, faultcode Server, with the reason) for a BMC that answered with an error
  // a BMC that refused the request's own value (its 400 with a Base registry id naming the value, or a
  // device/reset type the system does not list) is Ironic's InvalidParameterValue
  if (error instanceof DriverError && error.invalidRequest) return { status: 400, message: error.message };
  if (error instanceof DriverError)
    return { status: error.retryable ? 503 : 500, message: `Driver operation failed: ${error.message}` };
  if (typeof error === "object" && error !== null && "statusCode" in error) {
    // fastify's own errors: body parsing, content type, size
    const status = Number((error as { statusCode: unknown }).statusCode);
    if (status === 413) {
      // webob's HTTPRequestEntityTooLarge as oslo.middleware's sizelimit raises it, in Ironic's envelope
      return { status, message: "Request is too large." };
    }
    const message = error instanceof Error ? error.message : "Bad request";
    if (status >= 400 && status < 500) return { status, message };
  }
  return { status: 500, message: "Internal server error, see the conductor log." };
}
