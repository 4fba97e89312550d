import { ZodError } from "zod";
import { ConductorError, Conflict, Invalid, NotFound } from "../errors.ts";

// NOTE: the status-carrying errors live in conductor/errors.ts (domain code throws them); these aliases keep
// the API plugins' short spellings.
export { ConductorError as ApiError } from "../errors.ts";
export const badRequest = (message: string): Invalid => new Invalid(message);
export const notFound = (message: string): NotFound => new NotFound(message);
export const conflict = (message: string): Conflict => new Conflict(message);

/** Ironic's envelope: the fault is JSON inside a JSON string. */
export function errorBody(message: string): { error_message: string } {
  return { error_message: JSON.stringify({ faultcode: "Client", faultstring: message, debuginfo: null }) };
}

export function notAcceptableBody(description: string): { error_message: string } {
  return { error_message: JSON.stringify({ code: 406, title: "Not Acceptable", description }) };
}

function zodMessage(error: ZodError): string {
  return error.issues
    .map((issue) => {
      const path = issue.path.join(".");
      if (issue.code === "unrecognized_keys") return `Unknown attribute(s): ${issue.keys.join(", ")}`;
      return path ? `Invalid input for field/attribute ${path}. ${issue.message}` : issue.message;
    })
    .join("; ");
}

/** Maps any thrown value to a status and a client-safe message. Unknown errors are 500 with no detail. */
export function toHttpError(error: unknown): { status: number; message: string } {
  if (error instanceof ConductorError) return { status: error.status, message: error.message };
  if (error instanceof ZodError) return { status: 400, message: zodMessage(error) };
  if (typeof error === "object" && error !== null && "statusCode" in error) {
    // fastify's own errors: body parsing, content type, size
    const status = Number((error as { statusCode: unknown }).statusCode);
    const message = error instanceof Error ? error.message : "Bad request";
    if (status >= 400 && status < 500) return { status, message };
  }
  return { status: 500, message: "Internal server error, see the conductor log." };
}
