import { type CountedAttempt, countAttempt, RateLimited, retryAfterSeconds } from "../platform/attempt-limits.js";
import type { Coordinator } from "../platform/coordinator.js";
import { DomainError } from "../platform/errors.js";
import type { Logger } from "../platform/logger.js";
import { warnThrottled } from "../platform/throttled-warnings.js";
import { addressBucket } from "../server/client-address.js";

const WINDOW_SECONDS = 60;
/** Refusals that say a guess was wrong: an activation code that does not exist, an email that does not match. */
const WRONG_GUESSES = new Set(["code-not-found", "email-mismatch"]);

/**
 * Activations presenting a code are counted per source address before the code is looked up; an activation that
 * does not fail as a wrong guess gives its point back. So an address can try at most `perAddress` wrong codes (or
 * invitation emails) a minute across every instance, however many it sends at once; past that every activation
 * from it answers 429 until the minute ends. Without Redis, activations go through uncounted (a warning is logged).
 */
export class ActivationGuesses {
  constructor(
    private readonly coordinator: Coordinator,
    private readonly perAddress: number,
    private readonly logger: Pick<Logger, "warn">,
  ) {}

  /** Runs `activation` as one counted attempt from `clientAddress`. */
  async attempt<T>(clientAddress: string, activation: () => Promise<T>): Promise<T> {
    const counted = await this.count(clientAddress);
    try {
      const result = await activation();
      await counted.succeeded();
      return result;
    } catch (error) {
      if (!(error instanceof DomainError && WRONG_GUESSES.has(error.slug))) await counted.succeeded();
      throw error;
    }
  }

  private async count(clientAddress: string): Promise<CountedAttempt> {
    const limiter = this.coordinator.rateLimiter({
      name: "activation:guesses",
      points: this.perAddress,
      durationSeconds: WINDOW_SECONDS,
    });
    try {
      return await countAttempt(limiter, addressBucket(clientAddress), (error) =>
        warnThrottled(
          this.logger,
          { err: { message: (error as Error).message } },
          "activation rate limit skipped: coordinator unavailable",
        ),
      );
    } catch (error) {
      if (!(error instanceof RateLimited)) throw error;
      const seconds = retryAfterSeconds(error);
      const detail = `too many activations from this address with a wrong code or still under way; retry in ${seconds} s`;
      throw new DomainError("rate-limited", detail, {
        slug: "rate-limited",
        headers: { "retry-after": String(seconds) },
      });
    }
  }
}
