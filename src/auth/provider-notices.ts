import { isEmailAddress } from "../platform/validation.js";

/** What a provider's licenses say of it; null = not set. */
export interface ProviderNotices {
  copyright: string | null;
  url: string | null;
  email: string | null;
}

/** The bus channel a provider's change is published on (by the CLI's `providers update`), its id the message. */
export const PROVIDER_CHANGED_CHANNEL = "provider-changed";

const LIMITS = { copyright: 255, url: 2048, email: 320 } as const;

/** Why `value` cannot be the provider's `field`, or null when it can ("" clears it). */
export function providerNoticeProblem(field: keyof ProviderNotices, value: string): string | null {
  if (value === "") return null;
  if ([...value].length > LIMITS[field]) return `must be at most ${LIMITS[field]} characters`;
  if (field === "url" && !isWebAddress(value)) return "must be an absolute http or https URL";
  if (field === "email" && !isEmailAddress(value)) return "must be an email address";
  return null;
}

function isWebAddress(value: string): boolean {
  try {
    const url = new URL(value);
    return (url.protocol === "https:" || url.protocol === "http:") && url.hostname !== "";
  } catch {
    return false;
  }
}
