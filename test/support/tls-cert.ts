import { execFile } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";

export interface SelfSignedCert {
  dir: string;
  certFile: string;
  keyFile: string;
  /** The certificate PEM, to trust as the only CA. */
  cert: Buffer;
  remove(): void;
}

/** A one-day self-signed P-256 certificate for `localhost`, made with the openssl CLI in a fresh temp dir. */
export async function createSelfSignedCert(): Promise<SelfSignedCert> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "provision-tls-"));
  const certFile = path.join(dir, "cert.pem");
  const keyFile = path.join(dir, "key.pem");
  await promisify(execFile)("openssl", [
    "req",
    "-x509",
    "-newkey",
    "ec",
    "-pkeyopt",
    "ec_paramgen_curve:prime256v1",
    "-nodes",
    "-keyout",
    keyFile,
    "-out",
    certFile,
    "-days",
    "1",
    "-subj",
    "/CN=localhost",
  ]);
  return {
    dir,
    certFile,
    keyFile,
    cert: fs.readFileSync(certFile),
    remove: () => fs.rmSync(dir, { recursive: true, force: true }),
  };
}
