/**
 * Domain errors that carry their meaning as an HTTP-like status (Ironic's exception.py: Invalid, NotFound,
 * Conflict, ...). Domain code (tasks, flows, drivers, allocations, images) throws these; the API only turns
 * them into Ironic's envelope, so nothing outside api/ imports from it.
 */
export class ConductorError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
    this.name = new.target.name;
  }
}

/** The request or the node's data is invalid (400). */
export class Invalid extends ConductorError {
  constructor(message: string) {
    super(400, message);
  }
}

/** The operation is refused for this resource (403). */
export class Forbidden extends ConductorError {
  constructor(message: string) {
    super(403, message);
  }
}

/** The resource does not exist (404). */
export class NotFound extends ConductorError {
  constructor(message: string) {
    super(404, message);
  }
}

/** The requested microversion does not allow this (406). */
export class NotAcceptable extends ConductorError {
  constructor(message: string) {
    super(406, message);
  }
}

/** The resource is locked, taken or in a state that conflicts with the request (409). */
export class Conflict extends ConductorError {
  constructor(message: string) {
    super(409, message);
  }
}
