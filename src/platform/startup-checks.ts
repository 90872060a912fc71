import { createPrivateKey, X509Certificate } from "node:crypto";
import fs from "node:fs";
import net from "node:net";
import tls from "node:tls";
import { ConfigError, type TlsConfig } from "./config.js";

/**
 * What the environment must allow before the service writes anything (migrations, a first client whose secret is
 * printed once): a start that fails later, at `listen`, would leave that done for a process that never served.
 */
export async function checkStartup(config: { host: string; port: number; tls?: TlsConfig }): Promise<void> {
  checkTlsFiles(config.tls);
  await checkListenAddress(config.host, config.port);
}

/** The TLS files are a PEM certificate and the PEM private key that goes with it. */
export function checkTlsFiles(files: TlsConfig | undefined): void {
  if (!files) return;
  const cert = readable("TLS_CERT_FILE", files.certFile);
  const key = readable("TLS_KEY_FILE", files.keyFile);
  try {
    new X509Certificate(cert);
  } catch (error) {
    throw new ConfigError("TLS_CERT_FILE", `is not a PEM certificate: ${(error as Error).message}`);
  }
  try {
    createPrivateKey(key);
  } catch (error) {
    throw new ConfigError("TLS_KEY_FILE", `is not a PEM private key: ${(error as Error).message}`);
  }
  try {
    tls.createSecureContext({ cert, key });
  } catch (error) {
    throw new ConfigError("TLS_KEY_FILE", `does not go with the certificate: ${(error as Error).message}`);
  }
}

function readable(variable: string, file: string): Buffer {
  try {
    return fs.readFileSync(file);
  } catch {
    throw new ConfigError(variable, `names a file that cannot be read: ${file}`);
  }
}

/** Binds HOST:PORT once and lets it go: a port in use, or an address not of this machine, is told now. */
async function checkListenAddress(host: string, port: number): Promise<void> {
  const probe = net.createServer();
  try {
    await new Promise<void>((resolve, reject) => {
      probe.once("error", reject);
      probe.listen({ host, port, exclusive: true }, () => resolve());
    });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? (error as Error).message;
    if (code === "EADDRINUSE" || code === "EACCES") {
      throw new ConfigError("PORT", `${port} cannot be listened on at ${host}: ${code}`);
    }
    throw new ConfigError("HOST", `${host} cannot be listened on: ${code}`);
  } finally {
    await new Promise((resolve) => probe.close(resolve));
  }
}
