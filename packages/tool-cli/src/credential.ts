import { createPublicKey } from 'node:crypto';
import { errors, type JWTPayload, jwtVerify, SignJWT } from 'jose';
import { z } from 'zod';
import { CliError } from './output.js';

/**
 * The controlled credential (Agent Tool Protocol §11): a short-lived JWT OAR issues per call (or run) from the
 * session's authority and hands the CLI in its environment, never in its arguments. It names who acts (`sub`, the
 * workspace `ws`), what they may do (`ops`: `module.method` patterns, `*` for a whole module) and when it ends.
 * Identity is the verified credential only: an `owner_id` in a method's input is data, never identity.
 */

/** The environment variable the credential arrives in. */
export const CREDENTIAL_ENV = 'OAR_TOOL_CREDENTIAL';

export const CredentialClaimsSchema = z.object({
  /** Who acts: the local user in CLI mode, `api_key:<id>` behind the server. */
  sub: z.string().min(1),
  /** The workspace the CLI must confine its data to. */
  ws: z.string().min(1),
  /** Operations the holder may run: `calendar.read`, `calendar.*`. */
  ops: z.array(z.string().regex(/^[a-z][a-z0-9_]*\.([a-z][a-z0-9_]*|\*)$/)).min(1),
  /** The OAR session and tool call it was issued for (audit only). */
  sid: z.string().optional(),
  tcid: z.string().optional(),
  iat: z.number(),
  exp: z.number(),
});
export type CredentialClaims = z.infer<typeof CredentialClaimsSchema>;

export type CredentialKey = { algorithm: 'HS256'; secret: string } | { algorithm: 'EdDSA'; key: string };

const ISSUER = 'oar';
const AUDIENCE = 'oar-tool-cli';

/** The operations a credential grants include `module.method`. */
export function grants(claims: Pick<CredentialClaims, 'ops'>, module: string, method: string): boolean {
  return claims.ops.some((op) => op === `${module}.${method}` || op === `${module}.*`);
}

/** Issue a credential (OAR's side; here so issuer and verifier share one claim shape). TTL in seconds. */
export async function issueCredential(
  claims: Omit<CredentialClaims, 'iat' | 'exp'>,
  key: CredentialKey,
  ttlSeconds: number,
): Promise<string> {
  const jwt = new SignJWT({
    ws: claims.ws,
    ops: claims.ops,
    ...(claims.sid ? { sid: claims.sid } : {}),
    ...(claims.tcid ? { tcid: claims.tcid } : {}),
  })
    .setProtectedHeader({ alg: key.algorithm })
    .setSubject(claims.sub)
    .setIssuer(ISSUER)
    .setAudience(AUDIENCE)
    .setIssuedAt()
    .setExpirationTime(`${ttlSeconds}s`);
  if (key.algorithm === 'HS256') return jwt.sign(new TextEncoder().encode(key.secret));
  const { createPrivateKey } = await import('node:crypto');
  return jwt.sign(createPrivateKey(key.key));
}

/**
 * Verify a credential: signature, issuer, audience, expiry (no leeway beyond 5 s of clock skew) and the claim
 * shape. Throws `CliError` CREDENTIAL_MISSING / CREDENTIAL_EXPIRED / CREDENTIAL_INVALID; its message never holds
 * the token.
 */
export async function verifyCredential(token: string | undefined, key: CredentialKey): Promise<CredentialClaims> {
  if (!token) throw new CliError('CREDENTIAL_MISSING', `no credential: OAR passes one in ${CREDENTIAL_ENV}`);
  let payload: JWTPayload;
  try {
    const verifyKey = key.algorithm === 'HS256' ? new TextEncoder().encode(key.secret) : createPublicKey(key.key);
    ({ payload } = await jwtVerify(token, verifyKey, {
      algorithms: [key.algorithm],
      issuer: ISSUER,
      audience: AUDIENCE,
      clockTolerance: 5,
      requiredClaims: ['sub', 'exp', 'iat'],
    }));
  } catch (error) {
    if (error instanceof errors.JWTExpired) throw new CliError('CREDENTIAL_EXPIRED', 'the credential has expired');
    throw new CliError('CREDENTIAL_INVALID', `the credential is not valid (${(error as Error).name})`);
  }
  const claims = CredentialClaimsSchema.safeParse(payload);
  if (!claims.success) throw new CliError('CREDENTIAL_INVALID', 'the credential does not carry the expected claims');
  return claims.data;
}
