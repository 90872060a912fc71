/** The kinds of failure the domain reports; `src/server/problem-mapping.ts` maps each to a gRPC code and an HTTP status. */
export type ProblemKind =
  | "invalid-argument"
  | "not-found"
  | "conflict"
  | "failed-precondition"
  | "unauthenticated"
  | "permission-denied"
  | "rate-limited"
  | "too-large"
  | "unimplemented"
  | "unavailable"
  | "internal";

export interface FieldViolation {
  /** JSON name of the field, with a path for nested fields (`features[0].featureCode`). */
  field: string;
  message: string;
}

export interface DomainErrorOptions {
  /** Problem type slug: the problem `type` is `urn:provision:problem:<slug>`. Defaults to the kind. */
  slug?: string;
  errors?: FieldViolation[];
  /** Response headers the error needs (`www-authenticate`, `retry-after`), on every protocol. */
  headers?: Record<string, string>;
}

/** An error the client caused or must know about; its message is safe to show to the caller. */
export class DomainError extends Error {
  readonly kind: ProblemKind;
  readonly slug: string;
  readonly errors: FieldViolation[];
  readonly headers: Record<string, string>;

  constructor(kind: ProblemKind, message: string, options: DomainErrorOptions = {}) {
    super(message);
    this.name = "DomainError";
    this.kind = kind;
    this.slug = options.slug ?? kind;
    this.errors = options.errors ?? [];
    this.headers = options.headers ?? {};
  }
}

export function invalidArgument(message: string, errors: FieldViolation[] = []): DomainError {
  return new DomainError("invalid-argument", message, {
    slug: errors.length > 0 ? "validation" : "invalid-argument",
    errors,
  });
}

/** One invalid field: the error names the field in `errors` as well as in the message. */
export function invalidField(field: string, message: string): DomainError {
  return invalidArgument(`${field}: ${message}`, [{ field, message }]);
}

export function notFound(what: string, id: string): DomainError {
  return new DomainError("not-found", `${what} ${JSON.stringify(id)} was not found`, { slug: "not-found" });
}

export function conflict(message: string, slug = "conflict"): DomainError {
  return new DomainError("conflict", message, { slug });
}
