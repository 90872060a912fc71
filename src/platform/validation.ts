import type { DescEnum } from "@bufbuild/protobuf";
import { type FieldViolation, invalidArgument } from "./errors.js";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function isUuid(value: string): boolean {
  return UUID.test(value);
}

/** Collects every invalid field of a request, then fails once naming them all. */
export class Violations {
  readonly list: FieldViolation[] = [];

  add(field: string, message: string): this {
    this.list.push({ field, message });
    return this;
  }

  required(field: string, value: string): this {
    if (value.trim() === "") this.add(field, "is required");
    return this;
  }

  maxLength(field: string, value: string | undefined, max: number): this {
    if (value !== undefined && [...value].length > max) this.add(field, `must be at most ${max} characters`);
    return this;
  }

  uuid(field: string, value: string | undefined): this {
    if (value && !isUuid(value)) this.add(field, "must be a UUID");
    return this;
  }

  enumValue(field: string, value: number, descriptor: DescEnum): this {
    if (!descriptor.values.some((candidate) => candidate.number === value)) {
      const allowed = descriptor.values.map((candidate) => candidate.number).join(", ");
      this.add(field, `must be one of ${allowed}`);
    }
    return this;
  }

  throwIfAny(): void {
    if (this.list.length === 0) return;
    const summary = this.list.map((violation) => `${violation.field} ${violation.message}`).join("; ");
    throw invalidArgument(`invalid request: ${summary}`, this.list);
  }
}

/** Fails at once when a path parameter is not a UUID. */
export function requireUuid(field: string, value: string): string {
  new Violations().required(field, value).uuid(field, value).throwIfAny();
  return value.toLowerCase();
}

export const MAX_EMAIL_LENGTH = 320;
/** One `@`, no white space, a dot in the domain: a plausible address, not a full RFC 5322 parse. */
const EMAIL = /^[^\s@]{1,64}@[^\s@.]+(\.[^\s@.]+)+$/;

export function isEmailAddress(value: string): boolean {
  return value.length <= MAX_EMAIL_LENGTH && EMAIL.test(value);
}
