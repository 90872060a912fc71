import pino from "pino";
import { jsonText } from "./json-text.js";

export type Logger = pino.Logger;

/** Paths pino blanks out wherever they appear in a log record. */
const REDACTED_PATHS = [
  "authorization",
  "*.authorization",
  "headers.authorization",
  "*.headers.authorization",
  "password",
  "*.password",
  "secret",
  "*.secret",
  "clientSecret",
  "*.clientSecret",
  "client_secret",
  "*.client_secret",
  "token",
  "*.token",
  "licenseToken",
  "*.licenseToken",
  "accessToken",
  "*.accessToken",
  "access_token",
  "*.access_token",
];

/**
 * What a logged error keeps. Everything else is dropped: a TypeORM QueryFailedError carries `query`,
 * `parameters`, and a `driverError` and `sql` with the values inlined (a failed secret rotation would log the
 * new secret's hash).
 */
const ERROR_FIELDS = ["name", "message", "code", "errno", "sqlState", "stack"] as const;
/** Causes followed at most this deep: a cause may be a QueryFailedError too. */
const MAX_CAUSE_DEPTH = 3;

function serializeError(value: unknown, depth = 0): unknown {
  if (typeof value !== "object" || value === null) return value;
  const error = value as Record<string, unknown>;
  const record: Record<string, unknown> = {};
  if (value instanceof Error) record.type = value.constructor.name;
  for (const field of ERROR_FIELDS) if (error[field] !== undefined) record[field] = error[field];
  if (error.cause !== undefined && depth < MAX_CAUSE_DEPTH) record.cause = serializeError(error.cause, depth + 1);
  return record;
}

/** Request lines wait at most this long, or until this many characters are pending, before they are written. */
const REQUEST_LINES_DELAY_MS = 100;
const REQUEST_LINES_MAX_PENDING = 64 * 1024;

/**
 * A destination whose log records are written as they come, and whose request lines (one per request, see
 * requestLogOf) are held for up to 100 ms and written together: a paced service otherwise makes a write per
 * request. A record written while request lines are pending carries them in front of it, so lines keep their
 * order. Whatever is pending is written synchronously when the process exits.
 */
export class RequestLineBatching implements pino.DestinationStream {
  private pending = "";
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly target: pino.DestinationStream & { flushSync?: () => void }) {
    process.once("exit", () => this.flushSync());
  }

  write(record: string): void {
    this.target.write(this.take() + record);
  }

  writeRequestLine(line: string): void {
    this.pending += line;
    if (this.pending.length >= REQUEST_LINES_MAX_PENDING) this.writePending();
    else this.timer ??= setTimeout(() => this.writePending(), REQUEST_LINES_DELAY_MS).unref();
  }

  /** Called by pino's `logger.flush()`. */
  flush(done?: (error?: Error) => void): void {
    this.writePending();
    const target = this.target as { flush?: (done?: (error?: Error) => void) => void };
    if (target.flush) target.flush(done);
    else done?.();
  }

  flushSync(): void {
    this.writePending();
    try {
      this.target.flushSync?.();
    } catch {
      // A destination already closed takes nothing more.
    }
  }

  private writePending(): void {
    const pending = this.take();
    if (pending) this.target.write(pending);
  }

  private take(): string {
    clearTimeout(this.timer);
    this.timer = undefined;
    const pending = this.pending;
    this.pending = "";
    return pending;
  }
}

/**
 * Standard output, written asynchronously: lines logged while a write is under way go out together in the
 * next one, and request lines are batched (see RequestLineBatching), so a busy service makes far fewer system
 * calls than one write per line. Whatever is pending is written synchronously when the process exits.
 */
export function stdoutDestination(): pino.DestinationStream {
  return new RequestLineBatching(pino.destination({ dest: 1, sync: false }));
}

const RECORD_SHAPE = {
  base: { service: "provision" },
  timestamp: pino.stdTimeFunctions.isoTime,
  formatters: { level: (label: string) => ({ level: label }) },
};

export function createLogger(level: string, destination?: pino.DestinationStream): Logger {
  return pino(
    {
      ...RECORD_SHAPE,
      level,
      redact: { paths: REDACTED_PATHS, censor: "[redacted]" },
      serializers: { err: serializeError, error: serializeError },
    },
    destination,
  );
}

/** `"name":"value",`, or nothing when there is no value (as pino leaves out undefined fields). */
function textField(name: string, value: string | undefined): string {
  return value === undefined ? "" : `"${name}":${jsonText(value)},`;
}

/** The current time as pino's isoTime writes it, formatted once per millisecond. */
function isoTimeOfNow(): () => string {
  let formattedAt = Number.NaN;
  let formatted = "";
  return () => {
    const now = Date.now();
    if (now !== formattedAt) {
      formattedAt = now;
      formatted = new Date(now).toISOString();
    }
    return formatted;
  };
}

/** What the one line written per request says. */
export interface RequestRecord {
  requestId: string;
  method: string | undefined;
  path: string | undefined;
  status: number;
  httpVersion: string;
  /** Written to the microsecond. */
  durationMs: number;
}

/**
 * Writes the one line per request to the logger's destination, in the logger's record shape, at level info.
 * Its fields are fixed and never hold a secret, so the line is written as it is, without a pino record's
 * serializing and redaction: per request that was several times the cost of the line itself.
 */
export function requestLogOf(logger: Logger): (record: RequestRecord) => void {
  const destination = (logger as unknown as Record<symbol, pino.DestinationStream>)[pino.symbols.streamSym];
  const service = JSON.stringify(RECORD_SHAPE.base.service);
  const write =
    destination instanceof RequestLineBatching
      ? (line: string) => destination.writeRequestLine(line)
      : (line: string) => destination.write(line);
  const isoTime = isoTimeOfNow();
  return (record) => {
    if (!logger.isLevelEnabled("info")) return;
    write(
      `{"level":"info","time":"${isoTime()}","service":${service},` +
        `"requestId":${jsonText(record.requestId)},${textField("method", record.method)}` +
        `${textField("path", record.path)}"status":${record.status},` +
        `"httpVersion":${jsonText(record.httpVersion)},"durationMs":${Math.round(record.durationMs * 1000) / 1000},` +
        `"msg":"request"}\n`,
    );
  };
}
