/**
 * Redaction: secrets never enter the record. `Redactor` turns text, JSON values and bytes into their redacted form
 * (`[REDACTED:<kind>]`) and counts what it replaced, for the `output.redacted` fact. See docs/security.md.
 *
 * - kinds.ts — the kinds and the marker;
 * - literals.ts — known secret values and the encodings they are searched in;
 * - literal-scan.ts — finding many literals in one linear pass (rolling hash);
 * - patterns.ts — credential shapes (keys, tokens, PEM blocks, JWTs, passwords in URLs and DSNs);
 * - scanner.ts — literals and patterns together: one pass each, ranges merged, markers written;
 * - redactor.ts — `Redactor`: text, JSON (copy-on-write), bytes;
 * - tally.ts — counts per kind and the `output.redacted` payload;
 * - dotenv.ts — `.env` parsing and which values are secrets;
 * - sources.ts — the binding's secret env vars and the workspace's `.env*` files (the only I/O);
 * - connection-url.ts — `maskConnectionUrl` for store locations.
 */
export { maskConnectionUrl } from './connection-url.js';
export { type DotenvEntry, dotenvSecretValues, isDotenvFileName, isDotenvSecret, parseDotenv } from './dotenv.js';
export { REDACTION_KINDS, type RedactionKind, redactionMarker } from './kinds.js';
export { type LiteralSecret, literalVariants, MIN_SECRET_LENGTH } from './literals.js';
export { CREDENTIAL_PATTERNS, type CredentialPattern } from './patterns.js';
export { type Redacted, Redactor, type RedactorOptions } from './redactor.js';
export {
  bindingSecrets,
  type DotenvSearchOptions,
  dotenvSecrets,
  envSecrets,
  findDotenvFiles,
  processRedactor,
  type SecretBindingFields,
  secretEnvNames,
} from './sources.js';
export { type RedactionCounts, type RedactionSink, RedactionTally, redactionFact } from './tally.js';
